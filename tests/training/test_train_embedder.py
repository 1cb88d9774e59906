"""`sidecar train-embedder` and `sidecar embedder` end to end on the demo forum: public pairs
only, a new model version registered beside the served one, its vectors written by the queued
backfill, promotion refused before full coverage and without evidence, served by every new
process once promoted (query embedder and vectors together), rolled back, pruned."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models.manifest import read_manifest, write_manifest
from sidecar.answer.zone_calibration import calibrate_zones, never_read
from sidecar.db.backfill_runs import get_run
from sidecar.db.calibration_read import opening_posts
from sidecar.db.embeddings import count_embeddings, find_model
from sidecar.db.served_embedder import coverage, read_served
from sidecar.errors import Conflict, InvalidInput
from sidecar.evaluation.dataset import load_dataset
from sidecar.related.cache import forum_cache
from sidecar.runtime.resources import start_resources
from sidecar.search.profile import read_profile
from sidecar.search.service import SearchOptions
from sidecar.training.embed_pairs import EmbedRules
from sidecar.training.embed_profile import profile_archive
from sidecar.training.embed_promote import (
    NotProven,
    NotReady,
    embedder_status,
    promote_embedder,
    prune_embedders,
    rollback_embedder,
)
from sidecar.training.embed_run import (
    EmbedOptions,
    check_device,
    served_checkpoint,
    train_forum_embedder,
)
from sidecar.training.embed_source import mine_embed_pairs
from sidecar.training.for_eval import judged_topics
from sidecar.training.run import ForumTooSmall
from tests.conftest import API_KEY, demo_forum
from tests.jobs.conftest import work

pytestmark = [pytest.mark.torch, pytest.mark.slow]
torch = pytest.importorskip("torch")

DEMO = Path(__file__).resolve().parents[2] / "sidecar" / "demo"
PROBES = Path(__file__).resolve().parents[1] / "data" / "demo_private_probes.json"
NAME = "forum-embedder-test"


@pytest.fixture(scope="module")
def forum(tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str, redis_url: str,
          minilm: Any, minilm_dir: Path) -> Iterator[Any]:
    """The demo forum in a database of its own; its 47 topics pass a lowered minimum."""
    with demo_forum(pg_admin_url, redis_url, tmp_path_factory.mktemp("embed"), minilm,
                    prefix="t_embed", embed_model_path=minilm_dir, train_min_threads=10) as res:
        yield res


def test_a_forum_too_small_is_refused_with_the_number_it_needs(forum: Any) -> None:
    strict = dataclasses.replace(forum, settings=forum.settings.model_copy(
        update={"train_min_threads": 300}))
    with pytest.raises(ForumTooSmall, match=r"has \d+ public topics .* at least 300"):
        train_forum_embedder(strict, EmbedOptions(), progress=False)
    assert not list(forum.settings.models_dir.glob("forum-embedder-*"))


def test_a_model_too_large_for_a_cpu_is_refused_with_its_numbers(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "xlm-roberta"}))
    with open(tmp_path / "model.safetensors", "wb") as f:
        f.truncate(2_270_000_000)  # bge-m3's 568M parameters in fp32, as a sparse file
    with pytest.raises(InvalidInput, match=r"about 568M parameters.*pairs/s.*--device cuda"):
        check_device(tmp_path, "cpu")
    small = tmp_path / "small"
    small.mkdir()
    (small / "config.json").write_text("{}")
    with open(small / "model.safetensors", "wb") as f:
        f.truncate(90_000_000)
    check_device(small, "cpu")  # MiniLM-sized: trains here


def test_names_are_plain_and_a_run_never_overwrites_a_model(forum: Any) -> None:
    for bad in ("../outside", "a/b", "..", ".hidden", "sp ace"):
        with pytest.raises(InvalidInput):
            train_forum_embedder(forum, EmbedOptions(name=bad), progress=False)
    (forum.settings.models_dir / "taken").mkdir(parents=True)
    with pytest.raises(Conflict, match="never overwritten"):
        train_forum_embedder(forum, EmbedOptions(name="taken"), progress=False)
    with pytest.raises(Conflict):
        train_forum_embedder(forum, EmbedOptions(name=forum.model.name), progress=False)


def test_tuning_starts_from_the_configured_models_own_checkpoint(forum: Any) -> None:
    folder = served_checkpoint(forum)
    assert (folder / "config.json").is_file() and list(folder.glob("*.safetensors"))


def test_pairs_come_from_public_posts_never_an_evaluation_question(forum: Any) -> None:
    judged = judged_topics(DEMO)
    mined = mine_embed_pairs(forum, rules=EmbedRules(hard_negatives=2), max_threads=1000,
                             held_share=0.2, seed="t", exclude=judged, progress=False)
    kinds = {p.kind for p in mined.train}
    assert {"title", "reply"} <= kinds and "accepted" in kinds
    assert mined.held_topics and not {p.topic_id for p in mined.train} & mined.held_topics
    assert any(p.negatives for p in mined.train)
    read = {p.topic_id for p in mined.train} | {p.target_topic for p in mined.train}
    assert not read & judged and not read & mined.held_topics
    questions = {" ".join(q.text.split()) for q in load_dataset(DEMO).queries}
    assert not {" ".join(p.query.split()) for p in mined.train} & questions
    canaries = [c for probe in json.loads(PROBES.read_text()) for c in probe["canaries"]]
    text = json.dumps([dataclasses.asdict(p) for p in mined.train])
    assert not [c for c in canaries if c in text]


def _vector_count(res: Any, name: str) -> int:
    with res.db.connection() as conn:
        model = find_model(conn, name)
        return count_embeddings(conn, model, 1) if model else 0


def cli(settings: Any, model: Path, *args: str) -> Any:
    """``sidecar ARGS`` in this process, on the test forum's settings."""
    from click.testing import CliRunner

    from sidecar.cli.main import main

    env = {"DATABASE_URL": settings.database_url, "REDIS_URL": settings.redis_url,
           "SIDECAR_STATE_DIR": str(settings.state_dir), "SIDECAR_EMBED_MODEL_PATH": str(model),
           "SIDECAR_FORUM_URL": settings.forum_url, "SIDECAR_LOG_LEVEL": "WARNING"}
    return CliRunner().invoke(main, list(args), env=env)


