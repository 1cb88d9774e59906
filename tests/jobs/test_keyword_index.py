"""The keyword index (Tantivy, one copy per node): privacy, statistics, sync, rebuild, nodes.

The demo forum on real PostgreSQL; each "node" is a KeywordIndex over its own state directory,
as two API machines would have. Changes reach the indexes as on a real forum: index events over
HTTP, or rows changed with no event at all (caught up from ``updated_at``).
"""

from __future__ import annotations

import fcntl
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from sidecar.cli import main
from sidecar.config.settings import Settings
from sidecar.core.tsquery import as_words, parse_tsquery, positive_lexemes, rarest_words
from sidecar.core.types import Mode
from sidecar.db import keyword_sql as ksql
from sidecar.db.forum_write import reindex_search_data
from sidecar.keyword import KeywordIndex, keyword_leg, keyword_tsquery, rebuild_keyword_index
from sidecar.keyword.changes import ask_every_node_to_rebuild, catch_up
from sidecar.keyword.leg import _postings
from sidecar.keyword.store import TEXT_FIELDS
from sidecar.runtime.resources import Resources
from sidecar.search.service import SearchOptions
from tests.conftest import API_KEY, owner_url
from tests.jobs.conftest import public_post_ids

# The served limit on a plain question's words (SIDECAR_KEYWORD_MAX_WORDS' default).
MAX_WORDS = Settings.model_fields["keyword_max_words"].default

AUTH = {"Authorization": f"Bearer {API_KEY}"}
PROBES = json.loads((Path(__file__).resolve().parents[1] / "data"
                     / "demo_private_probes.json").read_text())
NEW_POST = 900_001


def _sql(res: Resources, query: str, *params: Any) -> list[Any]:
    with psycopg.connect(owner_url(res.urls.database_url)) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def _hits(res: Resources, index: KeywordIndex, query: str, k: int = 1000,
          max_words: int = 0, question_words: int = 0) -> list[Any]:
    searcher = index.searcher()
    assert searcher is not None
    with res.db.connection() as conn:
        return keyword_leg(conn, searcher, ts_config=res.settings.ts_config, query=query, k=k,
                           max_words=max_words, question_words=question_words)


def _found(res: Resources, query: str, index: KeywordIndex | None = None,
           max_words: int = 0, question_words: int = 0) -> set[int]:
    return {h.post_id for h in _hits(res, index or res.search.keyword, query,
                                     max_words=max_words, question_words=question_words)}


def _lexeme(res: Resources, word: str) -> str:
    return str(_sql(res, "SELECT (to_tsvector(%s::regconfig, %s)::text)", res.settings.ts_config,
                    word)[0][0]).split("'")[1]


def _df(index: KeywordIndex, lexeme: str) -> int:
    searcher = index.searcher()
    assert searcher is not None
    return sum(searcher.doc_freq(field, lexeme) for field in TEXT_FIELDS)


def _public_topic(res: Resources) -> int:
    return int(_sql(res, "SELECT p.topic_id FROM posts p JOIN topics t ON t.id = p.topic_id"
                         " JOIN categories c ON c.id = t.category_id WHERE NOT c.read_restricted"
                         " AND t.archetype = 'regular' AND t.visible AND t.deleted_at IS NULL"
                         " ORDER BY p.id LIMIT 1")[0][0])


def _write_post(res: Resources, post_id: int, topic_id: int, text: str) -> None:
    """Create or edit a post the way the forum does: the row, then its search data."""
    with psycopg.connect(owner_url(res.urls.database_url)) as conn:
        conn.execute(
            "INSERT INTO posts (id, topic_id, post_number, raw, cooked, created_at, updated_at,"
            " last_version_at) VALUES (%s, %s, 900, %s, %s, now(), now(), now())"
            " ON CONFLICT (id) DO UPDATE SET raw = EXCLUDED.raw, cooked = EXCLUDED.cooked,"
            " updated_at = now() AT TIME ZONE 'utc'",
            (post_id, topic_id, text, f"<p>{text}</p>"))
        conn.execute(
            "INSERT INTO post_search_data (post_id, raw_data, locale, version)"
            " VALUES (%s, %s, 'en', 0) ON CONFLICT (post_id) DO UPDATE"
            " SET raw_data = EXCLUDED.raw_data, version = 0", (post_id, text))
        reindex_search_data(conn, res.settings.ts_config)


@pytest.fixture
def api(dummy_res: Resources) -> Any:
    from sidecar.api.app import create_app

    return create_app(dummy_res.settings, dummy_res).test_client()


