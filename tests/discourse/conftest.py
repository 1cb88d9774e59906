"""Fixtures of the discourse-ai tool tests: a demo forum of our own (the tools write posts and
custom fields to it, as Discourse would), the real sidecar serving it over HTTP, and the network
a Discourse site has in front of it."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.answer.conftest import variant
from tests.answer.ollama_server import OllamaServer
from tests.conftest import API_KEY, demo_forum, owner_url
from tests.discourse.discourse_api import DiscourseApi
from tests.discourse.forum import SYSTEM_USER_ID, Forum
from tests.discourse.harness import StandInLLM, Tool, ToolRunner
from tests.discourse.network import Network, Route

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "discourse"
MEMBER_ID, MEMBER = 48213, "bob_asks"  # an id that appears nowhere else in what is sent
MEMBER_NAME = "Robert Askwith"
BOT_ID, BOT = -110, "forum_helper"  # discourse-ai's agents post as users with negative ids
SIDECAR = "http://sidecar.internal"  # port 80: Discourse speaks TLS to every other port
ASKER_SECRET = "asker-secret-5b1e0c9d7f"


@pytest.fixture(scope="session")
def discourse_state(tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str, redis_url: str,
                    minilm: Any) -> Iterator[Any]:
    """The demo forum, imported and embedded, in a database of its own."""
    with demo_forum(pg_admin_url, redis_url, tmp_path_factory.mktemp("discourse"), minilm,
                    prefix="t_disc") as res:
        yield res


@pytest.fixture(scope="session")
def forum(discourse_state: Any) -> Forum:
    """The forum's tables as the tool runner reads them, with a member and the agent's bot."""
    assert discourse_state.settings.database_url
    forum = Forum(owner_url(discourse_state.settings.database_url))
    forum.setup()
    forum.add_user(MEMBER_ID, MEMBER, name=MEMBER_NAME)
    forum.add_user(BOT_ID, BOT)
    return forum


@pytest.fixture(scope="session")
def sidecar_llm() -> Iterator[OllamaServer]:
    """The sidecar's own LLM: a local server speaking Ollama's API."""
    server = OllamaServer().start()
    yield server
    server.stop()


@pytest.fixture
def llm_server(sidecar_llm: OllamaServer) -> OllamaServer:
    """The sidecar's LLM reset, no request recorded."""
    sidecar_llm.reset()
    return sidecar_llm


@pytest.fixture(scope="session")
def sidecar_server(discourse_state: Any, sidecar_llm: OllamaServer) -> Iterator[str]:
    """The sidecar's API over HTTP on a free port, its answers written by ``sidecar_llm``."""
    from models.host import ThreadedHost
    from sidecar.api.app import create_app

    res = variant(discourse_state, ollama_url=sidecar_llm.url)
    with ThreadedHost(create_app(res.settings, res)) as host:
        yield host.url


@pytest.fixture
def network(sidecar_server: str) -> Network:
    """The sidecar on a private address, allowed by ``allowed_internal_hosts`` as the docs say."""
    return Network(routes={"sidecar.internal": Route("10.0.0.7", sidecar_server)},
                   allowed_internal_hosts=["sidecar.internal"])


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A server that accepts connections and never answers (a hung sidecar)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(2)
    for conn in held:
        conn.close()
    listener.close()


ALIASES = {"already-asked-tool.js": ("sidecar_url", "sidecar_api_key"),
           "answer-tool.js": ("sidecar_url", "sidecar_api_key", "sidecar_asker_secret")}
BOUND = {"sidecar_url": SIDECAR, "sidecar_api_key": API_KEY, "sidecar_asker_secret": ASKER_SECRET}


def secrets(tool: str, **overrides: str | None) -> dict[str, str | None]:
    """The aliases ``tool`` declares, bound as docs/discourse.md says (or as overridden)."""
    values: dict[str, str | None] = {alias: BOUND[alias] for alias in ALIASES[tool]}
    values.update(overrides)
    return values


