"""`sidecar embedder status|promote|rollback|prune`: serving a forum-tuned embedder, or not.

A tuned model (``sidecar train-embedder``) is a model version of its own; its vectors are written
beside the served ones by the backfill. Promoting it:

1. refuses while its vectors do not cover every public post (the semantic leg would miss posts);
2. asks the guard (:mod:`sidecar.training.embed_guard`): the forum's judged questions on topics
   it never read, both models, a paired CI; without such evidence only ``force`` promotes;
3. writes the promoted entry into the database (:mod:`sidecar.db.served_embedder`), which every
   node reads when it starts: a node's query embedder and the vectors it searches change
   together, at its reload;
4. keeps the served model's search profile aside and serves the new model's
   (:mod:`sidecar.training.embed_profile`): the one kept from an earlier promotion, else zones
   calibrated on the new model, served only within their bounds;
5. drops the related-topic caches.

Rollback puts the previous entry back and its profile, as long as its vectors and folder are
kept; prune deletes the vectors of models that are neither served nor the rollback target.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from models.errors import ModelLoadError
from models.manifest import ModelManifest, read_manifest
from models.names import InvalidModelName, check_model_name
from sidecar.config.settings import Settings
from sidecar.db.embeddings import RegisteredModel, find_model
from sidecar.db.migrate import parse_version
from sidecar.db.served_embedder import (
    EmbedderEntry,
    coverage,
    delete_model_vectors,
    models_with_vectors,
    read_served,
    write_served,
)
from sidecar.errors import Conflict, InvalidInput, NotFound
from sidecar.related.cache import forum_cache
from sidecar.runtime.resources import Resources, start_resources
from sidecar.runtime.served_model import configured_settings
from sidecar.search.service import SearchService
from sidecar.training.embed_guard import EmbedVerdict, ask_both, held_out_questions, judge_embedder
from sidecar.training.embed_profile import arrive
from sidecar.training.source import forum_judgements, label_questions

log = logging.getLogger(__name__)


class NotReady(Conflict):
    """The model cannot serve yet: its vectors do not cover every public post."""


class NotProven(Conflict):
    """The guard did not find the new model better (or had no evidence) and nobody forced."""


@dataclass(frozen=True)
class Candidate:
    """A tuned model, its training record and how far its vectors cover the forum."""

    model: RegisteredModel
    manifest: ModelManifest
    public: int
    covered: int

    @property
    def complete(self) -> bool:
        """Whether every public post has its vector."""
        return self.covered >= self.public


def configured_model(res: Resources) -> str:
    """The model the settings configure (a promoted one replaces it in ``res.settings``)."""
    return configured_settings(res.settings, res.served).embed_model


def candidate(res: Resources, name: str) -> Candidate:
    """A prepared, registered tuned model by name, with its coverage."""
    try:
        name = check_model_name(name)
    except InvalidModelName as exc:
        raise InvalidInput(str(exc)) from exc
    try:
        manifest = read_manifest(res.settings.models_dir / name)
    except ModelLoadError as exc:
        raise NotFound(f"no model {name!r} in {res.settings.models_dir}: {exc}") from exc
    with res.db.connection() as conn:
        model = find_model(conn, name)
        if model is None:
            raise NotFound(f"model {name!r} is not registered: `sidecar train-embedder` "
                           "registers what it trains")
        public, covered = coverage(conn, model, res.settings.strategy)
    return Candidate(model, manifest, public, covered)


def guard(res: Resources, cand: Candidate, *, resamples: int = 2000) -> EmbedVerdict:
    """Ask the forum's held-out judged questions of the served model and of ``cand``."""
    held = (cand.manifest.training or {}).get("split", {}).get("held_topics", [])
    with res.db.connection() as conn:
        # Moderators' labels and members' clicks: they measure the model, never train it.
        judged = (forum_judgements(conn, min_members=res.settings.click_min_members)
                  + label_questions(conn))
    limit = res.settings.max_query_chars
    questions = [(q[:limit], t) for q, t in held_out_questions(judged, held)]
    served = res.search
    new = SearchService(res.db, res.embedder_for(cand.model), cand.model, res.settings,
                        iterative_scan=parse_version(res.pgvector) >= (0, 8, 0),
                        served=served.served, served_details=served.served_details,
                        keyword=served.keyword, link_rule=served.link_rule)
    new_rr, served_rr = ask_both(questions, served, new) if questions else ([], [])
    return judge_embedder(new_rr, served_rr, served_name=res.model.name,
                          new_name=cand.model.name, resamples=resamples)


