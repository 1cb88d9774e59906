"""The configuration matrix: each configuration changes one factor of another one.

Every configuration maps onto the product's own knobs (``SearchOptions``: mode, topic score,
strategy, fusion, rerank chain flags, post chooser; the ``index_kind``,
``keyword_question_words`` and ``keyword_max_words`` settings) plus optional post-retrieval
stages (the cross-encoder rerank). ``parent`` names the configuration it differs from by exactly
one factor, ``factor`` says which; all are also compared with the named baseline.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from sidecar.core.chain import ChainFlags
from sidecar.core.fusion import Fusion, FusionMethod
from sidecar.core.postchoice import Chooser
from sidecar.core.searchconfig import SearchConfig
from sidecar.core.types import Mode, TopicScore
from sidecar.errors import InvalidInput
from sidecar.search.service import SearchOptions

DEFAULT_BASELINE = "semantic-best"


@dataclass(frozen=True)
class EvalConfig:
    """One retrieval configuration."""

    name: str
    description: str
    factor: str  # what changes relative to ``parent``
    parent: str | None = None
    mode: Mode = Mode.SEMANTIC
    topic_score: TopicScore = TopicScore.BEST
    strategy: int = 1
    fusion: Fusion = field(default_factory=Fusion)
    index_kind: Literal["halfvec", "binary"] = "halfvec"
    # SIDECAR_KEYWORD_QUESTION_WORDS and _MAX_WORDS for this configuration (None: the settings').
    keyword_question_words: int | None = None
    keyword_max_words: int | None = None
    stages: tuple[str, ...] = ()
    chain: ChainFlags | None = None  # the rerank chain (None: every stage off)
    chooser: Chooser | None = None  # the linked post's chooser (None: the settings')
    default: bool = True  # part of the matrix when no --config is given
    cost: str = ""  # a note when the configuration needs extra work (another embedding pass)

    def options(self) -> SearchOptions:
        """The product's search options for this configuration."""
        # Explicit flags: a SIDECAR_CHAIN_* set in the environment must not change a config.
        return SearchOptions(mode=self.mode, strategy=self.strategy,
                             topic_score=self.topic_score, fusion=self.fusion,
                             chain=self.chain or ChainFlags(), chooser=self.chooser)

    def settings_update(self) -> dict[str, Any]:
        """The settings this configuration sets (``Settings.model_copy(update=...)``)."""
        update: dict[str, Any] = {"index_kind": self.index_kind,
                                  "keyword_question_words": self.keyword_question_words,
                                  "keyword_max_words": self.keyword_max_words}
        return {name: value for name, value in update.items() if value is not None}

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        data = asdict(self)
        data["mode"] = self.mode.value
        data["topic_score"] = self.topic_score.value
        data["stages"] = list(self.stages)
        data["fusion"] = self.fusion.describe()
        data["chain"] = (self.chain or ChainFlags()).as_dict()
        data["chooser"] = self.chooser.value if self.chooser else None
        return data


def _c(name: str, description: str, factor: str, parent: str | None, **kw: Any) -> EvalConfig:
    return EvalConfig(name=name, description=description, factor=factor, parent=parent, **kw)


_OPERATORS = "question: operators at any length, every word (KEYWORD_QUESTION/MAX_WORDS=0)"

