"""The per-request trace."""

from __future__ import annotations

import pytest

from sidecar.core.trace import StepFailed, Trace


def test_steps_record_status_time_and_detail() -> None:
    trace = Trace()
    with trace.step("embed") as detail:
        detail["model"] = "m"
    trace.skip("keyword", "semantic mode")
    with trace.step("rerank", swallow=True):
        raise RuntimeError("model missing")
    steps = trace.as_list()
    assert [(s["step"], s["status"]) for s in steps] == [
        ("embed", "done"), ("keyword", "skipped"), ("rerank", "error")]
    assert steps[0]["detail"] == {"model": "m"}
    assert steps[1]["detail"]["reason"] == "semantic mode"
    assert steps[2]["detail"]["error"] == "RuntimeError"  # the answer's short code
    step = trace.get("rerank")
    assert step is not None and "model missing" in step.detail["error"]  # kept in the process
    assert all(s["ms"] >= 0 for s in steps)


def test_an_error_text_goes_to_the_log_not_the_answer(caplog: pytest.LogCaptureFixture) -> None:
    trace = Trace()
    url = "http://10.0.0.7:11434/api/chat"
    with trace.step("rerank", swallow=True):
        raise ConnectionError(f"cannot reach {url} (/srv/sidecar/models/ce/model.onnx)")
    with trace.step("condense", swallow=True) as detail:
        detail["error"] = f"503: {url} says no"
        raise StepFailed("error:http_503")
    with trace.step("chain", swallow=True) as detail:
        detail["error"] = "cross-encoder failed to load: /srv/x is missing"
        raise StepFailed(detail["error"])
    answer = trace.as_list()
    assert [s["detail"]["error"] for s in answer] == [
        "ConnectionError", "error:http_503", "failed"]
    assert url not in str(answer) and "/srv" not in str(answer)
    for step in answer:
        ref = step["detail"]["error_ref"]
        [line] = [r.getMessage() for r in caplog.records if f"[{ref}]" in r.getMessage()]
        assert step["step"] in line
    assert url in caplog.text and "/srv/x is missing" in caplog.text


def test_an_unswallowed_error_propagates_and_is_recorded() -> None:
    trace = Trace()
    with pytest.raises(ValueError), trace.step("semantic"):
        raise ValueError("boom")
    step = trace.get("semantic")
    assert step is not None and step.status == "error"


def test_a_step_can_mark_itself_skipped() -> None:
    trace = Trace()
    with trace.step("condense") as detail:
        detail.update(skipped=True, reason="single turn")
    step = trace.get("condense")
    assert step is not None and step.status == "skipped" and "skipped" not in step.detail
