"""`make lint`: every import inside a function says why it is there.

A function-level import is allowed only where fork safety (nothing heavy in a process that
forks gunicorn workers or spawns children: ONNX Runtime's and numpy's thread pools do not survive
a fork) or a heavy or optional dependency (torch, matplotlib, the embedded servers...) needs it.
Import circles and the layers are checked by import-linter (`lint-imports`, contracts in
pyproject.toml); this check keeps the imports that circles once forced into functions from
coming back unexplained.

The reason is a comment that names one of REASONS: on the import's line, in the comment lines
right above the group of imports it belongs to, or, for a module whose functions all import
late for one reason (the CLI's commands), in a module-level comment starting with
``# Deferred imports``. An import in a ``try`` that catches ImportError is an optional
dependency by construction. ``if TYPE_CHECKING:`` blocks are not function-level imports.

    python scripts/check_imports.py [ROOT ...]    # exit 1 and one line per unexplained import
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOTS = ("sidecar", "models", "jobs")
REASONS = re.compile(r"fork safety|heavy dependency|optional dependency", re.I)
MODULE_MARKER = re.compile(r"^# Deferred imports\b.*", re.I)
# Being reworked on another branch (the scale benchmarks, issue 10): checked once that lands.
PENDING: tuple[str, ...] = ()


def _module_reason(lines: list[str]) -> bool:
    """A top-level ``# Deferred imports (...)`` comment block that names a reason."""
    for i, line in enumerate(lines):
        if MODULE_MARKER.match(line):
            block = [line]
            for follow in lines[i + 1:]:
                if not follow.startswith("#"):
                    break
                block.append(follow)
            if REASONS.search(" ".join(block)):
                return True
    return False


def _guards_import_error(node: ast.AST) -> bool:
    """A ``try`` whose handlers catch ImportError: what it imports is an optional dependency."""
    if not isinstance(node, ast.Try):
        return False
    for handler in node.handlers:
        caught = handler.type
        names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        if any(isinstance(n, ast.Name) and n.id in {"ImportError", "ModuleNotFoundError"}
               for n in names):
            return True
    return False


def _import_runs(tree: ast.AST) -> list[list[ast.Import | ast.ImportFrom]]:
    """Runs of consecutive import statements inside functions (a group, blank lines allowed)."""
    runs: dict[int, list[ast.Import | ast.ImportFrom]] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            for name in ("body", "orelse", "finalbody"):
                block = getattr(node, name, None)
                if not isinstance(block, list):
                    continue
                if name == "body" and _guards_import_error(node):
                    continue  # `try: import x / except ImportError:` is optional by construction
                run: list[ast.Import | ast.ImportFrom] = []
                for stmt in [*block, None]:
                    if isinstance(stmt, ast.Import | ast.ImportFrom):
                        run.append(stmt)
                    elif run:
                        runs[run[0].lineno] = run  # a nested def is walked more than once
                        run = []
    return [runs[k] for k in sorted(runs)]


def _explained(lines: list[str], run: list[ast.Import | ast.ImportFrom]) -> bool:
    """A reason on one of the run's lines, or in the comment lines right above it."""
    start = run[0].lineno - 1
    while start > 0 and lines[start - 1].strip().startswith("#"):
        start -= 1
    end = run[-1].end_lineno or run[-1].lineno
    return any(REASONS.search(line) for line in lines[start:end])


def unexplained(path: Path) -> list[str]:
    """``path:line: import`` for each function-level import of ``path`` without a reason."""
    source = path.read_text()
    lines = source.splitlines()
    runs = _import_runs(ast.parse(source, str(path)))
    if not runs or _module_reason(lines):
        return []
    return [f"{path}:{node.lineno}: {lines[node.lineno - 1].strip()}"
            for run in runs if not _explained(lines, run) for node in run]


def main(roots: list[str]) -> int:
    problems = [line for root in roots for path in sorted(Path(root).rglob("*.py"))
                if not path.as_posix().startswith(PENDING) for line in unexplained(path)]
    for line in problems:
        print(line)
    if problems:
        print(f"{len(problems)} function-level imports without a reason: move them to the top "
              f"of the module, or say why in a comment ({REASONS.pattern})", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or list(ROOTS)))
