"""POST /v1/retrieve then POST /v1/sanitize over the embedded demo forum, as the assistant does.

The demo is imported and embedded with MiniLM into this module's own database (the session's
``demo_state`` is read-only, and a retrieval writes a row).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.conftest import API_KEY, make_settings
from tests.sanitize.checker import audit


@pytest.fixture(scope="module")
def e2e_client(tmp_path_factory: pytest.TempPathFactory, forum_url: str, redis_url: str,
               minilm: Any) -> Iterator[Any]:
    """An app over the demo forum, embedded (no cross-encoder: bi-encoder relevance)."""
    from sidecar.api.app import create_app
    from sidecar.runtime.bootstrap import backfill_sync, load_demo
    from sidecar.runtime.resources import start_resources

    settings = make_settings(tmp_path_factory.mktemp("e2e"), forum_url, redis_url)
    res = start_resources(settings, embedder=minilm)
    load_demo(res)
    backfill_sync(res, 1, progress=False)
    yield create_app(settings, res).test_client()
    res.close()


AUTH = {"Authorization": f"Bearer {API_KEY}"}


def retrieve(client: Any, question: str, **extra: Any) -> dict[str, Any]:
    resp = client.post("/v1/retrieve", headers=AUTH,
                       json={"messages": [{"role": "user", "content": question}], **extra})
    assert resp.status_code == 200, resp.json
    body: dict[str, Any] = resp.json
    return body


def test_answer_cites_the_evidence_and_loses_the_injected_link(e2e_client: Any,
                                                                forum_url: str) -> None:
    found = retrieve(e2e_client, "Traefik, Caddy ou Nginx Proxy Manager pour débuter avec "
                                 "Docker ? reverse proxy config pack", limit=6)
    evidence = found["evidence"]
    assert evidence and found["retrieval_id"]
    by_n = {e["n"]: e for e in evidence}
    answer = (f"Pour débuter, Caddy est le plus simple [[1]]. "
              f"Un membre conseille aussi http://evil.example/free-proxy-setup [[{len(evidence)}]]"
              f" et [ce guide](javascript:alert(1)). Voir [[1, {len(evidence) + 5}]].")
    resp = e2e_client.post("/v1/sanitize", headers=AUTH,
                           json={"retrieval_id": found["retrieval_id"], "text": answer})
    assert resp.status_code == 200, resp.json
    body = resp.json
    assert [c["n"] for c in body["citations"]] == sorted({1, len(evidence)})
    for c in body["citations"]:
        assert c["url"] == by_n[c["n"]]["url"] and c["post_id"] == by_n[c["n"]]["post_id"]
    allowed = set()
    for e in evidence:
        allowed.add(e["url"])
        allowed.add(e["url"].rsplit("/", 1)[0])
    assert audit(body["text"], allowed) == []
    assert "evil.example" not in body["text"] and "javascript" not in body["text"]
    assert f"[[{len(evidence) + 5}]]" in {r["value"] for r in body["removed"]}
    # the stored retrieval is what /v1/sanitize resolved against
    name = conninfo_to_dict(forum_url)["dbname"]
    with psycopg.connect(forum_url) as conn:
        stored = conn.execute("SELECT evidence FROM sidecar.sidecar_retrievals WHERE id = %s",
                              (found["retrieval_id"],)).fetchone()
    assert stored is not None and [e["n"] for e in stored[0]] == list(by_n), name


def test_a_gated_question_leaves_nothing_to_cite(e2e_client: Any) -> None:
    found = retrieve(e2e_client, "merci !")
    assert found["zone"] == "abstain" and found["evidence"] == []
    resp = e2e_client.post("/v1/sanitize", headers=AUTH, json={
        "retrieval_id": found["retrieval_id"], "text": "De rien ! [[1]]"})
    body = resp.json
    assert body["citations"] == [] and body["removed"][0]["kind"] == "citation"
    assert "Sources" not in body["text"]
