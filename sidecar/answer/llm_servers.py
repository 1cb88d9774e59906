"""The LLM that writes answers, as the settings name it (``SIDECAR_ANSWER_*``, else
``OLLAMA_URL``): an Ollama, or an OpenAI-compatible server."""

from __future__ import annotations

from sidecar.answer.llm import AnswerLLM
from sidecar.answer.ollama import OllamaChat
from sidecar.answer.openai_chat import OpenAIChat
from sidecar.config.settings import Settings


def answer_llm_from_settings(settings: Settings) -> AnswerLLM | None:
    """The LLM that writes answers (``SIDECAR_ANSWER_*``, else ``OLLAMA_URL``), or None."""
    url = settings.answer_llm_url()
    if url is None:
        return None
    timeout = settings.answer_timeout_s
    if settings.answer_api == "openai":
        key = settings.answer_api_key.get_secret_value() if settings.answer_api_key else None
        return OpenAIChat(url, settings.answer_llm_model(), api_key=key, timeout_s=timeout,
                          temperature=settings.answer_temperature,
                          max_tokens=settings.answer_max_tokens)
    return OllamaChat(url, settings.answer_llm_model(), timeout_s=timeout,
                      keep_alive=settings.ollama_keep_alive,
                      options={"temperature": settings.answer_temperature,
                               "num_predict": settings.answer_max_tokens})
