"""The search profile: the served search configuration that ``sidecar tune`` chose for a forum.

A JSON file (``SIDECAR_SEARCH_PROFILE``, default ``<state_dir>/search-profile.json``) read once at
start-up, like the environment file: every API node of a forum carries the same file (deploy it
with the environment file; ``/v1/health`` shows its digest so nodes can be compared). Without a
file the settings decide. A profile tuned with another embedding model is not applied (weights
tuned for one model's scores say nothing about another's) and ``/v1/health`` says so.

A profile has a slot per query shape, because the best fusion differs between them: a query
alone (a search box, a condensed chat question) and a query that comes with details (a topic's
title and body, `/v1/search`'s ``details``), where the keyword leg reads only the title. Each
slot is tuned on judgements of its shape (`sidecar tune --query title+body` fills the second);
a request with details uses the second slot when it is there, else the first.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from sidecar.config.settings import Settings
from sidecar.core.answerability import ZoneCalibration
from sidecar.core.fusion import Fusion, FusionMethod, parse_weights
from sidecar.core.postchoice import ANSWER_RULE, LinkRule
from sidecar.core.searchconfig import SearchConfig
from sidecar.core.types import Mode, TopicScore
from sidecar.errors import ConfigurationError
from sidecar.search.profile_io import update_profile as update_profile
from sidecar.search.profile_io import write_profile as write_profile
from sidecar.search.profile_schema import (
    LinkRuleModel,
    PendingZonesModel,
    ProfileSlot,
    SearchProfile,
    ServedModel,
    ZoneCalibrationModel,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProfileState:
    """What the running sidecar serves and why (shown by /v1/health)."""

    config: SearchConfig
    source: Literal["profile", "settings"]
    path: Path
    digest: str | None = None
    note: str | None = None
    profile: SearchProfile | None = None
    details_config: SearchConfig | None = None  # queries with details, when tuned apart

    def link_rule(self) -> LinkRule:
        """The linked post's rule: learned for this forum (same model), else the fixed one."""
        applies = self.profile is not None and self.profile.link_rule is not None and (
            self.note is None or "not applied" not in self.note)
        if not applies:
            return ANSWER_RULE
        assert self.profile is not None and self.profile.link_rule is not None
        return self.profile.link_rule.to_rule()

    def promoted_reranker(self, settings: Settings) -> Path | None:
        """The model directory of the forum's promoted reranker, when the profile applies to
        the served model and has one (``sidecar train-reranker``)."""
        applies = self.profile is not None and (self.note is None or "not applied" not in
                                                self.note)
        if not applies or self.profile is None or self.profile.reranker is None:
            return None
        return self.profile.reranker.directory(settings)

    def zones_for(self, scorer: str) -> ZoneCalibration | None:
        """The calibrated zone thresholds of a scorer, when the profile applies and has them."""
        # Keyed by scorer, which names its model: another model's thresholds never apply.
        if self.profile is None:
            return None
        found = self.profile.zones.get(scorer)
        return found.to_calibration(scorer) if found is not None else None

    def config_for(self, *, details: bool) -> SearchConfig:
        """What a query of this shape is served."""
        return self.details_config if details and self.details_config else self.config

    def served_by(self) -> dict[str, Any]:
        """Where the served fusion comes from, as each search trace says it: the settings'
        default (no profile), or the profile and the judgements it was tuned on."""
        if self.source == "settings":
            out: dict[str, Any] = {"source": "settings",
                                   "why": "no search profile applies: the default, which "
                                          "follows each query by similarity and keyword scores"}
            if self.note:
                out["note"] = self.note
            return out
        assert self.profile is not None
        return {"source": "profile", "digest": self.digest, "created_at": self.profile.created_at,
                "judgements": self.profile.tuning.get("judgements", {}),
                "fallback": self.profile.tuning.get("fallback")}

    def describe(self) -> dict[str, Any]:
        """JSON form (without the file's path: /v1/health answers without a key)."""
        out: dict[str, Any] = {"source": self.source, "served": self.config.describe(),
                               "served_by": self.served_by()}
        if self.details_config is not None:
            out["served_with_details"] = self.details_config.describe()
        if self.digest:
            out["digest"] = self.digest
        if self.profile is not None:
            out["created_at"] = self.profile.created_at
            out["tuned_with"] = {"model": self.profile.model, "strategy": self.profile.strategy}
            held_out = self.profile.tuning.get("held_out")
            if held_out:
                out["held_out"] = held_out
            slot = self.profile.with_details
            if slot is not None and slot.tuning.get("held_out"):
                out["held_out_with_details"] = slot.tuning["held_out"]
        if self.note:
            out["note"] = self.note
        if self.profile is not None and self.profile.zones:
            out["zones"] = {scorer: {"abstain": z.abstain, "normal": z.normal,
                                     "questions": z.questions, "created_at": z.created_at}
                            for scorer, z in self.profile.zones.items()}
        return out


def settings_config(settings: Settings) -> SearchConfig:
    """The served configuration the settings describe (no profile)."""
    fusion = Fusion(FusionMethod(settings.fusion), (), settings.rrf_k, settings.fusion_lift)
    return SearchConfig(mode=Mode(settings.search_mode),
                        fusion=fusion.with_weights(parse_weights(settings.fusion_weights)),
                        topic_score=TopicScore(settings.topic_score),
                        chain=settings.chain_flags())


