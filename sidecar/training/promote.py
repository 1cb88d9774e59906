"""Promotion and rollback of the forum's reranker: its entry in the search profile.

The profile is what every API node reads at start-up (copy it, and the model directory, to each
node, as for `sidecar calibrate`); a reload applies it. Promoting keeps the entry it replaces as
``previous``; rolling back puts that one back (or none: the cosine, or the settings' reranker).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sidecar.config.settings import Settings
from sidecar.search.profile import base_profile, read_profile, update_profile
from sidecar.search.profile_schema import SearchProfile
from sidecar.search.served_reranker import RerankerEntry


def promoted_entry(settings: Settings) -> RerankerEntry | None:
    """The reranker the profile promotes now (None: none, or no profile)."""
    path = settings.profile_path()
    if not path.is_file():
        return None
    profile, _ = read_profile(path)
    return profile.reranker


def promote(settings: Settings, *, model: str, name: str, model_dir: Path,
            training: dict[str, Any], held_out: dict[str, Any]) -> str:
    """Write ``name`` (its directory ``model_dir``) as the forum's reranker; returns the
    profile's digest. ``model``: the embedding model the profile is for. ValueError when
    ``model_dir`` is not a folder."""
    if not model_dir.is_dir():
        raise ValueError(f"no model folder at {model_dir}: nothing to promote")
    path = settings.profile_path()
    try:
        relative = str(model_dir.resolve().relative_to(settings.models_dir.resolve()))
    except ValueError:
        relative = str(model_dir.resolve())

    def change() -> SearchProfile:
        base = base_profile(path, model=model, strategy=settings.strategy, settings=settings)
        entry = RerankerEntry(
            name=name, path=relative,
            promoted_at=datetime.now(UTC).isoformat(timespec="seconds"),
            training={k: training[k] for k in ("initialised_from", "forum", "trained_at",
                                               "pairs", "seed") if k in training},
            held_out=held_out,
            previous=base.reranker.model_dump(exclude={"previous"}) if base.reranker else None)
        return base.model_copy(update={"reranker": entry})

    return update_profile(path, change)


def rollback(settings: Settings, *, model: str) -> tuple[RerankerEntry | None, RerankerEntry]:
    """Put the previous reranker back (or none); returns (now served, rolled back).
    ValueError when no reranker is promoted, or when the previous one's folder is gone (the
    API would then fail to start, or serve no reranker with zones calibrated for one)."""
    path = settings.profile_path()
    done: list[tuple[RerankerEntry | None, RerankerEntry]] = []

    def change() -> SearchProfile:
        base = base_profile(path, model=model, strategy=settings.strategy, settings=settings)
        current = base.reranker
        if current is None:
            raise ValueError("no reranker is promoted in the search profile: nothing to roll "
                             "back")
        previous = RerankerEntry.model_validate(current.previous) if current.previous else None
        if previous is not None and not previous.directory(settings).is_dir():
            raise ValueError(
                f"the reranker promoted before {current.name}, {previous.name}, is no longer "
                f"at {previous.directory(settings)}: restore that folder first (nothing was "
                "rolled back)")
        done.append((previous, current))
        return base.model_copy(update={"reranker": previous})

    update_profile(path, change)
    return done[0]