CATALOGUE: tuple[EvalConfig, ...] = (
    _c("semantic-best", "bi-encoder only, one vector per post, topic = its best post",
       "baseline (the reference point's setup)", None),
    _c("keyword-best", "keyword leg only (full text, BM25 idf weights), topic = best post",
       "legs: keyword instead of semantic", "semantic-best", mode=Mode.KEYWORD),
    _c("hybrid-best", "semantic + keyword legs fused by RRF (k=60), topic = best post",
       "legs: semantic + keyword (RRF)", "semantic-best", mode=Mode.HYBRID),
    _c("hybrid-wrrf", "hybrid RRF (k=60) weighted 0.7 semantic / 0.3 keyword",
       "fusion: weighted RRF (semantic 0.7, keyword 0.3)", "hybrid-best", mode=Mode.HYBRID,
       fusion=Fusion().with_weights({"semantic": 0.7, "keyword": 0.3})),
    _c("hybrid-lift", "hybrid: cosine + 0.02 x BM25 / best BM25 (the served default since "
       "2026-12)", "fusion: keyword lift (0.02) instead of RRF", "hybrid-best", mode=Mode.HYBRID,
       fusion=Fusion(FusionMethod.LIFT, lift=0.02)),
    _c("hybrid-zscore", "hybrid, legs' scores standardised per query and summed (equal weights)",
       "fusion: z-score score fusion instead of RRF", "hybrid-best", mode=Mode.HYBRID,
       fusion=Fusion(FusionMethod.ZSCORE)),
    _c("hybrid-minmax", "hybrid, legs' scores scaled to [0, 1] per query and summed (equal "
       "weights)", "fusion: min-max score fusion instead of RRF", "hybrid-best",
       mode=Mode.HYBRID, fusion=Fusion(FusionMethod.MINMAX)),
    _c("semantic-mean2", "bi-encoder only, topic = mean of its best two posts",
       "topic score: mean of best two", "semantic-best", topic_score=TopicScore.MEAN2),
    _c("hybrid-mean2", "hybrid RRF, topic = mean of its best two posts",
       "topic score: mean of best two", "hybrid-best", mode=Mode.HYBRID,
       topic_score=TopicScore.MEAN2),
    _c("semantic-binary", "bi-encoder on the binary-quantized HNSW index + exact re-rank",
       "index: binary-quantized HNSW + exact re-rank", "semantic-best", index_kind="binary"),
    _c("semantic-best-rerank", "bi-encoder, then the cross-encoder reranks the top topics",
       "stage: cross-encoder rerank", "semantic-best", stages=("rerank",)),
    _c("hybrid-best-rerank", "hybrid RRF, then the cross-encoder reranks the top topics",
       "stage: cross-encoder rerank", "hybrid-best", mode=Mode.HYBRID, stages=("rerank",)),
    _c("hybrid-lift-rerank", "the served default (lift), then the cross-encoder reranks the "
       "top topics and picks each one's post, as /v1/retrieve does", "stage: cross-encoder "
       "rerank", "hybrid-lift", mode=Mode.HYBRID, fusion=Fusion(FusionMethod.LIFT, lift=0.02),
       stages=("rerank",)),
    # The deterministic rerank chain (sidecar/core/chain.py), one stage at a time.
    _c("hybrid-best-mmr", "hybrid RRF, then MMR diversity over topics (lambda 0.7)",
       "chain: MMR diversity (lambda 0.7)", "hybrid-best", mode=Mode.HYBRID,
       chain=ChainFlags(mmr=True)),
    _c("hybrid-best-boosts", "hybrid RRF, then bounded metadata boosts (accepted answer, likes, "
       "category priority, closed; 1.5 ranks at most)", "chain: metadata boosts", "hybrid-best",
       mode=Mode.HYBRID, chain=ChainFlags(boosts=True)),
    _c("hybrid-best-knee", "hybrid RRF; the evidence of /v1/retrieve cut at the knee of the "
       "bi-encoder cosines", "chain: knee cut-off of the evidence", "hybrid-best",
       mode=Mode.HYBRID, chain=ChainFlags(knee=True)),
    _c("hybrid-best-rerank-knee", "hybrid RRF, cross-encoder rerank; the evidence cut at the "
       "knee of the cross-encoder scores", "chain: knee cut-off of the evidence",
       "hybrid-best-rerank", mode=Mode.HYBRID, stages=("rerank",), chain=ChainFlags(knee=True)),
    # Not in the default matrix: they cost an extra embedding pass or explore a secondary knob.
    _c("semantic-s2", "bi-encoder on strategy 2 (title + OP/parent excerpts + post)",
       "embedded text: enriched (strategy 2)", "semantic-best", strategy=2, default=False,
       cost="embeds every post a second time (strategy 2)"),
    _c("hybrid-k20", "hybrid RRF with k=20 (rank 1 weighs more)",
       "RRF k: 20 instead of 60", "hybrid-best", mode=Mode.HYBRID, fusion=Fusion(rrf_k=20),
       default=False),
    # The keyword leg's reading of a question before 2026-12: operators at any length, every
    # word searched (SIDECAR_KEYWORD_QUESTION_WORDS=0, SIDECAR_KEYWORD_MAX_WORDS=0).
    _c("keyword-operators", "keyword leg; quotes, or and -word are operators at any length, "
       "every word searched", _OPERATORS, "keyword-best", mode=Mode.KEYWORD,
       keyword_question_words=0, keyword_max_words=0, default=False),
    _c("hybrid-operators", "hybrid RRF; quotes, or and -word are operators at any length, "
       "every word searched", _OPERATORS, "hybrid-best", mode=Mode.HYBRID,
       keyword_question_words=0, keyword_max_words=0, default=False),
    _c("hybrid-best-mmr50", "hybrid RRF, then MMR with lambda 0.5 (more diversity)",
       "MMR lambda: 0.5 instead of 0.7", "hybrid-best-mmr", mode=Mode.HYBRID,
       chain=ChainFlags(mmr=True, mmr_lambda=0.5), default=False),
    _c("hybrid-best-mmr85", "hybrid RRF, then MMR with lambda 0.85 (less diversity)",
       "MMR lambda: 0.85 instead of 0.7", "hybrid-best-mmr", mode=Mode.HYBRID,
       chain=ChainFlags(mmr=True, mmr_lambda=0.85), default=False),
    _c("hybrid-best-mmr-residual", "hybrid RRF, then MMR whose redundancy ignores the query "
       "direction", "MMR redundancy: after removing the query direction", "hybrid-best-mmr",
       mode=Mode.HYBRID, chain=ChainFlags(mmr=True, mmr_query_residual=True), default=False),
    _c("hybrid-best-recency", "hybrid RRF, then boosts with recency only (half-life 1 year)",
       "chain: recency boost (half-life 365 days)", "hybrid-best", mode=Mode.HYBRID,
       chain=ChainFlags(boosts=True, boost_accepted=0, boost_likes=0, boost_category=0,
                        boost_closed=0, boost_recency=1.0), default=False),
)

