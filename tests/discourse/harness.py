"""discourse-ai's tool runner, rebuilt to run our tool scripts in V8 (MiniRacer) from Python.

Discourse runs a custom AI tool in a MiniRacer context (``plugins/discourse-ai/lib/agents/
tool_runner.rb``): the framework script (``preamble.js`` here) defines ``http``, ``llm``,
``chain``, ``secrets``, ``crypto``, ``discourse`` and ``context`` over host functions, then the
tool's script is evaluated and ``invoke(<parameters as JSON>)`` called. This runner does the same
with Python answering the host functions (the script blocks on a shared buffer while Python
works, so calls stay synchronous) and keeps the runner's limits:

* 2,000 ms of script time: the clock runs only while the script itself runs, not while a host
  call is answered (Discourse pauses it in ``in_attached_function``); past it the script is
  terminated, which no ``catch`` can stop, and ``invoke`` answers
  ``{"error": "Script terminated due to timeout"}``;
* a 10 MB V8 heap; 20 levels of nesting in what crosses to the host;
* 20 HTTP requests (:mod:`tests.discourse.network`);
* ``secrets.get`` of an alias the tool does not declare, or declares but has not bound, throws,
  and a declared alias left unbound stops the tool before it runs.

``llm.generate`` is a stand-in (:class:`StandInLLM`): it checks the prompt as
``DiscourseAi::Completions::Prompt`` does, records it and answers what the test set.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import hmac
import json
import threading
import time
from base64 import b64encode
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from py_mini_racer import JSUndefined, mini_racer

from tests.discourse.discourse_api import DiscourseApi
from tests.discourse.network import Network, Sent

PREAMBLE = (Path(__file__).with_name("preamble.js")).read_text(encoding="utf-8")
TIMEOUT_MS = 2000
MAX_MEMORY = 10_000_000
MARSHAL_DEPTH = 20
BRIDGE_CHARS = 1 << 20
PROMPT_TYPES = {"system", "user", "model", "tool", "tool_call"}
PROMPT_KEYS = {"type", "content", "id", "name", "thinking", "thinking_provider_info",
               "thinking_signature", "redacted_thinking_signature", "provider_data"}


class ToolError(Exception):
    """The tool could not run (a declared secret alias left unbound)."""


def _depth(value: Any, level: int = 1) -> int:
    if isinstance(value, dict):
        return max([level, *(_depth(v, level + 1) for v in value.values())])
    if isinstance(value, list):
        return max([level, *(_depth(v, level + 1) for v in value)])
    return level


@dataclass
class StandInLLM:
    """The agent's LLM: answers ``reply`` (or ``reply(prompt)``) and records each prompt."""

    reply: str | Callable[[Any], str] = "ok"
    prompts: list[Any] = field(default_factory=list)

    def generate(self, prompt: Any, options: Any = None) -> str:
        if isinstance(prompt, dict):
            messages = prompt.get("messages")
            if not isinstance(messages, list) or not messages:
                raise ValueError("Prompt must have messages")
            for message in messages:
                if message.get("type") not in PROMPT_TYPES:
                    raise ValueError(f"message type must be one of {sorted(PROMPT_TYPES)}")
                if set(message) - PROMPT_KEYS:
                    raise ValueError(f"message contains invalid keys: {set(message) - PROMPT_KEYS}")
                if not isinstance(message.get("content"), str | list):
                    raise ValueError("Message content must be a string or an array")
            for last, new in pairwise(messages):
                if new["type"] == "system" or (last["type"] == "system" and new["type"] in
                                               ("tool", "tool_call", "model")) \
                        or (new["type"] == "model" and last["type"] == "model"):
                    raise ValueError("DiscourseAi::Completions::Prompt::INVALID_TURN")
        elif not isinstance(prompt, str):
            raise ValueError("Prompt must be a string or a hash")
        self.prompts.append(prompt)
        return self.reply(prompt) if callable(self.reply) else self.reply


@dataclass
class Tool:
    """An AI tool as an admin saves it: its script and the secrets bound to its aliases."""

    script: str
    secrets: dict[str, str | None]  # alias -> bound value (None: declared, not bound)


@dataclass
class Run:
    """What one invocation did."""

    result: Any = None
    custom_raw: str | None = None
    details: str | None = None
    sent: list[Sent] = field(default_factory=list)
    js_ms: float = 0.0
    host_calls: list[str] = field(default_factory=list)