def promote_embedder(settings: Settings, name: str, *, force: bool = False,
                     progress: bool = True) -> dict[str, Any]:
    """Serve the tuned model ``name`` (see the module's steps); returns what was done.

    Raises :class:`NotReady` before full coverage, :class:`NotProven` when the guard does not
    promote and ``force`` is not given.
    """
    res = start_resources(settings)
    try:
        cand = candidate(res, name)
        base = configured_model(res)
        trained_on = (cand.manifest.training or {}).get("base")
        if trained_on not in (base, None):
            raise InvalidInput(f"{name} was tuned from {trained_on}, this forum is configured "
                               f"with {base}: it cannot serve here")
        if cand.model.id == res.model.id:
            raise Conflict(f"{name} is served already")
        if not cand.complete:
            raise NotReady(
                f"{name} has vectors for {cand.covered} of {cand.public} public posts: it serves "
                f"once it covers them all. Continue with `sidecar backfill --model {name}`")
        verdict = guard(res, cand)
        if not verdict.promote and not force:
            raise NotProven(verdict.reason)
        leaving = res.model.name
        with res.db.connection() as conn:
            current = read_served(conn)
            entry = EmbedderEntry(
                name=name, base=base, promoted_at=datetime.now(UTC).isoformat(timespec="seconds"),
                evidence={"promoted_by": "guard" if verdict.promote else "operator (--force)",
                          "reason": verdict.reason, **verdict.figures},
                previous=current.model_dump(exclude={"previous"}) if current else None)
            write_served(conn, entry)
        forum_cache(res.redis, res.settings, res.db).drop_all()
    finally:
        res.close()
    report: dict[str, Any] = {"promoted": name, "replaces": leaving, "guard": verdict.reason,
                              "forced": not verdict.promote, "figures": verdict.figures}
    report["profile"] = arrive(settings, leaving, name, progress=progress)
    return report


def rollback_embedder(settings: Settings) -> dict[str, Any]:
    """Serve the model served before the promoted one again (its vectors must be kept)."""
    res = start_resources(settings, load_models=False)
    try:
        leaving = res.model.name
        with res.db.connection() as conn:
            current = read_served(conn)
            if current is None:
                raise InvalidInput("no embedder is promoted: the configured model serves")
            previous = (EmbedderEntry.model_validate(current.previous)
                        if current.previous else None)
            arriving = previous.name if previous else current.base
            model = find_model(conn, arriving)
            public, covered = coverage(conn, model, res.settings.strategy) if model else (0, 0)
            if model is None or covered == 0:
                raise Conflict(f"the vectors of {arriving} are gone (pruned): rolling back would "
                               f"serve an empty search. Re-embed it first (`sidecar backfill "
                               f"--model {arriving}`)")
            if previous is not None and not (settings.models_dir / arriving).is_dir():
                raise Conflict(f"the folder of {arriving} is gone from {settings.models_dir}")
            write_served(conn, previous)
        forum_cache(res.redis, res.settings, res.db).drop_all()
    finally:
        res.close()
    report: dict[str, Any] = {"rolled_back": current.name, "serves": arriving,
                              "covered": covered, "public": public}
    report["profile"] = arrive(settings, leaving, arriving, progress=False)
    return report