def test_the_command_refuses_a_forum_too_small_and_says_what_it_needs(
        forum: Any, minilm_dir: Path) -> None:
    result = cli(forum.settings, minilm_dir, "train-embedder", "--budget-minutes", "1")
    assert result.exit_code == 2, result.output
    assert "needs at least 300" in result.output and "public topics" in result.output


def test_trained_reembedded_promoted_served_rolled_back_and_pruned(
        forum: Any, tiny_encoder: Path, minilm_dir: Path) -> None:
    settings = forum.settings
    # 25 of the 40 answered public topics held out: its zones are calibrated on those alone.
    with forum.db.connection() as conn:
        answered = sorted(p.topic_id for p in opening_posts(conn, 100, 0))
    options = EmbedOptions(init=str(tiny_encoder), name=NAME, epochs=1.0, batch_size=8,
                           max_length=64, budget_s=120, held_share=0.0,
                           held=frozenset(answered[::2] + answered[1:10:2]))
    outcome = train_forum_embedder(forum, options, progress=False)

    # A new model version beside the served one: its own folder, registry row and record.
    manifest = read_manifest(outcome.model_dir)
    assert (manifest.name, manifest.dimensions) == (NAME, 32)
    record = manifest.training
    assert record["kind"] == "embedder" and record["base"] == forum.model.name
    assert record["pairs"]["train"]["title"] > 0 and record["run"]["pairs_seen"] > 0
    assert record["split"]["seed"] not in ("forum-reranker", "eval")  # drawn afresh
    assert outcome.model.id != forum.model.id and _vector_count(forum, NAME) == 0

    # Not served before its vectors cover every public post.
    with pytest.raises(NotReady, match=f"sidecar backfill --model {NAME}"):
        promote_embedder(settings, NAME)

    # The nightly re-embedding queues a run for it; a real worker (burst) writes its vectors
    # beside the served ones.
    queued = cli(settings, minilm_dir, "embedder", "reembed", "--no-wait")
    assert queued.exit_code == 0, queued.output
    run_id = int(queued.output.rsplit("#", 1)[1])
    assert work(forum)
    with forum.db.connection() as conn:
        public, covered = coverage(conn, outcome.model, 1)
        assert public == covered > 0
        finished = get_run(conn, run_id)
    assert (finished.status, finished.stop_reason) == ("finished", "done")
    assert cli(settings, minilm_dir, "embedder", "reembed", "--no-wait").output.startswith(
        "no tuned model awaits")
    assert _vector_count(forum, forum.model.name) == public  # the served ones untouched

    # No judged question on its held-out topics: no evidence, so not without the operator.
    with pytest.raises(NotProven, match="explicit choice"):
        promote_embedder(settings, NAME)
    refused = cli(settings, minilm_dir, "embedder", "promote", NAME)
    assert refused.exit_code == 3 and "not promoted" in refused.output
    cache = forum_cache(forum.redis, settings, forum.db)
    generation = int(forum.redis.get(cache.generation_key) or 0)
    report = promote_embedder(settings, NAME, force=True, progress=False)
    assert report["promoted"] == NAME and report["forced"]
    assert report["replaces"] == forum.model.name
    assert int(forum.redis.get(cache.generation_key) or 0) == generation + 1
    with forum.db.connection() as conn:
        entry = read_served(conn)
    assert entry is not None and (entry.name, entry.base) == (NAME, forum.model.name)
    profile, _ = read_profile(settings.profile_path())
    assert profile.model == NAME and f"bi-encoder:{NAME}" in profile.zones
    # Calibrated by asking only the topics it never read.
    assert record["split"]["held_topics"] == sorted(options.held) and len(options.held) == 25
    assert report["profile"]["calibrated"] is not None
    assert profile.zones[f"bi-encoder:{NAME}"].questions == 25 < len(answered) == 40

    # Every process started from now on serves it: the query embedder and the vectors agree.
    served = start_resources(settings)
    try:
        assert served.model.id == outcome.model.id and served.embedder.dimensions == 32
        assert served.served is not None and served.served.source == "promoted"
        question = "How do I grow a ZFS RAIDZ pool?"
        best = served.search.find_topics(question, 3, SearchOptions()).topics[0]
        post_id, similarity = best.post_similarity[0]
        query = served.embedder.embed([question], kind="query")[0]
        with served.db.connection() as conn:
            stored = conn.execute(
                "SELECT embeddings FROM ai_posts_embeddings WHERE model_id = %s AND post_id = %s",
                (outcome.model.id, post_id)).fetchone()["embeddings"].to_numpy()
        cosine = float(np.dot(query, stored) / np.linalg.norm(query) / np.linalg.norm(stored))
        assert similarity == pytest.approx(cosine, abs=2e-3)  # the tuned model's own vectors
        from sidecar.api.app import create_app

        health = create_app(settings, served).test_client().get(
            "/v1/health", headers={"Authorization": f"Bearer {API_KEY}"}).get_json()
        assert health["models"]["embedder"]["name"] == NAME
        assert health["models"]["embedder"]["served_by"]["source"] == "promoted"
        # Index events keep the configured model's vectors fresh for a rollback: it loads
        # from the folder the settings name for it.
        base = served.indexer(forum.model, 1)
        assert base.embedder.name == forum.model.name and base.embedder.dimensions == 384
    finally:
        served.close()

    # A node without the model's folder serves the configured model, and says why.
    hidden = outcome.model_dir.with_name(".hidden")
    os.replace(outcome.model_dir, hidden)
    try:
        node = start_resources(settings, load_models=False)
        try:
            assert node.model.name == forum.model.name
            assert node.served is not None and "not on this node" in (node.served.note or "")
        finally:
            node.close()
    finally:
        os.replace(hidden, outcome.model_dir)

    status = embedder_status(settings)
    assert status["served"] == NAME
    assert {m["name"]: m["complete"] for m in status["models"]} == {forum.model.name: True,
                                                                    NAME: True}
    assert prune_embedders(settings) == []  # the served model and the rollback target stay

    # Rollback: the configured model serves again, its vectors were kept; the tuned one's
    # profile is kept aside for a later promotion.
    back = rollback_embedder(settings)
    assert (back["rolled_back"], back["serves"]) == (NAME, forum.model.name)
    assert profile_archive(settings, NAME).is_file()
    with forum.db.connection() as conn:
        assert read_served(conn) is None
    node = start_resources(settings, load_models=False)
    try:
        assert node.model.name == forum.model.name
    finally:
        node.close()
    with pytest.raises(InvalidInput, match="no embedder is promoted"):
        rollback_embedder(settings)

    # Prune: the newest tuned model awaits a promotion, so it is kept unless named.
    assert prune_embedders(settings) == []
    with pytest.raises(Conflict, match="kept"):
        prune_embedders(settings, name=forum.model.name)
    assert prune_embedders(settings, name=NAME, dry_run=True) == [
        {"name": NAME, "vectors": public, "deleted": False, "folder_removed": False}]
    assert _vector_count(forum, NAME) == public and outcome.model_dir.is_dir()
    assert prune_embedders(settings, name=NAME)[0]["deleted"]
    assert _vector_count(forum, NAME) == 0 and _vector_count(forum, forum.model.name) == public
    assert not outcome.model_dir.exists()


def test_a_tuned_models_zones_ask_only_the_topics_it_never_read(
        forum: Any, minilm_dir: Path, tmp_path: Path) -> None:
    # The configured model's folder and vectors, with the training record a tuned model has.
    folder = tmp_path / "tuned-copy"
    shutil.copytree(minilm_dir, folder)
    manifest = read_manifest(folder)
    with forum.db.connection() as conn:
        topics = sorted(p.topic_id for p in opening_posts(conn, 100, 0))
    assert len(topics) == 40  # the demo's public topics with a public reply

    def calibrated(held: list[int]) -> Any:
        write_manifest(folder, manifest.replace(
            training={"kind": "embedder", "split": {"held_topics": held}}))
        settings = forum.settings.model_copy(update={"embed_model_path": folder})
        assert never_read(settings) == frozenset(held)
        res = start_resources(settings)
        try:
            return calibrate_zones(res, seed=3, basis="opening_posts", progress=False)
        finally:
            res.close()

    run = calibrated(topics[:24])
    assert run.calibration.questions == 24
    with pytest.raises(ValueError, match="never read only 5 of its topics"):
        calibrated(topics[:5])
    # A model that read none of the forum (the configured one) asks any of its topics.
    assert never_read(forum.settings) is None
