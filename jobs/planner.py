"""Planning a run: which posts, in which order, in which batches, within the budget.

Planning first removes the vectors of every post that is no longer public
(:func:`sweep_not_public`, in batches of ``NOT_PUBLIC_BATCH`` posts, each its own transaction):
reads filter them out anyway, but they must not stay at rest, whatever the forum's events did (a
webhook lost, or read before the forum's commit).

Candidates come phase by phase (no vector, older version, drift), newest topics first. Drift
candidates are only *maybe* changed (their post, topic or category was touched since the last
check), so the planner sweeps them: it builds their text, compares its digest with the stored
one, and plans only the changed ones; the unchanged are marked checked, in the transaction that
saves the plan, and will not be selected again until touched again. The budget therefore counts
posts that really need the model.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from jobs import backoff
from sidecar.db import Database
from sidecar.db.backfill_runs import Run, RunStatus, get_run, save_plan
from sidecar.db.embeddings import delete_not_public_after
from sidecar.db.stale import PHASES, Candidate, Phase, mark_checked
from sidecar.ingest.indexing import Indexer
from sidecar.keyword.changes import catch_up
from sidecar.runtime.resources import Resources

log = logging.getLogger(__name__)

SWEEP_CHUNK = 256  # drift candidates compared per read
NOT_PUBLIC_BATCH = 2000  # posts with vectors checked per statement by the removal sweep


@dataclass
class Plan:
    """What planning decided."""

    batches: list[tuple[str, list[int]]] = field(default_factory=list)
    phases: dict[str, int] = field(default_factory=dict)
    swept_unchanged: list[int] = field(default_factory=list)
    # (post ids, when their text was read): how the sweep's unchanged posts are marked checked
    checks: list[tuple[list[int], datetime]] = field(default_factory=list)
    not_planned: int = 0

    @property
    def posts(self) -> int:
        """Posts taken into batches."""
        return sum(len(ids) for _, ids in self.batches)


def build_plan(indexer: Indexer, candidates: list[Candidate], *, batch_size: int,
               budget: int | None) -> Plan:
    """Cut the ordered candidates into batches, sweeping drift ones, up to ``budget`` posts.

    A batch never mixes phases, so a run's record says which kind of work each batch was.
    """
    plan = Plan()
    taken: list[tuple[Phase, int]] = []
    limit = budget if budget is not None else len(candidates)
    for phase in PHASES:
        mine = [c for c in candidates if c.phase == phase]
        plan.phases[phase.value] = len(mine)
        if phase != Phase.DRIFT:
            room = max(0, limit - len(taken))
            taken += [(phase, c.post_id) for c in mine[:room]]
            plan.not_planned += max(0, len(mine) - room)
            continue
        pos = 0
        while pos < len(mine):
            room = limit - len(taken)
            if room <= 0:
                # Not compared yet: they stay candidates for the next run.
                plan.not_planned += len(mine) - pos
                break
            chunk = mine[pos:pos + SWEEP_CHUNK]
            pos += len(chunk)
            prepared = indexer.prepare([c.post_id for c in chunk])
            changed = {prepared.sources[j].post_id for j in prepared.changed()}
            unchanged = [s.post_id for s in prepared.sources if s.post_id not in changed]
            plan.swept_unchanged += unchanged
            plan.checks.append((unchanged, prepared.checked_at))
            # Keep the candidates' order (newest topics first) among the changed ones.
            ordered = [c.post_id for c in chunk if c.post_id in changed]
            taken += [(Phase.DRIFT, pid) for pid in ordered[:room]]
            plan.not_planned += max(0, len(ordered) - room)
    batch: list[int] = []
    current: Phase | None = None
    for phase, pid in taken:
        if batch and (phase != current or len(batch) >= batch_size):
            plan.batches.append((current or phase, batch))
            batch = []
        current = phase
        batch.append(pid)
    if batch:
        plan.batches.append((current or Phase.MISSING, batch))
    return plan


def sweep_not_public(db: Database) -> int:
    """Remove the vectors (every model of the sidecar) of posts no longer public, in batches of
    ``NOT_PUBLIC_BATCH`` posts by id, each committed alone; returns how many went."""
    removed, after = 0, 0
    while True:
        with db.connection() as conn:
            gone, last = delete_not_public_after(conn, after, NOT_PUBLIC_BATCH)
        removed += gone
        if last is None:
            return removed
        after = last


def plan_run(res: Resources, run_id: int) -> Run:
    """Plan a run in ``planning`` state and save its batches; other states are left alone."""
    db = res.db
    with db.connection() as conn:
        run = get_run(conn, run_id)
    if run.status != RunStatus.PLANNING:
        return run
    backoff.wait_until_quiet(res, run_id)  # planning scans the forum: not while it is busy
    # The keyword indexes' drift sweep: what changed without an event goes to their change log.
    catch_up(db, keep_days=res.settings.keyword_log_days)
    removed = sweep_not_public(db)
    model = res.model_by_id(run.model_id)
    indexer = res.indexer(model, run.strategy_id)
    candidates = indexer.candidates(min_chars=res.settings.min_post_chars)
    plan = build_plan(indexer, candidates, batch_size=run.batch_size, budget=run.budget)
    with db.connection() as conn:
        for ids, read_at in plan.checks:
            mark_checked(conn, model, run.strategy_id, ids, read_at)
        saved = save_plan(conn, run_id, plan.batches, phases=plan.phases,
                          swept_unchanged=len(plan.swept_unchanged),
                          not_planned=plan.not_planned, removed_not_public=removed)
    log.info("run #%d planned: %d posts in %d batches (%s; %d unchanged after sweep, %d left "
             "for later; %d vectors of posts no longer public removed)", run_id, plan.posts,
             len(plan.batches), plan.phases, len(plan.swept_unchanged), plan.not_planned,
             removed)
    return saved
