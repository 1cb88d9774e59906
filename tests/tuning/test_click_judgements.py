"""Search-log clicks members cannot plant: a (term, topic) pair is judged only when enough
distinct members opened it (signed in; logged-out visitors all one; staff, system users and
crawlers left out), a header search's click names a post (mapped to its topic), and no user id
or address leaves the database."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from pydantic import ValidationError

from models.protocols import Embedder
from sidecar.config.settings import Settings
from sidecar.db.grants import apply_grants
from sidecar.db.judgements_read import click_judgements
from tests.conftest import SIDECAR_ROLE, demo_forum, owner_url
from tests.helpers import sidecar_command

PUBLIC_SQL = """
    SELECT p.topic_id, p.id FROM posts p JOIN topics t ON t.id = p.topic_id
    JOIN categories c ON c.id = t.category_id
    WHERE p.post_number = 2 AND NOT c.read_restricted AND t.archetype = 'regular'
      AND t.visible AND t.deleted_at IS NULL AND p.deleted_at IS NULL AND NOT p.hidden
      AND p.post_type = 1
    ORDER BY p.topic_id LIMIT 3"""
PRIVATE_POST_SQL = """
    SELECT p.id FROM posts p JOIN topics t ON t.id = p.topic_id
    LEFT JOIN categories c ON c.id = t.category_id
    WHERE t.archetype <> 'regular' OR c.read_restricted ORDER BY p.id LIMIT 1"""
MEMBERS = (9001, 9002, 9003, 9004)
ADMINS, MODERATORS = (9101, 9102), (9103,)
FULL, HEADER = 2, 1


def _log(conn: psycopg.Connection[Any], term: str, result: int, *, user: int | None = None,
         ip: str = "192.0.2.1", search_type: int = FULL, **extra: Any) -> None:
    cols = ", ".join(["term", "user_id", "ip_address", "search_result_id", "search_type",
                      "created_at", *extra, "search_result_type"])
    marks = ", ".join(["%s"] * (6 + len(extra)))
    conn.execute(f"INSERT INTO search_logs ({cols}) VALUES ({marks}, 1)",  # type: ignore[arg-type]
                 (term, user, ip, result, search_type, "2026-12-01", *extra.values()))


@pytest.fixture(scope="module")
def clicks(pg_admin_url: str, redis_url: str, minilm: Embedder,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, int]]]:
    """The demo forum (not embedded) with a search log of planted and honest clicks."""
    with demo_forum(pg_admin_url, redis_url, tmp_path_factory.mktemp("clicks"), minilm,
                    prefix="t_clicks", embed=False) as res:
        # Discourse writes its users and search log: the forum's owner, never the sidecar.
        with psycopg.connect(owner_url(res.urls.database_url)) as conn:
            (a, _), (b, b_reply), (c, _) = conn.execute(PUBLIC_SQL).fetchall()
            private_post = conn.execute(PRIVATE_POST_SQL).fetchone()[0]  # type: ignore[index]
            for uid in (*MEMBERS, *ADMINS, *MODERATORS):
                conn.execute(
                    "INSERT INTO users (id, username, username_lower, admin, moderator,"
                    " created_at, updated_at) VALUES (%s, %s, %s, %s, %s, now(), now())",
                    (uid, f"m{uid}", f"m{uid}", uid in ADMINS, uid in MODERATORS))
            for uid in MEMBERS[:2]:  # two signed-in members and one visitor: judged
                _log(conn, "three members", a, user=uid)
            _log(conn, "three members", a, ip="198.51.100.7")
            for _ in range(6):  # one member, many clicks
                _log(conn, "one member", a, user=MEMBERS[0])
            for ip in ("198.51.100.9", "203.0.113.9", "192.0.2.9", "2001:db8:9::1"):
                _log(conn, "four networks", a, ip=ip)  # logged out: one member, however many
            for uid in MEMBERS[:3]:  # three signed-in members, each from anywhere
                _log(conn, "three signed in", c, user=uid, ip="198.51.100.9")
            _log(conn, "a member and visitors", a, user=MEMBERS[0])
            for ip in ("198.51.100.9", "203.0.113.9"):
                _log(conn, "a member and visitors", a, ip=ip)
            for last in (1, 2, 3, 4):  # one visitor moving within its network
                _log(conn, "one visitor", a, ip=f"203.0.113.{last}")
            for last in (1, 2, 3, 4):  # ... and within its IPv6 /64
                _log(conn, "one visitor v6", a, ip=f"2001:db8:0:1::{last}")
            for uid in (*ADMINS, *MODERATORS, -1, -2):  # staff and Discourse's system users
                _log(conn, "staff", a, user=uid)
            _log(conn, "staff and two", a, user=ADMINS[0])
            for uid in MEMBERS[2:]:
                _log(conn, "staff and two", a, user=uid)
            # The header search logs the clicked post's id: topic b's reply, never topic
            # number b_reply.
            for uid in MEMBERS[:3]:
                _log(conn, "header click", b_reply, user=uid, search_type=HEADER)
            for uid in MEMBERS[:3]:  # a header click on a private post names no topic
                _log(conn, "private post", private_post, user=uid, search_type=HEADER)
            for uid in MEMBERS[:3]:  # an unknown search type is not read
                _log(conn, "other type", c, user=uid, search_type=7)
        yield res, {"a": a, "b": b, "b_reply": b_reply, "c": c}


def test_a_pair_is_judged_only_by_enough_distinct_members(
        clicks: tuple[Any, dict[str, int]]) -> None:
    res, ids = clicks
    with res.db.connection() as conn:
        judged = {(r.term, r.topic_id) for r in click_judgements(conn)}
    assert ("three members", ids["a"]) in judged
    for planted in ("one member", "one visitor", "one visitor v6", "staff", "staff and two"):
        assert not [j for j in judged if j[0] == planted], planted


def test_a_header_click_names_the_topic_of_the_post_it_logged(
        clicks: tuple[Any, dict[str, int]]) -> None:
    res, ids = clicks
    with res.db.connection() as conn:
        judged = {(r.term, r.topic_id) for r in click_judgements(conn)}
    assert [j for j in judged if j[0] == "header click"] == [("header click", ids["b"])]
    assert not [j for j in judged if j[0] in ("private post", "other type")]


def test_visitors_whatever_their_networks_are_one_member(
        clicks: tuple[Any, dict[str, int]]) -> None:
    """Fault (issue 45): each logged-out visitor's /24 counted as a member, so three cheap
    servers in three networks made a judgement that steers the tuned embedder's guard."""
    res, ids = clicks
    with res.db.connection() as conn:
        members = {(r.term, r.topic_id): r.members for r in click_judgements(conn, min_members=1)}
        judged = {(r.term, r.topic_id) for r in click_judgements(conn)}
    assert members[("four networks", ids["a"])] == 1
    assert members[("a member and visitors", ids["a"])] == 2
    assert ("three signed in", ids["c"]) in judged
    assert not [j for j in judged if j[0] in ("four networks", "a member and visitors")]