def read_profile(path: Path) -> tuple[SearchProfile, str]:
    """Parse a profile file; returns it with the sha256 of its bytes."""
    data = path.read_bytes()
    try:
        profile = SearchProfile.model_validate(json.loads(data))
        profile.served.to_config()  # weights checked here
        if profile.with_details is not None:
            profile.with_details.served.to_config()
        for scorer, zones in profile.zones.items():
            zones.to_calibration(scorer)
        for scorer, waiting in profile.pending.items():
            waiting.zones.to_calibration(scorer)
        if profile.link_rule is not None:
            profile.link_rule.to_rule()
    except (json.JSONDecodeError, ValidationError, ValueError, TypeError) as exc:
        first = str(exc).splitlines()[0]
        raise ConfigurationError(f"search profile {path} is not valid: {first}") from exc
    return profile, hashlib.sha256(data).hexdigest()


def load_served(settings: Settings, model_name: str) -> ProfileState:
    """The configuration to serve: the profile when present and tuned for this model."""
    path = settings.profile_path()
    base = settings_config(settings)
    if not path.is_file():
        return ProfileState(config=base, source="settings", path=path,
                            note="no search profile: run `sidecar tune` to choose one")
    profile, digest = read_profile(path)
    if (profile.model, profile.strategy) != (model_name, settings.strategy):
        note = (f"profile tuned with model {profile.model!r} strategy {profile.strategy}, this "
                f"sidecar searches {model_name!r} strategy {settings.strategy}: not applied; "
                "run `sidecar tune` again")
        log.warning("search profile %s: %s", path, note)
        return ProfileState(config=base, source="settings", path=path, digest=digest,
                            note=note, profile=profile)
    if not profile.tuned:  # zone thresholds only (`sidecar calibrate`): the settings search
        return ProfileState(config=base, source="settings", path=path, digest=digest,
                            note="search profile holds zone thresholds only: the search is "
                                 "the settings'", profile=profile)
    details = profile.with_details.served.to_config() if profile.with_details else None
    return ProfileState(config=profile.served.to_config(), source="profile", path=path,
                        digest=digest, profile=profile, details_config=details)


def base_profile(path: Path, *, model: str, strategy: int, settings: Settings
                 ) -> SearchProfile:
    """The file's profile to update, when it was made with this model and strategy; else an
    untuned one that serves the settings' configuration (a bad file is replaced)."""
    if path.is_file():
        try:
            base, _ = read_profile(path)
        except ConfigurationError as exc:
            log.warning("%s; replacing it", exc)
        else:
            if (base.model, base.strategy) == (model, strategy):
                return base
    return SearchProfile(model=model, strategy=strategy,
                         served=ServedModel.of(settings_config(settings)),
                         tuning={"note": "not tuned: the settings' configuration"})


def updated_profile(path: Path, new: SearchProfile, *, details: bool,
                    settings: Settings) -> SearchProfile:
    """The profile to write after tuning one query shape: ``new``'s choice in that shape's
    slot, the file's other slot kept when it was tuned with the same model and strategy (else
    the settings' configuration serves the shape that was not tuned)."""
    slot = ProfileSlot(served=new.served, tuning=new.tuning)
    base = base_profile(path, model=new.model, strategy=new.strategy, settings=settings)
    return base.with_slot(slot, details=details).model_copy(
        update={"created_at": new.created_at})


def with_zones(path: Path, calibration: ZoneCalibration, *, model: str, strategy: int,
               settings: Settings) -> SearchProfile:
    """The profile to write after calibrating one scorer's zones: the file's profile (when it
    was made with the same model and strategy) with that scorer's thresholds replaced."""
    base = base_profile(path, model=model, strategy=strategy, settings=settings)
    zones = {**base.zones, calibration.scorer: ZoneCalibrationModel.of(calibration)}
    pending = {k: v for k, v in base.pending.items() if k != calibration.scorer}
    return base.model_copy(update={"zones": zones, "pending": pending})


def with_pending(path: Path, calibration: ZoneCalibration, problems: list[str], *, model: str,
                 strategy: int, settings: Settings) -> SearchProfile:
    """The profile to write after a calibration that moved past its bound: the served zones
    kept, the calibration recorded as pending with why."""
    base = base_profile(path, model=model, strategy=strategy, settings=settings)
    pending = {**base.pending, calibration.scorer: PendingZonesModel(
        zones=ZoneCalibrationModel.of(calibration), problems=problems)}
    return base.model_copy(update={"pending": pending})


def profile_pending(settings: Settings) -> dict[str, tuple[ZoneCalibration, list[str]]]:
    """The pending calibrations of the profile file, by scorer, with why they wait (read anew
    each time: ``sidecar calibrate`` writes them while the API runs)."""
    path = settings.profile_path()
    if not path.is_file():
        return {}
    try:
        profile, _ = read_profile(path)
    except ConfigurationError:
        return {}
    return {scorer: (p.zones.to_calibration(scorer), list(p.problems))
            for scorer, p in profile.pending.items()}


def profile_zones(settings: Settings) -> dict[str, ZoneCalibration]:
    """The calibrated zones of the profile file, by scorer (none without a valid file)."""
    path = settings.profile_path()
    if not path.is_file():
        return {}
    try:
        profile, _ = read_profile(path)
    except ConfigurationError as exc:
        log.warning("%s: no calibrated zones", exc)
        return {}
    return {scorer: z.to_calibration(scorer) for scorer, z in profile.zones.items()}


def with_link_rule(path: Path, rule: LinkRule, held_out: dict[str, Any], *, model: str,
                   strategy: int, settings: Settings) -> SearchProfile:
    """The profile to write after learning the linked post's rule (the rest kept when the
    file's profile was made with the same model and strategy)."""
    base = base_profile(path, model=model, strategy=strategy, settings=settings)
    link = LinkRuleModel(weights=rule.as_dict(), source=rule.source, held_out=held_out)
    return base.model_copy(update={"link_rule": link})