def _event(api: Any, event: str, ids: list[int]) -> None:
    resp = api.post("/v1/index/events", json={"event": event, "ids": ids}, headers=AUTH)
    assert resp.status_code == 202, resp.json


def test_statistics_and_documents_are_of_public_posts_only(dummy_res: Resources) -> None:
    index = dummy_res.search.keyword
    searcher = index.searcher()
    assert searcher is not None
    with psycopg.connect(owner_url(dummy_res.urls.database_url)) as conn:
        with_data = {r[0] for r in conn.execute(
            "SELECT post_id FROM post_search_data WHERE search_data IS NOT NULL")}
    public = public_post_ids(owner_url(dummy_res.urls.database_url))
    assert searcher.num_docs == len(public & with_data)
    canaries = sorted({c for probe in PROBES for c in probe["canaries"]})
    for canary in canaries:
        lexeme = _lexeme(dummy_res, canary)
        in_forum = _sql(dummy_res, "SELECT count(*) FROM post_search_data"
                                   " WHERE search_data @@ %s::tsquery", f"'{lexeme}'")[0][0]
        assert in_forum > 0, canary  # the word is in the forum, in private posts only
        assert _df(index, lexeme) == 0, canary
        assert not _found(dummy_res, canary)
    for probe in PROBES:
        hits = _hits(dummy_res, index, probe["query"])
        assert {h.post_id for h in hits} <= public_post_ids(owner_url(dummy_res.urls.database_url))


def test_created_edited_deleted_posts_follow_their_events(api: Any, dummy_res: Resources
                                                          ) -> None:
    index = dummy_res.search.keyword
    _write_post(dummy_res, NEW_POST, _public_topic(dummy_res), "quokkafjord sealant advice")
    assert not _found(dummy_res, "quokkafjord")
    _event(api, "post_created", [NEW_POST])
    assert index.sync() is not None
    assert _found(dummy_res, "quokkafjord") == {NEW_POST}

    _write_post(dummy_res, NEW_POST, _public_topic(dummy_res), "wombatglacier sealant advice")
    _event(api, "post_edited", [NEW_POST])
    index.sync()
    assert not _found(dummy_res, "quokkafjord")
    assert _df(index, _lexeme(dummy_res, "quokkafjord")) == 0
    assert _found(dummy_res, "wombatglacier") == {NEW_POST}

    _sql(dummy_res, "UPDATE posts SET deleted_at = now() WHERE id = %s", NEW_POST)
    _event(api, "post_deleted", [NEW_POST])
    index.sync()
    assert not _found(dummy_res, "wombatglacier")
    assert _df(index, _lexeme(dummy_res, "wombatglacier")) == 0


def test_a_topic_moved_into_a_restricted_category_leaves_the_index(
        api: Any, dummy_res: Resources) -> None:
    index = dummy_res.search.keyword
    topic = _public_topic(dummy_res)
    _write_post(dummy_res, NEW_POST, topic, "axolotlbeacon firmware")
    _event(api, "post_created", [NEW_POST])
    index.sync()
    assert _found(dummy_res, "axolotlbeacon") == {NEW_POST}
    staff = _sql(dummy_res, "SELECT id FROM categories WHERE read_restricted LIMIT 1")[0][0]
    _sql(dummy_res, "UPDATE topics SET category_id = %s WHERE id = %s", staff, topic)
    _event(api, "topic_changed", [topic])
    index.sync()
    assert not _found(dummy_res, "axolotlbeacon")
    assert _df(index, _lexeme(dummy_res, "axolotlbeacon")) == 0


def test_changes_without_events_are_caught_up(dummy_res: Resources) -> None:
    index = dummy_res.search.keyword
    topic = _public_topic(dummy_res)
    _write_post(dummy_res, NEW_POST, topic, "narwhalquartz bracket")
    catch_up(dummy_res.db, keep_days=7)
    index.sync()
    assert _found(dummy_res, "narwhalquartz") == {NEW_POST}
    # The category becomes read-restricted: Discourse moves its updated_at, sends nothing.
    category = _sql(dummy_res, "SELECT category_id FROM topics WHERE id = %s", topic)[0][0]
    _sql(dummy_res, "UPDATE categories SET read_restricted = true,"
                    " updated_at = now() AT TIME ZONE 'utc' WHERE id = %s", category)
    catch_up(dummy_res.db, keep_days=7)
    index.sync()
    assert _df(index, _lexeme(dummy_res, "narwhalquartz")) == 0