def test_the_floor_is_a_setting(clicks: tuple[Any, dict[str, int]]) -> None:
    res, ids = clicks
    with res.db.connection() as conn:
        four = {(r.term, r.topic_id): r.members for r in click_judgements(conn, min_members=4)}
        two = {(r.term, r.topic_id): r.members for r in click_judgements(conn, min_members=2)}
    assert ("three members", ids["a"]) not in four
    assert two[("staff and two", ids["a"])] == 2  # the admin's click never counts
    assert ("one member", ids["a"]) not in two


def test_rows_marked_as_crawlers_are_left_out_where_discourse_marks_them(
        clicks: tuple[Any, dict[str, int]]) -> None:
    res, ids = clicks
    url = owner_url(res.urls.database_url)
    with psycopg.connect(url) as conn:
        conn.execute("ALTER TABLE search_logs ADD COLUMN crawler boolean,"
                     " ADD COLUMN likely_crawler boolean")
        apply_grants(conn, SIDECAR_ROLE)  # as an upgraded forum re-runs `sidecar db grants`
        for uid, flag in zip(MEMBERS, ("crawler", "likely_crawler", "crawler"), strict=False):
            _log(conn, "crawled", ids["c"], user=uid, **{flag: True})
        for uid in MEMBERS[:3]:
            _log(conn, "not crawled", ids["c"], user=uid, crawler=False, likely_crawler=None)
    with res.db.connection() as conn:
        judged = {(r.term, r.topic_id) for r in click_judgements(conn)}
    assert ("not crawled", ids["c"]) in judged
    assert not [j for j in judged if j[0] == "crawled"]


def test_fewer_than_three_members_are_refused_at_start_up() -> None:
    """Fault (issue 45): SIDECAR_CLICK_MIN_MEMBERS=2 was accepted: one person with a second
    account, or a member and any logged-out visitor, made a judgement."""
    with pytest.raises(ValidationError, match="2 is refused: at least 3 distinct members"):
        Settings(click_min_members=2)
    assert Settings(click_min_members=3).click_min_members == 3
    done = subprocess.run([*sidecar_command(), "db", "grants"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "SIDECAR_CLICK_MIN_MEMBERS": "2"})
    assert done.returncode == 2 and done.stdout == ""
    assert "SIDECAR_CLICK_MIN_MEMBERS: 2 is refused" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
