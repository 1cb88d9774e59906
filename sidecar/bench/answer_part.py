"""What ``POST /v1/answer`` adds beyond ``POST /v1/retrieve``, over HTTP, with a local LLM stub.

A real ``sidecar serve`` runs over the demo forum with its answer LLM pointed at
:class:`~sidecar.bench.llm_stub.OllamaStub` (Ollama's ``/api/chat``), so the LLM's own time is
known and nearly nil. Two phases, one question the demo answers (its zone is checked):

1. **at once**: the stub answers with no delay; ``/v1/retrieve`` and ``/v1/answer`` alternate
   (same question), and the answer path's own stages come from its trace: the prompt's build
   (the ``evidence`` step's ``prompt_ms``), ``generate`` (the LLM call, client included),
   ``sanitize`` and ``log`` (the ask log's write). The reply cites ``[[n]]`` (one number no
   retrieval has) and holds links outside the forum, so the sanitizer works for real.
2. **streamed**: the stub sends its first token after a fixed delay, then a piece per interval;
   the client times the SSE events: the retrieval, the first sanitized delta, the final answer.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from sidecar.bench.e2e_part import REQUEST_TIMEOUT_S, free_port, serve
from sidecar.bench.llm_stub import OllamaStub
from sidecar.bench.report import BenchContext, BenchTable
from sidecar.evaluation.state import prepare_state
from sidecar.runtime.bootstrap import demo_dir
from sidecar.runtime.model_setup import ensure_model

QUESTION = "WireGuard behind CGNAT with a VPS relay and PersistentKeepalive"
FORUM = "https://forum.example.org"
MODEL = "bench-stub"
GOAL_MS = 10.0  # prompt + sanitize + log, at p95
# A reply of ~1,500 characters (~350 tokens, within the default answer_max_tokens of 700): good
# citations, one of a number no retrieval has, a forum link, links and a bare URL outside it.
REPLY = " ".join([
    "Yes. A CGNAT address cannot take inbound connections, so relay WireGuard through a small "
    "VPS that has a public address [[1]]. The home peer dials out to the VPS and keeps the "
    "tunnel open with PersistentKeepalive = 25 [[2]].",
    "On the VPS, enable IP forwarding (net.ipv4.ip_forward=1), give each peer its own /32 in "
    "AllowedIPs and route the home subnet through the home peer [[1]][[2]]. A VPS of two or "
    "three euros a month carries this traffic easily [[3]].",
    "Some posts suggest forwarding a port on the router instead [[9]]; behind CGNAT that "
    "cannot work, whatever http://evil.example/setup says, and [this script]"
    "(https://evil.example/wg.sh) is not needed.",
    f"The homelab thread shows a working setup: {FORUM}/t/megathread/4/8 and the relay "
    "discussion <https://tracker.example.net/relay> compare the options [[3]].",
    "Keep the keys apart: the VPS only knows the public keys, and the home peer's private key "
    "never leaves it [[2]]. Check the tunnel with wg show on both sides; the latest handshake "
    "should stay under two minutes when PersistentKeepalive is set [[1]].",
    "If the relay must also serve other devices, add their peers on the VPS with their own "
    "AllowedIPs, and keep the MTU at 1420 or lower so that fragmented packets do not stall "
    "large transfers [[2]][[3]]. A firewall on the VPS should allow only UDP 51820 and SSH.",
    "Finally, note the cost: the relay adds one hop, a few milliseconds for a VPS in the same "
    "country, which matters little for remote access to a homelab [[3]].",
])
# A shorter streamed reply: STREAM_CHARS characters per piece (~2 tokens).
STREAM_REPLY = REPLY[:640]
STREAM_CHARS = 8
STREAM_INTERVAL_S = 0.020  # the stub's first token, then one piece per interval


@dataclass
class Samples:
    """Named lists of milliseconds."""

    ms: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, value: float | None) -> None:
        """One sample (None: not measured, skipped)."""
        if value is not None:
            self.ms.setdefault(name, []).append(float(value))

    def error(self, name: str) -> None:
        """Count one failed request."""
        self.errors[name] = self.errors.get(name, 0) + 1

    def pct(self, name: str, q: float) -> float | None:
        """A percentile in ms, rounded (None without samples)."""
        values = self.ms.get(name)
        return round(float(np.percentile(values, q)), 2) if values else None


def run(ctx: BenchContext) -> list[BenchTable]:
    """Both phases against one ``sidecar serve``."""
    ensure_model(ctx.settings)
    pairs = int(ctx.extras.get("pairs", 12 if ctx.quick else 200))
    streams = int(ctx.extras.get("streams", 3 if ctx.quick else 30))
    state = prepare_state(ctx.settings, demo_dir(), progress=False)
    api_key = secrets.token_urlsafe(24)
    seen: dict[str, Any] = {}
    try:
        with OllamaStub(REPLY) as stub, serve(
                state, free_port(), api_key, ctx.out_dir / "server.log",
                {"SIDECAR_ANSWER_URL": stub.url, "SIDECAR_ANSWER_MODEL": MODEL,
                 "SIDECAR_FORUM_URL": FORUM}) as base, httpx.Client(
                base_url=base, headers={"Authorization": f"Bearer {api_key}"},
                timeout=REQUEST_TIMEOUT_S) as client:
            at_once = _at_once(client, pairs, seen)
            stub.reply, stub.chunk_chars = STREAM_REPLY, STREAM_CHARS
            stub.first_delay_s = stub.chunk_delay_s = STREAM_INTERVAL_S
            stub.first_token_ms.clear()
            streamed = _streamed(client, streams, seen)
            for value in stub.first_token_ms:
                streamed.add("stub", value)
    finally:
        state.close()
    (ctx.out_dir / "answer.json").write_text(json.dumps(
        {"at_once": at_once.ms, "streamed": streamed.ms, "seen": seen}, indent=1))
    return _tables(at_once, streamed, seen, pairs, streams)


def _body(stream: bool | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": QUESTION}]}
    if stream is not None:
        body["stream"] = stream
    return body


def _at_once(client: httpx.Client, pairs: int, seen: dict[str, Any]) -> Samples:
    """Retrieve and answer, alternated, after a warm-up of three pairs."""
    s = Samples()
    for i in range(pairs + 3):
        timed: dict[str, float] = {}
        for endpoint, body in (("/v1/retrieve", _body()), ("/v1/answer", _body(False))):
            started = time.perf_counter()
            resp = client.post(endpoint, json=body)
            ms = (time.perf_counter() - started) * 1000
            if resp.status_code != 200:
                s.error(endpoint)
                seen.setdefault("errors", []).append([endpoint, resp.status_code,
                                                      resp.text[:300]])
                continue
            timed[endpoint] = ms
            if endpoint == "/v1/answer":
                data = resp.json()
                _check_answered(data, seen)
                if i >= 3:
                    _stages(s, data)
        if i >= 3 and len(timed) == 2:
            s.add("retrieve", timed["/v1/retrieve"])
            s.add("answer", timed["/v1/answer"])
            s.add("diff", timed["/v1/answer"] - timed["/v1/retrieve"])
    return s


def _check_answered(data: dict[str, Any], seen: dict[str, Any]) -> None:
    """The demo answers this question: a zone that asks the LLM, a sanitized answer."""
    if data["zone"] == "abstain" or data["outcome"] != "answered":
        raise RuntimeError(f"the demo did not answer {QUESTION!r}: zone {data['zone']}, "
                           f"outcome {data['outcome']} ({data['zone_reason']})")
    seen.update(zone=data["zone"], outcome=data["outcome"], cited=len(data["cited"]),
                removed={k: v for k, v in data["removed"].items() if k != "items"},
                answer_chars=len(data["answer"]["markdown"]))


def _stages(s: Samples, data: dict[str, Any]) -> None:
    steps = {step["step"]: step for step in data["trace"]}
    prompt = steps["evidence"]["detail"].get("prompt_ms")
    s.add("prompt", prompt)
    for name in ("generate", "sanitize", "log"):
        s.add(name, steps[name]["ms"] if name in steps else None)
    if prompt is not None and "sanitize" in steps and "log" in steps:
        s.add("own", prompt + steps["sanitize"]["ms"] + steps["log"]["ms"])


def _streamed(client: httpx.Client, streams: int, seen: dict[str, Any]) -> Samples:
    """Streamed answers (one warm-up), each event timed at the client."""
    s = Samples()
    for i in range(streams + 1):
        started = time.perf_counter()
        events: list[tuple[str, float, dict[str, Any]]] = []
        buffer = b""
        with client.stream("POST", "/v1/answer", json=_body(True)) as resp:
            if resp.status_code != 200:
                s.error("stream")
                continue
            for raw in resp.iter_raw():
                buffer += raw
                while b"\n\n" in buffer:
                    block, buffer = buffer.split(b"\n\n", 1)
                    at = (time.perf_counter() - started) * 1000
                    lines = dict(line.split(": ", 1) for line in block.decode().splitlines())
                    events.append((lines["event"], at, json.loads(lines["data"])))
        if i == 0:
            continue
        first = {name: (at, data) for name, at, data in reversed(events)}
        deltas = "".join(data["text"] for name, _, data in events if name == "delta")
        seen["stream_deltas"] = sum(1 for name, _, _ in events if name == "delta")
        seen["unchecked_link_sent"] = "evil.example" in deltas or "tracker.example" in deltas
        if "answer" not in first or "delta" not in first:
            s.error("stream")
            continue
        s.add("retrieval_event", first["retrieval"][0])
        s.add("first_delta", first["delta"][0])
        s.add("delta_after_retrieval", first["delta"][0] - first["retrieval"][0])
        s.add("total", first["answer"][0])
        s.add("server_first_token", first["answer"][1]["timings"]["first_token_ms"])
    return s


def _tables(a: Samples, st: Samples, seen: dict[str, Any], pairs: int, streams: int
            ) -> list[BenchTable]:
    def row(label: str, key: str, s: Samples, what: str) -> list[Any]:
        return [label, len(s.ms.get(key, [])), s.pct(key, 50), s.pct(key, 95), what]

    errors = {**a.errors, **st.errors}
    stub_note = (f"LLM: a local Ollama stub ({MODEL}) that answers at once; question "
                 f"{QUESTION!r} on the demo forum: zone {seen.get('zone')}, outcome "
                 f"{seen.get('outcome')}, {seen.get('cited')} citations kept, removed "
                 f"{seen.get('removed')}, {seen.get('answer_chars')} characters answered from "
                 f"a {len(REPLY)}-character reply.")
    cols = ["measure", "n", "p50 ms", "p95 ms", "what"]
    over = BenchTable("answer", "Answer vs retrieve over HTTP (LLM stub answers at once)", cols, [
        row("/v1/retrieve", "retrieve", a, "client wall time"),
        row("/v1/answer", "answer", a, "client wall time, same question, alternated"),
        row("answer − retrieve", "diff", a, "per pair: what the answer adds, LLM stub included"),
    ], [stub_note, f"{pairs} pairs after 3 warm-up pairs; errors: {errors or 0}"])
    p95 = a.pct("own", 95)
    verdict = "no data" if p95 is None else ("met" if p95 <= GOAL_MS else "NOT met")
    own = BenchTable("answer", "Answer path's own stages (server side, from the trace)", cols, [
        row("prompt", "prompt", a, "build_prompt (in the evidence step; /v1/retrieve has it too)"),
        row("generate", "generate", a, "the LLM call: client, HTTP to the stub, its reply"),
        row("sanitize", "sanitize", a, "evidence re-checked in the database, reply sanitized"),
        row("log", "log", a, "the ask log's row"),
        row("prompt + sanitize + log", "own", a,
            f"goal <= {GOAL_MS:g} ms at p95: {verdict}"),
    ], ["per answer, summed per request before the percentile"])
    stream = BenchTable("answer", "Streamed answer: time to first sanitized byte", cols, [
        row("LLM's own first token", "stub", st,
            f"at the stub: request read to first chunk (configured "
            f"{STREAM_INTERVAL_S * 1000:g} ms)"),
        row("LLM first token, server side", "server_first_token", st,
            "timings.first_token_ms: LLM call start to first piece"),
        row("retrieval event", "retrieval_event", st, "client: request sent to the first event"),
        row("first sanitized delta", "first_delta", st, "client: request sent to the first delta"),
        row("first delta − retrieval event", "delta_after_retrieval", st,
            "the LLM's first token + the sanitizer's hold-back + SSE"),
        row("whole answer", "total", st, "client: request sent to the final event"),
    ], [f"stub: first piece after {STREAM_INTERVAL_S * 1000:g} ms, then {STREAM_CHARS} "
        f"characters every {STREAM_INTERVAL_S * 1000:g} ms ({len(STREAM_REPLY)} characters, "
        f"{-(-len(STREAM_REPLY) // STREAM_CHARS)} pieces); {streams} streams after 1 warm-up",
        f"{seen.get('stream_deltas')} deltas per answer; an unchecked link sent: "
        f"{seen.get('unchecked_link_sent')}"])
    return [over, own, stream]
