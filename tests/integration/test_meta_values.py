"""Values the sidecar reads back from ``sidecar_meta`` are checked before they name a file, a
folder or anything else: the sidecar's role can write that table (issue 45)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from sidecar.db import Database
from sidecar.db.meta import set_meta
from sidecar.db.schema import with_search_path
from sidecar.db.served_embedder import SERVED_KEY, read_served
from sidecar.errors import ConfigurationError
from sidecar.keyword.node import KeywordIndex
from tests.conftest import drop_database, import_demo, new_database, sidecar_url


@pytest.fixture
def role(pg_admin_url: str) -> Iterator[str]:
    """The demo forum and the sidecar's role's URL."""
    url = new_database(pg_admin_url, "t_meta")
    try:
        import_demo(url)
        yield sidecar_url(url)
    finally:
        drop_database(pg_admin_url, url)


def _meta(role: str, key: str, value: str) -> None:
    with psycopg.connect(with_search_path(role), row_factory=psycopg.rows.dict_row) as conn:
        set_meta(conn, key, value)


ABSOLUTE = "/tmp/sidecar-test-escaped-keyword-index"


@pytest.mark.parametrize("planted", ["../../escaped", ABSOLUTE, "not-a-uuid", ""])
def test_the_keyword_index_id_is_a_uuid_or_nothing(role: str, tmp_path: Path,
                                                   planted: str) -> None:
    """Fault (issue 45): the keyword index's id, read from sidecar_meta, became a folder under
    the state directory as it was: ``../..`` sent the index's files elsewhere."""
    state = tmp_path / "deep" / "state"
    db = Database(role, min_size=1, max_size=1)
    db.open()
    try:
        assert KeywordIndex(db, state, "english").folder().root.parent == state / "keyword"
        _meta(role, "keyword_index_id", planted)
        with pytest.raises(ConfigurationError, match="keyword_index_id is not a UUID"):
            KeywordIndex(db, state, "english").folder()
    finally:
        db.close()
    made = {p.relative_to(tmp_path) for p in tmp_path.rglob("*")}
    assert all(str(p).startswith("deep/state/keyword") or p in (Path("deep"),
               Path("deep/state")) for p in made), made
    assert not (tmp_path / "deep" / "escaped").exists() and not Path(ABSOLUTE).exists()


def test_the_promoted_embedder_names_a_model_folder_or_nothing(role: str) -> None:
    entry = {"name": "../../../etc", "base": "all-minilm-l6-v2",
             "promoted_at": "2026-12-05T00:00:00+00:00", "evidence": {}, "previous": None}
    _meta(role, SERVED_KEY, json.dumps(entry))
    with psycopg.connect(with_search_path(role), row_factory=psycopg.rows.dict_row) as conn:
        with pytest.raises(ConfigurationError, match="not an entry the sidecar writes"):
            read_served(conn)
        entry.update(name="tuned", previous={**entry, "name": "../up"})
        set_meta(conn, SERVED_KEY, json.dumps(entry))
        with pytest.raises(ConfigurationError, match="not a plain model name"):
            read_served(conn)
        entry.update(previous=None)
        set_meta(conn, SERVED_KEY, json.dumps(entry))
        served = read_served(conn)
    assert served is not None and served.name == "tuned"