class ToolRunner:
    """One tool run: ``ToolRunner(tool, context, network, api, llm).invoke(params)``."""

    def __init__(self, tool: Tool, context: dict[str, Any], network: Network, api: DiscourseApi,
                 llm: StandInLLM | None = None, *, base_url: str = "https://forum.example.org",
                 timeout_ms: int = TIMEOUT_MS) -> None:
        self.tool, self.network, self.api, self.llm = tool, network, api, llm
        self.context, self.base_url, self.timeout_ms = context, base_url, timeout_ms
        self.run = Run()

    def invoke(self, params: dict[str, Any]) -> Run:
        """Evaluate the framework and the script, call ``invoke(params)``, then ``details()``."""
        missing = [alias for alias, value in self.tool.secrets.items() if value is None]
        if missing:
            raise ToolError(f"missing required aliases: {', '.join(missing)}")
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        try:
            with mini_racer(loop) as mr:
                mr.set_hard_memory_limit(MAX_MEMORY)
                mr.eval(PREAMBLE.replace("__BRIDGE_CHARS__", str(BRIDGE_CHARS))
                        .replace("__BASE_URL__", json.dumps(self.base_url))
                        .replace("__CONTEXT__", json.dumps(self.context)))
                buffer = mr.eval("__takeBuffer()")
                assert isinstance(buffer, memoryview)
                self._buffer, self._state = buffer, buffer[0:16].cast("i")
                mr.eval(self.tool.script, timeout_sec=5)  # top level: declarations only
                self.run.result = self._timed(mr, loop, f"invoke({json.dumps(params)})")
                self.run.details = self._timed(mr, loop, "details()")
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
            loop.close()
        return self.run

    def _timed(self, mr: Any, loop: asyncio.AbstractEventLoop, call: str) -> Any:
        """Run ``call`` under the script-time limit, answering host calls as they come."""
        code = (f"(function () {{ const r = {call}; "
                "return r === undefined ? null : JSON.stringify(r); })()")
        future = asyncio.run_coroutine_threadsafe(mr.eval_cancelable(code), loop)
        spent, last = 0.0, time.perf_counter()
        while True:
            try:
                value = future.result(timeout=0.0005)
                self.run.js_ms += spent * 1000
                return None if value in (None, JSUndefined) else json.loads(value)
            except concurrent.futures.TimeoutError:
                pass
            now = time.perf_counter()
            if self._state[0] == 0:
                spent += now - last
            last = now
            if self._state[0] == 1:
                self._answer()
                last = time.perf_counter()  # the clock is paused during host calls
            if spent * 1000 > self.timeout_ms:
                future.cancel()
                self.run.js_ms += spent * 1000
                return {"error": "Script terminated due to timeout"}

    def _answer(self) -> None:
        """Read the waiting call from the buffer, run it, write its answer back."""
        n = self._state[1]
        call = json.loads(bytes(self._buffer[16:16 + 2 * n]).decode("utf-16-le", "surrogatepass"))
        self.run.host_calls.append(call["fn"])
        try:
            if _depth(call["args"]) > MARSHAL_DEPTH + 1:
                raise ValueError("marshal stack depth exceeded")
            answer: dict[str, Any] = {"value": self._dispatch(call["fn"], call["args"])}
        except Exception as error:  # a Ruby exception in an attached function: a JS Error
            answer = {"error": str(error) or type(error).__name__}
        data = json.dumps(answer, ensure_ascii=False).encode("utf-16-le", "surrogatepass")
        if len(data) // 2 > BRIDGE_CHARS:
            data = json.dumps({"error": "harness: answer larger than the bridge"}).encode(
                "utf-16-le")
        self._buffer[16:16 + len(data)] = data
        self._state[1] = len(data) // 2
        self._state[0] = 2

    def _dispatch(self, fn: str, args: list[Any]) -> Any:
        if fn.startswith("http_"):
            return self.network.request(self.run.sent, fn[5:], args[0], *args[1:2])
        if fn == "llm_generate":
            if self.llm is None:
                raise NameError("undefined method 'generate' for nil (no LLM given to the tool)")
            return self.llm.generate(*args)
        if fn in ("chain_set_custom_raw", "chain_stream_custom_raw"):
            self.run.custom_raw = str(args[0])
            return None
        if fn == "secrets_get":
            if args[0] not in self.tool.secrets:
                raise KeyError(f"Secret alias '{args[0]}' is not declared by this tool")
            return self.tool.secrets[args[0]]
        if fn == "crypto_hmac_sha256_hex":
            key, data = str(args[0]).encode(), str(args[1]).encode()
            return hmac.new(key, data, hashlib.sha256).hexdigest()
        if fn == "crypto_sha256_hex":
            return hashlib.sha256(str(args[0]).encode()).hexdigest()
        if fn == "crypto_base64_encode":
            return b64encode(str(args[0]).encode()).decode()
        if fn.startswith("discourse_"):
            return getattr(self.api, fn[len("discourse_"):])(*args)
        raise NotImplementedError(f"harness: {fn} is not implemented")