def run_tool(name: str, context: dict[str, Any], network: Network, forum: Forum,
             params: dict[str, Any] | None = None, llm: StandInLLM | None = None,
             bot_user_id: int = SYSTEM_USER_ID, settings: dict[str, str] | None = None,
             **secret_values: str | None) -> Any:
    """Run ``deploy/discourse/<name>`` once, its head's ``settings`` changed as an admin would
    (``{"MODE": '"forum"'}``); the run's record has ``created`` posts added."""
    script = (DEPLOY / name).read_text(encoding="utf-8")
    for setting, value in (settings or {}).items():
        script, n = re.subn(rf"^var {setting} = .*;", f"var {setting} = {value};", script,
                            count=1, flags=re.M)
        assert n == 1, f"no setting {setting} at the head of {name}"
    forum.bot_user_id = bot_user_id
    api = DiscourseApi(forum)
    run = ToolRunner(Tool(script, secrets(name, **secret_values)), context, network, api,
                     llm).invoke(params or {})
    run.created = api.created  # type: ignore[attr-defined]
    return run


def bot_context(forum: Forum, post_id: int, **extra: Any) -> dict[str, Any]:
    """``context`` as discourse-ai's BotContext#to_json gives it for a post: the post's topic,
    author and, in a PM, its participants; ``extra`` for the feature's own fields."""
    post = forum.sql("""SELECT p.topic_id, p.user_id, u.username, t.archetype FROM posts p
                        JOIN topics t ON t.id = p.topic_id LEFT JOIN users u ON u.id = p.user_id
                        WHERE p.id = %s""", post_id)[0]
    private = post["archetype"] == "private_message"
    participants = None
    if private:
        rows = forum.sql("""SELECT u.username FROM topic_allowed_users a JOIN users u
                            ON u.id = a.user_id WHERE a.topic_id = %s ORDER BY a.id""",
                         post["topic_id"])
        participants = ", ".join(r["username"] for r in rows)
    context: dict[str, Any] = {
        "messages": [], "topic_id": post["topic_id"], "post_id": post_id,
        "private_message": private, "custom_instructions": None, "username": post["username"],
        "user_id": post["user_id"], "participants": participants, "chosen_tools": None,
        "message_id": None, "channel_id": None, "context_post_ids": None, "site_url": None,
        "site_title": None, "site_description": None, "skip_show_thinking": None,
        "feature_name": "bot", "feature_context": {}, "resource_url": None,
        "inferred_concepts": [], "user_language": None, "temporal_context": None,
        "top_categories": None, "bypass_response_format": False}
    context.update(extra)
    return context


def automation_context(forum: Forum, post_id: int) -> dict[str, Any]:
    """``context`` of the ai_tool_action automation (trigger: post created or edited)."""
    return bot_context(forum, post_id, feature_name="ai_tool_action",
                       feature_context={"automation_id": 7, "automation_name": "Already asked?"})


def new_topic(forum: Forum, title: str, raw: str, *, user_id: int = MEMBER_ID,
              category_id: int | None = 2, private_with: tuple[int, ...] = ()) -> tuple[int, int]:
    """A topic and its first post as Discourse writes them when a member creates one; a PM
    (``private_with`` its other participants) has no category. Returns (topic id, post id)."""
    archetype = "private_message" if private_with else "regular"
    topic = forum.sql("""INSERT INTO topics (id, title, fancy_title, slug, category_id, archetype,
                                             posts_count, highest_post_number, bumped_at,
                                             last_posted_at, created_at, updated_at, user_id)
                         SELECT coalesce(max(id), 0) + 1, %s, %s, %s, %s, %s, 1, 1, now(), now(),
                                now(), now(), %s FROM topics RETURNING id""",
                      title, title, "new-topic", None if private_with else category_id, archetype,
                      user_id)[0]["id"]
    post = forum.sql("""INSERT INTO posts (id, user_id, topic_id, post_number, raw, cooked,
                                           created_at, updated_at, last_version_at)
                        SELECT coalesce(max(id), 0) + 1, %s, %s, 1, %s, %s, now(), now(), now()
                        FROM posts RETURNING id""", user_id, topic, raw, f"<p>{raw}</p>")[0]["id"]
    for member in (user_id, *private_with) if private_with else ():
        forum.sql("INSERT INTO topic_allowed_users (user_id, topic_id) VALUES (%s, %s)",
                  member, topic)
    return topic, post


@pytest.fixture
def free_port() -> str:
    """An address where nothing listens (the sidecar down)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