BY_NAME: dict[str, EvalConfig] = {c.name: c for c in CATALOGUE}

# The configuration `POST /v1/search` runs with the current settings and search profile; it is
# known only once the evaluation's resources are up, and is compared with every single leg.
SERVED = "served"


def served(config: SearchConfig, source: str) -> EvalConfig:
    """The served configuration as an evaluation configuration."""
    described = config.describe()
    return EvalConfig(
        name=SERVED, description=f"what POST /v1/search serves ({source}): {described}",
        factor=f"served configuration ({source})", parent=None, mode=config.mode,
        topic_score=config.topic_score, fusion=config.fusion, chain=config.chain)


def served_links(base: EvalConfig) -> list[EvalConfig]:
    """The served configuration with each other post chooser: same topics, other links."""
    return [replace(base, name=f"{SERVED}-link-{chooser.value}", chooser=chooser, parent=SERVED,
                    description=f"{base.description}; linked post: {chooser.value}",
                    factor=f"linked post: {chooser.value} instead of the served chooser")
            for chooser in (Chooser.FUSED, Chooser.SEMANTIC)]


@dataclass
class Matrix:
    """The configurations to run, and those left out with the reason."""

    configs: list[EvalConfig]
    baseline: str
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def strategies(self) -> set[int]:
        """Embedding strategies the configurations need."""
        return {c.strategy for c in self.configs}

    @property
    def index_kinds(self) -> set[str]:
        """Vector indexes the configurations need."""
        return {c.index_kind for c in self.configs}

    @property
    def stages(self) -> set[str]:
        """Post-retrieval stages the configurations need."""
        return {s for c in self.configs for s in c.stages}


def select(
    names: Sequence[str],
    baseline: str = DEFAULT_BASELINE,
    available_stages: Iterable[str] = (),
) -> Matrix:
    """The matrix for ``--config`` names (all default ones when empty), baseline first.

    A default configuration whose stage cannot run (no cross-encoder) is skipped with a reason;
    one asked for by name is an error, since the user expects it.
    """
    names = [n for n in names if n != SERVED]  # added by the caller, once it is known
    unknown = [n for n in [*names, baseline] if n not in BY_NAME]
    if unknown:
        raise InvalidInput(
            f"unknown configuration(s) {', '.join(sorted(set(unknown)))}; "
            f"known: {', '.join(BY_NAME)}"
        )
    available = set(available_stages)
    explicit = bool(names)
    chosen = [BY_NAME[n] for n in dict.fromkeys(names)] if explicit else [
        c for c in CATALOGUE if c.default]
    matrix = Matrix(configs=[], baseline=baseline)
    for config in chosen:
        missing = [s for s in config.stages if s not in available]
        if missing:
            reason = f"stage {', '.join(missing)} unavailable (no cross-encoder configured)"
            if explicit:
                raise InvalidInput(f"configuration {config.name}: {reason}; set "
                                   "SIDECAR_RERANK_MODEL_PATH (or SIDECAR_RERANK_MODEL)")
            matrix.skipped[config.name] = reason
            continue
        matrix.configs.append(config)
    base = BY_NAME[baseline]
    if any(s not in available for s in base.stages):
        raise InvalidInput(f"the baseline {baseline} needs a stage that cannot run here")
    matrix.configs = [base] + [c for c in matrix.configs if c.name != baseline]
    return matrix
