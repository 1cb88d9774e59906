"""The search profile of an embedder that starts serving (promoted, or back by a rollback).

The leaving model's profile is kept aside (``<profile>.<model>.json``); the arriving model's kept
one is put in place, else its zones are calibrated now (its similarity scale differs), asking
only the topics it never read (too few: the settings' thresholds until ``sidecar calibrate``).
A calibration that moves past its bound is treated as ``sidecar calibrate`` treats it: not
served, recorded as pending with why (the thresholds the arriving model had serve meanwhile:
the settings'), for a person to approve.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

from sidecar.answer.zone_calibration import calibrate_zones
from sidecar.config.settings import Settings
from sidecar.runtime.resources import start_resources
from sidecar.search.profile import update_profile, with_pending, with_zones
from sidecar.search.profile_io import profile_lock

log = logging.getLogger(__name__)


def profile_archive(settings: Settings, model: str) -> Path:
    """Where the search profile of a model that stopped serving is kept."""
    path = settings.profile_path()
    return path.with_name(f"{path.stem}.{model}{path.suffix}")


def swap_profiles(settings: Settings, leaving: str, arriving: str) -> bool:
    """Keep the leaving model's profile aside; put the arriving model's kept one in place,
    under the profile's lock (a calibration running meanwhile waits). True when the arriving
    model had one (else the caller calibrates its zones)."""
    path = settings.profile_path()
    with profile_lock(path):
        if path.is_file():
            shutil.copy2(path, profile_archive(settings, leaving))
        kept = profile_archive(settings, arriving)
        if not kept.is_file():
            path.unlink(missing_ok=True)  # tuned for the leaving model: it would not apply
            return False
        # Through a copy beside it, then one rename: a reader never sees half a file.
        staged = path.with_name(f".{path.name}.{arriving}.restore")
        shutil.copy2(kept, staged)
        os.replace(staged, path)
        return True


def arrive(settings: Settings, leaving: str, arriving: str, *, progress: bool
           ) -> dict[str, Any]:
    """The arriving model's search profile: the one kept for it, else zones calibrated now
    (served only within their bounds, as ``sidecar calibrate`` serves them)."""
    if swap_profiles(settings, leaving, arriving):
        return {"restored": str(profile_archive(settings, arriving))}
    res = start_resources(settings)  # reads the entry just written: the arriving model
    try:
        try:  # on the topics it never read (held out when it trained)
            run = calibrate_zones(res, progress=progress, basis="opening_posts")
        except ValueError as exc:  # too few: the settings' thresholds until `sidecar calibrate`
            log.warning("zones of %s not calibrated: %s", arriving, exc)
            return {"calibrated": None, "zones": f"the settings' thresholds ({exc})"}
        path = settings.profile_path()
        model, strategy, c = res.model.name, res.settings.strategy, run.calibration
        if run.problems:
            update_profile(path, lambda: with_pending(path, c, run.problems, model=model,
                                                      strategy=strategy, settings=res.settings))
            log.warning("zones of %s not served: the calibration moved past its bound (%s)",
                        arriving, "; ".join(run.problems))
            return {"calibrated": None, "pending": {
                        "scorer": c.scorer, "abstain": c.abstain, "normal": c.normal,
                        "problems": run.problems},
                    "zones": "the thresholds it had (the settings'): this calibration moved "
                             "past its bound and waits for a person (/moderation/calibration, "
                             "then `sidecar calibrate --approve`)"}
        update_profile(path, lambda: with_zones(path, c, model=model, strategy=strategy,
                                                settings=res.settings))
    finally:
        res.close()
    return {"calibrated": {"scorer": c.scorer, "abstain": c.abstain, "normal": c.normal}}