def test_the_public_filter_applies_at_query_time(dummy_res: Resources) -> None:
    index = dummy_res.search.keyword
    _write_post(dummy_res, NEW_POST, _public_topic(dummy_res), "pangolinvortex hinge")
    catch_up(dummy_res.db, keep_days=7)
    index.sync()
    assert _found(dummy_res, "pangolinvortex") == {NEW_POST}
    # Hidden by a moderator; no event, no sync yet: the index still holds it, search never
    # returns it.
    _sql(dummy_res, "UPDATE posts SET hidden = true WHERE id = %s", NEW_POST)
    assert _df(index, _lexeme(dummy_res, "pangolinvortex")) == 1
    assert not _found(dummy_res, "pangolinvortex")
    outcome = dummy_res.search.find_topics("pangolinvortex hinge", 5,
                                           SearchOptions(mode=Mode.KEYWORD))
    assert NEW_POST not in {p.post_id for t in outcome.topics for p in t.posts}


@pytest.mark.parametrize("query", ['"the pool now shows"', "zfs -scrub", "wireguard or restic",
                                   '"home assistant" -zigbee', "zfs scrub checksum errors",
                                   "c-state idle power draw", "l'hébergeur"])
def test_the_index_matches_what_postgresql_matches(dummy_res: Resources, query: str) -> None:
    """With operators, the posts ``search_data @@ tsquery`` finds (phrases at PostgreSQL's
    distances); a plain question, the posts holding any of its lexemes."""
    public = public_post_ids(owner_url(dummy_res.urls.database_url))
    with dummy_res.db.connection() as conn:
        tsquery, relaxed = keyword_tsquery(conn, dummy_res.settings.ts_config, query)
    if relaxed:
        node = parse_tsquery(tsquery)
        assert node is not None
        tsquery = " | ".join("'" + word.replace("'", "''") + "'"
                             for word in positive_lexemes(node))
    matched = {r[0] for r in _sql(dummy_res, "SELECT post_id FROM post_search_data"
                                             " WHERE search_data @@ %s::tsquery", tsquery)}
    assert matched & public, query
    assert _found(dummy_res, query) == matched & public


# A signed mail's dashes: PostgreSQL's websearch_to_tsquery fails on them ("tsquery stack too
# small") and reads "- word" as "not word".
DASHES = "zfs scrub? - -- - ---------------------------------------- checksum errors - pool"


def test_dashes_are_punctuation_and_never_an_error(dummy_res: Resources) -> None:
    with dummy_res.db.connection() as conn:
        # What PostgreSQL cannot read as operators, it reads as words.
        assert ksql.websearch_tsquery(conn, dummy_res.settings.ts_config, DASHES) == (
            "'zfs' & 'scrub' & 'checksum' & 'error' & 'pool'")
        tsquery, relaxed = keyword_tsquery(conn, dummy_res.settings.ts_config, DASHES)
    assert relaxed and tsquery == "'zfs' | 'scrub' | 'checksum' | 'error' | 'pool'"
    assert _found(dummy_res, DASHES) == _found(dummy_res, "zfs scrub checksum errors pool")
    response = dummy_res.search.find_topics(DASHES, 5, SearchOptions(mode=Mode.KEYWORD))
    assert response.topics


def test_a_node_with_no_index_says_so_then_rebuilds_from_nothing(
        dummy_res: Resources, tmp_path: Path) -> None:
    node = KeywordIndex(dummy_res.db, tmp_path / "fresh", "english")
    assert node.searcher() is None
    assert node.sync(build_missing=False) is None
    assert node.describe()["state"] == "missing"
    search = type(dummy_res.search)(dummy_res.db, dummy_res.embedder, dummy_res.model,
                                    dummy_res.settings, keyword=node)
    outcome = search.find_topics("zfs scrub checksum", 5, SearchOptions(mode=Mode.KEYWORD))
    assert outcome.topics == []
    steps = {s["step"]: s for s in outcome.trace.as_list()}
    assert steps["keyword"]["detail"]["index"] == "missing"
    report = rebuild_keyword_index(dummy_res.db, tmp_path / "fresh", "english")
    assert report.rebuilt and report.docs == dummy_res.search.keyword.describe()["docs"]
    node.refresh()  # a reader in another process notices within CHECK_S; here: at once
    searcher = node.searcher()
    assert searcher is not None and searcher.num_docs == report.docs
    assert searcher.num_segments == 1  # a build is one segment: the fastest to search
    assert _hits(dummy_res, node, "zfs scrub checksum") == _hits(
        dummy_res, dummy_res.search.keyword, "zfs scrub checksum")


