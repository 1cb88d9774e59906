"""The Ollama-speaking test server answers the official client as Ollama does."""

from __future__ import annotations

import ollama
import pytest

from tests.answer.ollama_server import OllamaServer

MODEL = "qwen3:30b-a3b"
MESSAGES = [{"role": "user", "content": "hello"}]


def test_chat_not_streamed(fake_ollama: OllamaServer) -> None:
    fake_ollama.behaviour.reply = "ZFS scrub schedule"
    response = _client(fake_ollama).chat(model=MODEL, messages=MESSAGES, stream=False, think=False,
                                    keep_alive="5m", options={"temperature": 0})
    assert response.message.content == "ZFS scrub schedule"
    assert response.done and response.done_reason == "stop"
    body = fake_ollama.chat_requests()[-1]
    assert body["stream"] is False and body["think"] is False and body["keep_alive"] == "5m"
    assert body["options"] == {"temperature": 0}


def test_chat_streamed_in_chunks(fake_ollama: OllamaServer) -> None:
    fake_ollama.behaviour.reply = "a streamed reply of some length"
    parts = list(_client(fake_ollama).chat(model=MODEL, messages=MESSAGES, stream=True))
    assert len(parts) > 2 and parts[-1].done and not parts[0].done
    assert "".join(p.message.content or "" for p in parts) == "a streamed reply of some length"


def test_stream_error_line_raises(fake_ollama: OllamaServer) -> None:
    fake_ollama.behaviour.reply = "some reply that breaks"
    fake_ollama.behaviour.stream_error = "model runner has unexpectedly stopped"
    with pytest.raises(ollama.ResponseError) as info:
        list(_client(fake_ollama).chat(model=MODEL, messages=MESSAGES, stream=True))
    assert "unexpectedly stopped" in str(info.value)


@pytest.mark.parametrize("stream", [False, True])
def test_unknown_model_is_a_404(fake_ollama: OllamaServer, stream: bool) -> None:
    with pytest.raises(ollama.ResponseError) as info:
        result = _client(fake_ollama).chat(model="nope:1b", messages=MESSAGES, stream=stream)
        if stream:
            list(result)  # type: ignore[arg-type]
    assert info.value.status_code == 404
    assert info.value.error == "model 'nope:1b' not found"


def test_configured_error_status(fake_ollama: OllamaServer) -> None:
    fake_ollama.behaviour.status, fake_ollama.behaviour.error = 500, "out of memory"
    with pytest.raises(ollama.ResponseError) as info:
        _client(fake_ollama).chat(model=MODEL, messages=MESSAGES, stream=False)
    assert (info.value.status_code, info.value.error) == (500, "out of memory")


def test_tags_and_show(fake_ollama: OllamaServer) -> None:
    client = _client(fake_ollama)
    assert [m.model for m in client.list().models] == [MODEL]
    assert client.show(MODEL).details.family == "qwen3moe"  # type: ignore[union-attr]
    with pytest.raises(ollama.ResponseError):
        client.show("absent:7b")


def test_calls_are_counted(fake_ollama: OllamaServer) -> None:
    client = _client(fake_ollama)
    for _ in range(3):
        client.chat(model=MODEL, messages=MESSAGES, stream=False)
    client.list()
    assert fake_ollama.chat_calls == 3


def _client(server: OllamaServer) -> ollama.Client:
    return ollama.Client(host=server.url, timeout=5)