def embedder_status(settings: Settings) -> dict[str, Any]:
    """What serves, what was promoted before, and every model with vectors (with coverage)."""
    res = start_resources(settings, load_models=False)
    try:
        with res.db.connection() as conn:
            entry = read_served(conn)
            models = []
            for model, vectors in models_with_vectors(conn):
                public, covered = coverage(conn, model, res.settings.strategy)
                try:
                    training = read_manifest(settings.models_dir / model.name).training
                except ModelLoadError:
                    training = None
                models.append({"name": model.name, "model_id": model.id, "vectors": vectors,
                               "covers": f"{covered}/{public}",
                               "complete": covered >= public,
                               "served": model.name == res.model.name,
                               "tuned": bool(training and training.get("kind") == "embedder")})
        return {"served": res.model.name,
                "served_by": res.served.describe() if res.served else None,
                "promoted": entry.model_dump() if entry else None, "models": models}
    finally:
        res.close()


def _tuned(settings: Settings, name: str) -> dict[str, Any] | None:
    """The training record of a tuned embedder's folder (None: not one of ours). ``name`` comes
    from the registry, which the role can write: a name that is not a plain model name (``..``,
    a path) names no folder of ours, so nothing outside the models folder is read or removed."""
    try:
        check_model_name(name)
        training = read_manifest(settings.models_dir / name).training
    except InvalidModelName:
        log.warning("a registered model name is not a plain model name: %r (not pruned)", name)
        return None
    except ModelLoadError:
        return None
    return training if training and training.get("kind") == "embedder" else None


def prune_embedders(settings: Settings, *, name: str | None = None, dry_run: bool = False
                    ) -> list[dict[str, Any]]:
    """Delete the vectors of the models that neither serve nor are the rollback target (nor
    the configured model, nor the newest tuned one, which awaits its promotion), and the folders
    of such tuned models; ``name``: that model only (the newest tuned one included)."""
    res = start_resources(settings, load_models=False)
    try:
        with res.db.connection() as conn:
            entry = read_served(conn)
            kept = {res.model.name, configured_model(res)}
            if entry is not None:
                kept.add(entry.name)
                kept.add(str(entry.previous["name"]) if entry.previous else entry.base)
            if name is not None and name in kept:
                raise Conflict(f"{name} serves, or is what a rollback serves: it is kept")
            newest = _newest_tuned(settings)
            keep = kept if name is not None else kept | ({newest} if newest else set())
            doomed = [(m, n) for m, n in models_with_vectors(conn)
                      if m.name not in keep and name in (None, m.name)]
        # Tuned models never embedded (a run stopped early) go too: their folder is all there is.
        names = {m.name for m, _ in doomed} | {
            p.parent.name for p in settings.models_dir.glob("*/manifest.json")
            if p.parent.name not in keep and name in (None, p.parent.name)
            and _tuned(settings, p.parent.name)}
        out: dict[str, dict[str, Any]] = {}
        for model, vectors in doomed:
            while not dry_run:
                with res.db.connection() as conn:
                    if delete_model_vectors(conn, model.id) == 0:
                        break
            out[model.name] = {"name": model.name, "vectors": vectors, "deleted": not dry_run}
        for name in sorted(names):
            if _tuned(settings, name) is None:
                continue  # a model the operator prepared: its folder is theirs
            if not dry_run:
                shutil.rmtree(settings.models_dir / name)
            row = out.setdefault(name, {"name": name, "vectors": 0, "deleted": not dry_run})
            row["folder_removed"] = not dry_run
        return list(out.values())
    finally:
        res.close()


def _newest_tuned(settings: Settings) -> str | None:
    """The most recently trained tuned embedder in the models folder."""
    tuned = [(str(record.get("trained_at", "")), p.parent.name)
             for p in settings.models_dir.glob("*/manifest.json")
             if (record := _tuned(settings, p.parent.name))]
    return max(tuned)[1] if tuned else None


def pending_candidate(res: Resources) -> Candidate | None:
    """The newest tuned model when it does not serve and its vectors are incomplete: what the
    nightly re-embedding continues (None: nothing to do)."""
    name = _newest_tuned(res.settings)
    if name is None:
        return None
    try:
        cand = candidate(res, name)
    except NotFound:
        return None
    return cand if cand.model.id != res.model.id and not cand.complete else None
