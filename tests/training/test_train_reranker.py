"""`sidecar train-reranker` end to end on the demo forum: public pairs only, no evaluation
question, a model the reranking path loads unchanged, the residual served, promotion and
rollback through the search profile, and a clear refusal for a forum too small."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from models import load_reranker
from sidecar.core.trace import Trace
from sidecar.errors import InvalidInput
from sidecar.evaluation.dataset import load_dataset
from sidecar.runtime.resources import start_resources
from sidecar.training import run as training_run
from sidecar.training.for_eval import judged_topics
from sidecar.training.mining import MiningRules
from sidecar.training.promote import promote, promoted_entry, rollback
from sidecar.training.run import ForumTooSmall, TrainOptions, train_forum_reranker
from sidecar.training.source import mine
from tests.conftest import demo_forum

pytestmark = [pytest.mark.torch, pytest.mark.slow]
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

DEMO = Path(__file__).resolve().parents[2] / "sidecar" / "demo"
PROBES = Path(__file__).resolve().parents[1] / "data" / "demo_private_probes.json"
# The demo forum's 47 topics are far below a real forum's minimum: the rules run on it with a
# small one, the refusal with the real one.
SMALL = MiningRules(min_words=6, positives=2, hard=3, random=1)


@pytest.fixture(scope="module")
def forum(tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str, redis_url: str,
          minilm: Any) -> Iterator[Any]:
    """The demo forum in a database of its own (the profile and models are written)."""
    with demo_forum(pg_admin_url, redis_url, tmp_path_factory.mktemp("train"), minilm,
                    prefix="t_train") as res:
        yield res


def test_a_forum_too_small_is_refused_with_the_number_it_needs(forum: Any) -> None:
    with pytest.raises(ForumTooSmall, match=r"has \d+ public topics .* at least 300"):
        train_forum_reranker(forum, TrainOptions(), progress=False)


def test_pairs_come_from_public_posts_and_never_from_an_evaluation_question(forum: Any) -> None:
    judged = judged_topics(DEMO)
    assert judged
    mined = mine(forum, rules=SMALL, max_threads=1000, held_share=0.3, seed="t",
                 exclude=judged, progress=False)
    pairs = mined.train + mined.held
    assert pairs and mined.held and mined.train
    assert {p.label for p in pairs} == {0.0, 1.0}
    # No judged topic is read: neither as a question nor as an answer or a negative.
    topics_read = {p.topic_id for p in pairs}
    assert not topics_read & judged
    titles = {t for t in _titles(judged)}
    assert not any(p.passage.startswith(f"{title} — ") for p in pairs for title in titles)
    questions = {" ".join(q.text.split()) for q in load_dataset(DEMO).queries}
    assert not {p.question for p in pairs} & questions
    # Private posts, restricted categories, whispers...: their canaries are nowhere.
    canaries = [c for probe in json.loads(PROBES.read_text()) for c in probe["canaries"]]
    text = json.dumps([dataclasses.asdict(p) for p in pairs])
    assert not [c for c in canaries if c in text]
    # Held-out topics are never trained on.
    assert not {p.topic_id for p in mined.train} & {p.topic_id for p in mined.held}


def _titles(topic_ids: frozenset[int]) -> list[str]:
    rows = [json.loads(line) for line in (DEMO / "topics.jsonl").read_text().splitlines()]
    return [r["title"] for r in rows if r["id"] in topic_ids]


def test_trained_exported_judged_promoted_served_and_rolled_back(
        forum: Any, tiny_encoder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(training_run, "MIN_THREADS", 10)
    options = TrainOptions(init=str(tiny_encoder), name="forum-test", rules=SMALL,
                           held_share=0.3, max_length=96, epochs=1.0, budget_s=120)
    outcome = train_forum_reranker(forum, options, progress=False)

    # A model directory the reranking path loads unchanged, with its training record.
    reranker = load_reranker(outcome.model_dir)
    assert reranker.name == "forum-test"
    assert reranker.manifest.quantization == "int8"
    assert reranker.manifest.max_length == 96
    record = reranker.manifest.training
    assert record["initialised_from"] == str(tiny_encoder)
    assert record["forum"] == "https://forum.example.org"
    assert record["pairs"]["train"]["positive"] > 0 and record["pairs"]["trained_on"] > 0
    assert record["residual"]["model"] == forum.model.name
    assert "questions" in record["held_out"]  # the guard's figures, whatever its verdict
    assert record["seed"] and record["seed"] != "forum-reranker"  # drawn for this run
    # A second run never replaces it: the name is taken.
    with pytest.raises(InvalidInput, match="never overwritten"):
        train_forum_reranker(forum, options, progress=False)
    assert isinstance(outcome.verdict.promote, bool)

    # Promoted in the profile: a new process serves it, with the cosine it corrects.
    promote(forum.settings, model=forum.model.name, name=outcome.name,
            model_dir=outcome.model_dir, training=outcome.record,
            held_out=outcome.verdict.figures)
    served = start_resources(forum.settings, embedder=forum.embedder)
    try:
        assert served.reranker is not None and served.reranker.name == "forum-test"
        residual = served.reranker_residual
        assert residual is not None and residual.model == forum.model.name
        trace = Trace()
        assessed = served.retrieval().assess("How do I grow a ZFS RAIDZ pool?", 3, trace)
        assert assessed.scorer == "cross-encoder:forum-test"
        step = next(s for s in trace.as_list() if s["step"] == "rerank")
        assert step["detail"]["residual"]["of"] == f"bi-encoder:{forum.model.name}"
        # The score is the model's correction plus the post's cosine, as trained.
        best = assessed.kept[0]
        cosine = best.topic.similarity_of(best.best_post.post_id)
        logit = float(served.reranker.score(
            "How do I grow a ZFS RAIDZ pool?",
            [f"{best.best_post.title} — {best.best_post.text}"])[0])
        # int8 logits of a post scored in a padded batch and alone differ in the 4th decimal
        # (each run trains from a fresh seed, so the margin is not one run's luck).
        assert best.score == pytest.approx(residual.score(logit, cosine), abs=1e-3)
    finally:
        served.close()
    assert promoted_entry(forum.settings).name == "forum-test"

    now, gone = rollback(forum.settings, model=forum.model.name)
    assert (now, gone.name) == (None, "forum-test")
    assert promoted_entry(forum.settings) is None
    with pytest.raises(ValueError, match="nothing to roll back"):
        rollback(forum.settings, model=forum.model.name)


def _env(settings: Any, model: Path) -> dict[str, str]:
    return {"DATABASE_URL": settings.database_url, "REDIS_URL": settings.redis_url,
            "SIDECAR_STATE_DIR": str(settings.state_dir), "SIDECAR_EMBED_MODEL_PATH": str(model),
            "SIDECAR_LOG_LEVEL": "WARNING"}


def test_the_command_refuses_a_forum_too_small_and_says_what_it_needs(
        forum: Any, minilm_dir: Path) -> None:
    from click.testing import CliRunner

    from sidecar.cli.main import main

    result = CliRunner().invoke(main, ["train-reranker", "--budget-minutes", "1"],
                                env=_env(forum.settings, minilm_dir))
    assert result.exit_code == 2, result.output
    assert "needs at least 300" in result.output and "public topics" in result.output
    assert not list(forum.settings.models_dir.glob("forum-reranker-*"))