def test_two_nodes_converge(api: Any, dummy_res: Resources, tmp_path: Path) -> None:
    node_a = dummy_res.search.keyword
    node_b = KeywordIndex(dummy_res.db, tmp_path / "node-b", "english")
    node_b.sync()  # built from the forum
    _write_post(dummy_res, NEW_POST, _public_topic(dummy_res), "capybaranebula relay")
    _event(api, "post_created", [NEW_POST])
    hidden = sorted(public_post_ids(owner_url(dummy_res.urls.database_url)))[3]
    _sql(dummy_res, "UPDATE posts SET hidden = true WHERE id = %s", hidden)
    _event(api, "post_hidden", [hidden])
    for node in (node_a, node_b):
        report = node.sync()
        assert report is not None and report.changes >= 2
    queries = ["capybaranebula relay", "zfs scrub checksum errors", "wireguard cgnat vps"]
    for query in queries:
        a, b = _hits(dummy_res, node_a, query), _hits(dummy_res, node_b, query)
        assert a == b and a, query
    assert node_a.describe()["docs"] == node_b.describe()["docs"]
    assert node_a.describe()["last_change"] == node_b.describe()["last_change"]
    # Every node asked to rebuild: each does on its next sync, and still agrees.
    ask_every_node_to_rebuild(dummy_res.db)
    for node in (node_a, node_b):
        report = node.sync()
        assert report is not None and report.rebuilt
        node.refresh()
    assert _hits(dummy_res, node_a, queries[0]) == _hits(dummy_res, node_b, queries[0])


def test_a_node_behind_the_pruned_log_rebuilds(api: Any, dummy_res: Resources,
                                               tmp_path: Path) -> None:
    node = KeywordIndex(dummy_res.db, tmp_path / "late", "english")
    node.sync()
    _write_post(dummy_res, NEW_POST, _public_topic(dummy_res), "okapimeridian router")
    _event(api, "post_created", [NEW_POST])
    with dummy_res.db.connection() as conn:
        assert ksql.prune(conn, timedelta(0)) >= 1
    report = node.sync()
    assert report is not None and report.rebuilt
    node.refresh()
    assert _found(dummy_res, "okapimeridian", node) == {NEW_POST}


