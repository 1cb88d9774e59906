"""`sidecar tune-links`: learn which post of a topic to link from the forum's own labels.

Labels: an evaluation dump's post judgements (a query, a relevant topic, its posts graded >= 1)
and the forum's accepted answers (the topic's question asked as a member would, its accepted
post; the ``accepted`` feature is then left out of the fit, or it would explain everything).
For each labelled (question, topic), every public post of the topic is read with its features
(``sidecar/db/post_features.py``); a logistic regression over the features says which posts
answer. Guarded as `sidecar tune` is: the learned rule and the fixed one are compared on
held-out labels (k folds), and the learned one is served only when it links a good post
significantly more often; otherwise the fixed rule stays.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from tqdm import tqdm

from sidecar.core.answerability import pseudo_question
from sidecar.core.postchoice import ANSWER_RULE, LinkRule, PostFeatures, choose
from sidecar.db.calibration_read import accepted_answers
from sidecar.db.post_features import PostFeatureReader
from sidecar.evaluation import metrics as m
from sidecar.evaluation.dataset import EvalDataset
from sidecar.runtime.resources import Resources
from sidecar.tuning.crossval import kfold

log = logging.getLogger(__name__)

# Features the fit reads (keyword scores need the keyword leg: its weight stays the fixed
# rule's, as does the accepted answer's, which no label but an accepted answer could teach).
LEARNED: tuple[str, ...] = ("similarity", "opening", "by_asker", "likes", "staff", "replied")
MIN_LABELS = 30


@dataclass(frozen=True)
class LinkLabel:
    """A question, a topic, and the posts of that topic that answer it."""

    question: str
    topic_id: int
    good: frozenset[int]
    source: str  # "qrels" or "accepted"


@dataclass
class Labelled:
    """A label with its topic's posts read."""

    label: LinkLabel
    posts: list[PostFeatures]


def dump_labels(dataset: EvalDataset) -> list[LinkLabel]:
    """(query, relevant topic, its posts graded >= 1) for each judged topic holding such a post;
    which post belongs to which topic is known once the posts are read (see ``read``)."""
    out = []
    for q in dataset.scored():
        good = frozenset(p for p, g in q.posts.items() if g >= 1)
        for topic, grade in q.topics.items():
            if grade >= 1 and good:
                out.append(LinkLabel(question=q.text, topic_id=topic, good=good, source="qrels"))
    return out


def forum_labels(res: Resources, n: int = 2000) -> list[LinkLabel]:
    """The forum's accepted answers as labels."""
    with res.db.connection() as conn:
        rows = accepted_answers(conn, n)
    limit = res.settings.max_query_chars
    return [LinkLabel(question=pseudo_question(op.title, op.text, limit), topic_id=op.topic_id,
                      good=frozenset(answers), source="accepted") for op, answers in rows]


def read(res: Resources, labels: Sequence[LinkLabel], *, progress: bool = True
         ) -> list[Labelled]:
    """Each label's topic posts with their features; labels whose topic holds none of its
    good posts (a judged post of another topic) are dropped."""
    reader = PostFeatureReader(res.search.chain.reader)
    out = []
    for label in tqdm(labels, desc="reading labelled topics", unit="topic", disable=not progress):
        vector = res.embedder.embed([label.question], kind="query")[0]
        with res.db.connection() as conn:
            rows = reader.posts(conn, [label.topic_id], model_id=res.model.id,
                                strategy_id=res.settings.strategy,
                                dimensions=res.model.dimensions, vector=vector,
                                per_topic=res.settings.link_posts_per_topic)
        posts = [PostFeatures(post_id=r.post_id, post_number=r.post_number,
                              similarity=r.similarity, accepted=r.accepted and
                              label.source != "accepted", by_asker=r.by_asker, likes=r.likes,
                              staff=r.staff, replied=r.replies)
                 for r in rows.get(label.topic_id, [])]
        if any(p.post_id in label.good for p in posts):
            out.append(Labelled(label=label, posts=posts))
    return out


def fit(items: Sequence[Labelled], source: str) -> LinkRule:
    """A rule whose learned weights rank the posts of each topic like the fitted model."""
    x = np.array([[p.values()[k] for k in LEARNED] for it in items for p in it.posts])
    y = np.array([int(p.post_id in it.label.good) for it in items for p in it.posts])
    scaler = StandardScaler().fit(x)
    model = LogisticRegression(max_iter=2000).fit(scaler.transform(x), y)
    # Back to raw feature units (the rule scores raw values); the intercept ranks nothing.
    scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)
    weights = {k: float(c) for k, c in zip(LEARNED, model.coef_[0] / scale, strict=True)}
    unit = abs(weights["similarity"]) or 1.0
    fixed = ANSWER_RULE.as_dict()
    # The fixed rule's keyword and accepted weights, on the learned similarity's scale.
    weights["keyword"] = fixed["keyword"] * unit
    weights["accepted"] = fixed["accepted"] * unit
    return LinkRule.of({k: round(v, 6) for k, v in weights.items()}, source)


def hit(items: Sequence[Labelled], rule: LinkRule) -> list[float]:
    """Per label: 1 when the rule links one of the good posts."""
    return [float(choose(it.posts, rule=rule).order[0] in it.label.good) for it in items]


def tune_links(items: Sequence[Labelled], *, folds: int = 5, seed: int = 0,
               resamples: int = 10_000) -> tuple[LinkRule, dict[str, Any]]:
    """The rule to serve and the held-out report (ValueError under :data:`MIN_LABELS`)."""
    if len(items) < MIN_LABELS:
        raise ValueError(f"{len(items)} labelled topics; at least {MIN_LABELS} are needed "
                         "(post judgements of a dump, or accepted answers)")
    held = np.zeros(len(items))
    for part in kfold(len(items), folds, seed):
        train = [it for i, it in enumerate(items) if i not in set(part)]
        rule = fit(train, "fold")
        held[part] = hit([items[i] for i in part], rule)
    fixed = np.array(hit(items, ANSWER_RULE))
    vs = m.compare(held.tolist(), fixed.tolist(), resamples=resamples, seed=seed)
    sources = sorted({it.label.source for it in items})
    learned = fit(items, f"learned on {len(items)} labelled topics ({', '.join(sources)})")
    serve = vs.ci_low > 0
    report = {"labels": len(items), "sources": sources, "folds": folds,
              "held_out_hit": round(float(held.mean()), 4),
              "fixed_hit": round(float(fixed.mean()), 4),
              "difference": {"mean": round(vs.mean_diff, 4), "ci_low": round(vs.ci_low, 4),
                             "ci_high": round(vs.ci_high, 4), "wins": vs.wins,
                             "losses": vs.losses},
              "learned": learned.as_dict(),
              "served": "learned" if serve else "fixed",
              "why": ("the learned rule links a good post significantly more often on held-out "
                      "labels" if serve else "the learned rule is not significantly better on "
                      "held-out labels: the fixed rule stays")}
    return (learned if serve else ANSWER_RULE), report
