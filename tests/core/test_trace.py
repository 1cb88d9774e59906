"""The per-request trace."""

from __future__ import annotations

import pytest

from sidecar.core.trace import Trace


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
    assert "model missing" in steps[2]["detail"]["error"]
    assert all(s["ms"] >= 0 for s in steps)


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
