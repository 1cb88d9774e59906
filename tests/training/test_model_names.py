"""What a training run may write: a plain model name inside the models folder, never an existing
folder nor the promoted model's name; a rollback only to a folder that is still there; and the
search profile's writers, who take turns under a lock, each with a temporary file of its own."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from models.names import InvalidModelName, ModelExists, check_model_name, new_model_dir
from sidecar.config.settings import Settings
from sidecar.core.answerability import calibrate
from sidecar.errors import InvalidInput
from sidecar.search.profile import read_profile, update_profile, with_zones, write_profile
from sidecar.training.export import export_reranker
from sidecar.training.promote import promote, promoted_entry, rollback
from sidecar.training.run import new_reranker_dir
from tests.conftest import make_settings

NOT_PLAIN = ("../evil", "a/b", "..", ".", ".hidden", "-rf", "", "a..b", "x" * 101, "a b",
             "name\n", "/etc", "name/", "modèle", "a\\b")
SCORES = [i / 100 for i in range(30, 90)]


def _settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path, "postgresql://127.0.0.1:1/unused", "redis://127.0.0.1:1")


def _model(settings: Settings, name: str) -> Path:
    folder = settings.models_dir / name
    folder.mkdir(parents=True)
    (folder / "model.onnx").write_text("weights")
    return folder


def _promote(settings: Settings, name: str, folder: Path) -> None:
    promote(settings, model="m", name=name, model_dir=folder, training={}, held_out={})


def test_a_model_name_is_a_plain_folder_name() -> None:
    for good in ("forum-reranker-20261206T101010", "eval-reranker-0123abcd", "my_model.v2"):
        assert check_model_name(good) == good
    for bad in NOT_PLAIN:
        with pytest.raises(InvalidModelName):
            check_model_name(bad)


def test_a_new_model_never_takes_a_name_already_there(tmp_path: Path) -> None:
    models = tmp_path / "models"
    (models / "kept").mkdir(parents=True)
    (models / "link").symlink_to(tmp_path)
    (models / "file").write_text("x")
    for name in ("kept", "link", "file"):
        with pytest.raises(ModelExists):
            new_model_dir(models, name)
    assert new_model_dir(models, "fresh") == models / "fresh"
    assert not (models / "fresh").exists()  # nothing is created


def test_an_export_never_deletes_what_is_there(tmp_path: Path) -> None:
    served = tmp_path / "models" / "served"
    served.mkdir(parents=True)
    (served / "model.onnx").write_text("the served model")
    with pytest.raises(FileExistsError):
        export_reranker(tmp_path / "no-checkpoint", served, name="served", quantize=False,
                        training={})
    assert (served / "model.onnx").read_text() == "the served model"
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data").write_text("x")
    with pytest.raises(InvalidModelName):
        export_reranker(tmp_path / "no-checkpoint", tmp_path / "models" / ".." / "precious",
                        name="../precious", quantize=False, training={})
    assert (precious / "data").read_text() == "x"


def test_a_run_never_takes_the_promoted_name_nor_an_existing_folder(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    before, served = _model(settings, "forum-reranker-a"), _model(settings, "forum-reranker-b")
    _promote(settings, "forum-reranker-a", before)
    _promote(settings, "forum-reranker-b", served)
    shutil.rmtree(before)  # its folder gone, its name still the rollback's target
    for name in ("forum-reranker-a", "forum-reranker-b", *NOT_PLAIN):
        with pytest.raises(InvalidInput):
            new_reranker_dir(settings, name)
    assert new_reranker_dir(settings, "forum-reranker-c") == settings.models_dir / \
        "forum-reranker-c"
    assert (served / "model.onnx").read_text() == "weights"


def test_a_rollback_needs_the_previous_model_s_folder(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    first, second = _model(settings, "r1"), _model(settings, "r2")
    _promote(settings, "r1", first)
    _promote(settings, "r2", second)
    shutil.rmtree(first)
    with pytest.raises(ValueError, match="no longer at"):
        rollback(settings, model="m")
    entry = promoted_entry(settings)
    assert entry is not None and entry.name == "r2"  # nothing rolled back
    _model(settings, "r1")
    now, gone = rollback(settings, model="m")
    assert now is not None and (now.name, gone.name) == ("r1", "r2")
    with pytest.raises(ValueError, match="no model folder"):
        _promote(settings, "r3", settings.models_dir / "r3")


def test_the_command_refuses_a_name_that_is_not_plain_before_it_starts(tmp_path: Path) -> None:
    from sidecar.cli.main import main

    result = CliRunner().invoke(main, ["train-reranker", "--name", "../../srv/forum"], env={
        "SIDECAR_STATE_DIR": str(tmp_path), "DATABASE_URL": "postgresql://127.0.0.1:1/none",
        "REDIS_URL": "redis://127.0.0.1:1"})
    assert result.exit_code == 2, result.output
    assert "--name" in result.output and "not a plain model name" in result.output


def test_profile_writers_take_turns_and_undo_nothing(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    path = settings.profile_path()
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            for k in range(12):
                zones = calibrate(SCORES, scorer=f"bi-encoder:w{i}-{k}", created_at="x")
                update_profile(path, lambda z=zones: with_zones(
                    path, z, model="m", strategy=1, settings=settings))
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    profile, _ = read_profile(path)
    assert len(profile.zones) == 6 * 12  # each read its base under the lock
    assert not [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_profile_writes_never_share_a_temporary_file(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    path = settings.profile_path()
    errors: list[BaseException] = []
    zones = calibrate(SCORES, scorer="bi-encoder:x", created_at="x")
    profile = with_zones(path, zones, model="m", strategy=1, settings=settings)

    def writer() -> None:
        try:
            for _ in range(40):
                write_profile(path, profile)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:1]
    assert read_profile(path)[0] == profile
    assert not [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_the_trainer_claims_a_new_checkpoint_folder(tmp_path: Path, tiny_encoder: Path) -> None:
    """Fault (issue 45): the trainer wrote into a folder that was there already
    (``mkdir(exist_ok=True)``), so its files, or a link planted in it, mixed into the model."""
    pytest.importorskip("torch")
    from sidecar.training.mining import Pair
    from sidecar.training.trainer import TrainConfig, train

    out = tmp_path / "checkpoint"
    out.mkdir()
    (out / "tokenizer_config.json").write_text('{"planted": true}')
    (out / "vocab.txt").symlink_to(tmp_path / "elsewhere.txt")
    pairs = [Pair("how much sealant", "60 ml a tyre", 1.0, 0.5, 1, "positive")]
    with pytest.raises(FileExistsError):
        train(pairs, TrainConfig(init=tiny_encoder, max_length=32, budget_s=1), out,
              residual=None, progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["tokenizer_config.json", "vocab.txt"]
    assert not (tmp_path / "elsewhere.txt").exists()