def test_one_writer_per_node(dummy_res: Resources) -> None:
    index = dummy_res.search.keyword
    other_process = KeywordIndex(dummy_res.db, dummy_res.settings.state_dir, "english")
    with open(index.folder().lock_path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        assert other_process.sync(wait=False) is None  # busy: it reads, it does not write
        assert other_process.searcher() is not None
    assert other_process.sync(wait=False) is not None


def test_health_shows_the_index(api: Any, dummy_res: Resources) -> None:
    info = api.get("/v1/health", headers=AUTH).json["keyword_index"]
    assert info["state"] == "ready" and info["docs"] > 100
    assert info["synced_at"] and info["error"] is None


def test_keyword_commands(dummy_res: Resources, tmp_path: Path) -> None:
    env = {"DATABASE_URL": dummy_res.urls.database_url, "REDIS_URL": dummy_res.urls.redis_url,
           "SIDECAR_STATE_DIR": str(tmp_path / "cli"), "SIDECAR_LOG_LEVEL": "WARNING"}
    runner = CliRunner()
    status = runner.invoke(main, ["keyword", "status"], env=env)
    assert status.exit_code == 0, status.output
    assert json.loads(status.stdout)["state"] == "missing"
    built = runner.invoke(main, ["keyword", "sync"], env=env)
    assert built.exit_code == 0, built.output
    body = json.loads(built.stdout)
    assert body["report"]["rebuilt"] and body["index"]["behind"] == 0
    rebuilt = runner.invoke(main, ["keyword", "rebuild", "--all-nodes"], env=env)
    assert rebuilt.exit_code == 0, rebuilt.output
    assert json.loads(rebuilt.stdout)["index"]["docs"] == body["index"]["docs"]
    # The other node (this test's resources) rebuilds on its next sync.
    report = dummy_res.search.keyword.sync()
    assert report is not None and report.rebuilt


def test_a_damaged_index_finds_nothing_until_rebuilt(dummy_res: Resources,
                                                     tmp_path: Path) -> None:
    node = KeywordIndex(dummy_res.db, tmp_path / "damaged", "english")
    node.sync()
    assert node.searcher() is not None
    build = node.folder().current()
    assert build is not None
    (build / "meta.json").write_text("{ not json")
    node.refresh()
    assert node.searcher() is None  # the leg finds nothing; no 500
    assert "reading the index" in str(node.describe()["error"])
    node.rebuild()
    node.refresh()
    assert node.searcher() is not None and node.describe()["error"] is None


def test_a_long_question_is_searched_with_its_rarest_words(dummy_res: Resources) -> None:
    # A pasted message: some ninety of the forum's commonest words, and three rare ones.
    stats = "SELECT word, ndoc FROM ts_stat('SELECT search_data FROM post_search_data')" \
        " WHERE word ~ '^[a-z]{{4,}}$' ORDER BY ndoc {}, word LIMIT {}"
    common = [r[0] for r in _sql(dummy_res, stats.format("DESC", 45))]
    rare = [r[0] for r in _sql(dummy_res, stats.format("ASC", 3))]
    filler = " ".join(common * 2)
    question = f"{filler} {' '.join(rare)} {filler}"
    index = dummy_res.search.keyword
    searcher = index.searcher()
    assert searcher is not None
    with dummy_res.db.connection() as conn:
        tsquery, relaxed = keyword_tsquery(conn, dummy_res.settings.ts_config, question)
    node = parse_tsquery(tsquery)
    assert relaxed and node is not None and len(set(positive_lexemes(node))) > MAX_WORDS
    kept = set(positive_lexemes(rarest_words(as_words(node), _postings(searcher), MAX_WORDS)))
    assert len(kept) == MAX_WORDS and set(rare) <= kept
    dropped = set(positive_lexemes(node)) - kept
    held = [_df(index, w) for w in dropped]  # some are held by no public post: dropped first
    assert min(df for df in held if df) >= max(_df(index, w) for w in kept)
    # The leg searches those words only: the posts that only dropped words hold are not found.
    limited = _found(dummy_res, question, max_words=MAX_WORDS)
    assert limited == _found(dummy_res, " ".join(sorted(kept)))
    assert limited != _found(dummy_res, " ".join(common))
    # The served default (SIDECAR_KEYWORD_MAX_WORDS=32); 0 searches every word.
    assert dummy_res.settings.keyword_max_words == MAX_WORDS
    served = dummy_res.search.find_topics(question, 500, SearchOptions(mode=Mode.KEYWORD))
    assert {p.post_id for t in served.topics for p in t.posts} <= limited
    assert _found(dummy_res, question) == _found(dummy_res, question, max_words=10**6)
    assert _found(dummy_res, question) != limited


# A question pasted into the search: its quotes, "or" and "-restic" are prose (16 words).
PASTED = 'after the update my "home assistant" box lost the zigbee stick or the wireguard ' \
    'tunnel -restic'
PLAIN = "after the update my home assistant box lost the zigbee stick the wireguard tunnel restic"


def test_a_long_question_has_no_operators(dummy_res: Resources) -> None:
    words = dummy_res.settings.keyword_question_words
    assert words == 10 and len(PASTED.split()) > words  # the default
    config = dummy_res.settings.ts_config
    with dummy_res.db.connection() as conn:
        pasted, relaxed = keyword_tsquery(conn, config, PASTED, words)
        assert relaxed and "!" not in pasted and "<->" not in pasted
        # Read as the same words without their marks: an OR of every lexeme.
        assert (pasted, relaxed) == keyword_tsquery(conn, config, PLAIN, words)
        # A search box query keeps its operators; so does a long one when the setting is 0.
        short, relaxed = keyword_tsquery(conn, config, '"home assistant" -zigbee', words)
        assert not relaxed and "!" in short and "<->" in short
        assert not keyword_tsquery(conn, config, PASTED, 0)[1]
        # A hyphenated word stays one word's phrase, whatever the length.
        hyphen, _ = keyword_tsquery(conn, config, PLAIN + " c-state", words)
        assert "'c-state' <-> 'c' <-> 'state'" in hyphen
    found = _found(dummy_res, PASTED, question_words=words)
    assert found == _found(dummy_res, PLAIN)
    # As operators, the pasted question's AND of sixteen words and a NOT finds (next to) nothing.
    assert len(_found(dummy_res, PASTED)) < len(found)
    served = dummy_res.search.find_topics(PASTED, 10, SearchOptions(mode=Mode.KEYWORD))
    assert served.topics and served.legs["keyword"] == min(len(found), served.legs["keyword"])
