"""`make lint`: SQL runs in the data-access layer (``sidecar/db/``) only.

Everywhere else calls small typed functions of ``sidecar.db`` (their rows are dataclasses). A
call is SQL when it is ``X.execute(query, ...)`` or ``X.executemany(query, ...)`` with a query
argument (a Redis pipeline's ``pipe.execute()`` takes none), or ``X.cursor(...)``; composing SQL
means importing ``psycopg.sql``. Both are flagged outside the layer and the few places
:data:`ALLOWED` names, each with its reason. Opening a connection (``psycopg.connect``) is not
SQL: a caller may hold one and pass it to the layer's functions.

    python scripts/check_sql.py [ROOT ...]    # exit 1 and one line per SQL call outside
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOTS = ("sidecar", "jobs", "models", "scripts")
ALLOWED: dict[str, str] = {
    "sidecar/db/": "the data-access layer: queries, pool, migrations (the migration runner)",
    "sidecar/bench/": "the benchmarks build scratch forums of 100k-1M generated posts (COPY) and "
                      "time SQL variants side by side: that SQL is what they measure, in "
                      "throwaway databases, not the sidecar's own data access",
    "scripts/explain_public_filter.py": "prints EXPLAIN ANALYZE of the public filter on a "
                                        "synthetic forum: a diagnostic of the SQL itself",
}
WITH_QUERY = {"execute", "executemany"}


def _sql_calls(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each SQL call or ``psycopg.sql`` import in ``tree``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            if (name in WITH_QUERY and node.args) or name == "cursor":
                found.append((node.lineno, f".{name}()"))
        elif isinstance(node, ast.ImportFrom) and node.module == "psycopg" \
                and any(alias.name == "sql" for alias in node.names):
            found.append((node.lineno, "from psycopg import sql"))
        elif isinstance(node, ast.ImportFrom | ast.Import):
            modules = [node.module] if isinstance(node, ast.ImportFrom) else \
                [alias.name for alias in node.names]
            if "psycopg.sql" in modules:
                found.append((node.lineno, "import psycopg.sql"))
    return sorted(found)


def outside(path: Path) -> list[str]:
    """``path:line: what`` for each SQL call of ``path`` (none when the path is allowed)."""
    if path.as_posix().startswith(tuple(ALLOWED)):
        return []
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path}:{line}: {what}" for line, what in _sql_calls(tree)]


def main(roots: list[str]) -> int:
    problems = [line for root in roots for path in sorted(Path(root).rglob("*.py"))
                for line in outside(path)]
    for line in problems:
        print(line)
    if problems:
        print(f"{len(problems)} SQL calls outside sidecar/db/: move the query into a function "
              "of a sidecar.db module (rows as dataclasses through sidecar.db.rows), or, where "
              "SQL is the very subject, add the path to ALLOWED with its reason",
              file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or list(ROOTS)))
