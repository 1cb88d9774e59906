"""Before and after, query by query: the comparisons `sidecar eval --train-embedder` reports."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.training import embed_compare as compare


def retrieval_doc(rr: list[float], post: list[float | None]) -> dict[str, Any]:
    return {"per_query": {"served": [
        {"query_id": str(i), "mrr@10": r, "hit@5": float(r > 0), "post_hit@5": p,
         "post_hit@1": p} for i, (r, p) in enumerate(zip(rr, post, strict=True))]}}


def test_retrieval_pairs_queries_by_id_and_skips_what_is_not_judged() -> None:
    before = retrieval_doc([0.5] * 20 + [0.0] * 20, [1.0] * 40)
    after = retrieval_doc([1.0] * 20 + [0.5] * 20, [1.0] * 40)
    after["per_query"]["served"].reverse()  # the order of the rows does not matter
    out = compare.retrieval(before, after, resamples=500, seed=0)["served"]
    assert out["queries"] == 40
    assert out["mrr@10"]["before"] == 0.25 and out["mrr@10"]["after"] == 0.75
    assert out["mrr@10"]["difference"] == 0.5 and out["mrr@10"]["significant"]
    assert out["post_hit@5"]["difference"] == 0 and not out["post_hit@5"]["significant"]
    unjudged = compare.retrieval(retrieval_doc([0.5] * 4, [None] * 4),
                                 retrieval_doc([0.5] * 4, [None] * 4), resamples=100, seed=0)
    assert "post_hit@5" not in unjudged["served"]


def zones_doc(answerable: list[float], leave_out: list[float], ood: list[float],
              abstain: float, normal: float) -> dict[str, Any]:
    rows = [{"side": "answerable", "query_id": str(i), "similarity": s, "evidence_hit": 1}
            for i, s in enumerate(answerable)]
    rows += [{"side": "leave_out", "query_id": str(i), "similarity": s, "evidence_hit": 0}
             for i, s in enumerate(leave_out)]
    rows += [{"side": "out_of_domain", "query_id": f"o{i}", "similarity": s, "evidence_hit": 0}
             for i, s in enumerate(ood)]
    return {"per_query": rows,
            "thresholds": {"calibrated": {"abstain": abstain, "normal": normal}}}


def test_zones_compare_each_model_on_its_own_thresholds() -> None:
    # Before: answerable and leave-out overlap; after: they separate. Each model has its own
    # similarity scale, and its own calibrated thresholds.
    before = zones_doc([0.6, 0.5, 0.7, 0.4] * 5, [0.55, 0.45, 0.65, 0.5] * 5, [0.95] * 20,
                       abstain=0.3, normal=0.6)
    after = zones_doc([0.9, 0.8, 0.85, 0.95] * 5, [0.4, 0.5, 0.45, 0.3] * 5, [0.05] * 20,
                      abstain=0.2, normal=0.7)
    out = compare.zones(before, after, resamples=300, seed=0)
    auroc = out["auroc_leave_out"]
    assert auroc["after"]["auroc"] == 1.0 and auroc["before"]["auroc"] < 0.8
    # The difference is the two models' own AUROCs apart, each on its own scores.
    assert auroc["difference"]["difference"] == pytest.approx(
        auroc["after"]["auroc"] - auroc["before"]["auroc"], abs=1e-3)
    assert auroc["difference"]["ci_low"] > 0
    # Each side of each model is read from that model's scores: an after that took the
    # leave-out side of before would not separate.
    assert out["auroc_out_of_domain"]["after"]["auroc"] == 1.0
    assert out["answerable_normal"]["before"] == pytest.approx(0.5)
    assert out["answerable_normal"]["after"] == 1.0
    assert out["leave_out_held_back"]["after"] == 1.0
    assert out["out_of_domain_abstain"]["before"] == 0
    assert out["out_of_domain_abstain"]["after"] == 1
    assert out["thresholds"]["after"] == {"abstain": 0.2, "normal": 0.7}


def test_related_compares_every_system_present_in_both() -> None:
    def doc(rr: list[float]) -> dict[str, Any]:
        return {"related": {"series": {"related_hybrid": {
            "mrr@10": rr, "hit@5": [float(r > 0) for r in rr], "hit@1": rr}}}}
    out = compare.related(doc([0.0] * 10), doc([1.0] * 10), resamples=200, seed=0)
    assert out["related_hybrid"]["mrr@10"]["difference"] == 1.0
