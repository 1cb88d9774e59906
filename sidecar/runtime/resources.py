"""Heavy resources (database pool, Redis, models): one object per process, started explicitly.

One :class:`Resources` object per process, named ``res`` wherever it is used: the API attaches
it to the app once (``sidecar.api.context``), ``sidecar worker`` installs it for its jobs
(``jobs.context``), and each CLI command starts its own. :func:`start_resources` says what it
holds: the models loaded (the API, the worker, ``sidecar search``) or not (commands that only
enqueue or watch jobs: a model there would cost seconds and memory that the worker and the API
already hold). Services built on the resources once per process, on first use (the retrieval
pipeline, the sanitizer, moderation, other models' embedders), are typed accessors here, guarded
by one lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import redis

from models.protocols import Embedder, Reranker
from sidecar.answer.answer_service import AnswerService
from sidecar.answer.llm import AnswerLLM
from sidecar.answer.llm_servers import answer_llm_from_settings
from sidecar.answer.pipeline import RetrievalPipeline
from sidecar.answer.sanitize_service import SanitizeService
from sidecar.config.settings import Settings
from sidecar.core.rerank_score import Residual
from sidecar.db import Database
from sidecar.db.embeddings import RegisteredModel, registered_model
from sidecar.db.migrate import check_current, parse_version, pgvector_version, upgrade
from sidecar.errors import ConfigurationError, LLMNotConfigured
from sidecar.ingest.indexing import Indexer
from sidecar.moderation.auth import ModeratorAuth
from sidecar.moderation.service import ModerationService
from sidecar.runtime.dbsession import Purpose, pool_size, session_limits
from sidecar.runtime.model_loading import (
    load_embedder,
    load_prepared_embedder,
    load_reranker,
    register_embedder,
    residual_of,
    resolve_model,
)
from sidecar.runtime.served_model import ServedChoice, served_choice
from sidecar.runtime.services import ServiceUrls, resolve_services
from sidecar.search.profile import ProfileState, load_served
from sidecar.search.service import SearchService

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class LoadedModels:
    """What resources started with their models hold: the models and the search built on them."""

    embedder: Embedder
    search: SearchService
    profile: ProfileState
    reranker: Reranker | None = None
    reranker_error: str | None = None  # why the configured cross-encoder is not loaded
    residual: Residual | None = None  # the cosine a forum-trained reranker corrects


class _Once(Generic[T]):
    """A value built on first use, once, under its owner's lock."""

    def __init__(self) -> None:
        self.value: T | None = None

    def get(self, lock: threading.RLock, build: Callable[[], T]) -> T:
        value = self.value
        if value is None:
            with lock:
                value = self.value
                if value is None:
                    value = self.value = build()
        return value


@dataclass
class Resources:
    """Everything a request handler, a job or a CLI command needs, started once per process.

    ``urls`` is configuration (where the database and Redis are, and whether they are the
    embedded ones), kept beside the clients built from it. The model parts (``embedder``,
    ``search``, ``profile``, ``reranker``) exist when the resources were started with their
    models; asking for them otherwise is a :class:`ConfigurationError`. ``dataclasses.replace``
    gives a copy whose services are built afresh (tests vary settings that way).
    """

    settings: Settings
    urls: ServiceUrls
    db: Database
    redis: redis.Redis
    model: RegisteredModel  # the serving embedding model, as registered
    pgvector: str
    loaded: LoadedModels | None = None
    owned_models: tuple[Any, ...] = ()  # loaded by start_resources, so closed by close()
    # Which embedding model serves and why: the configured one, or the forum-tuned one that
    # `sidecar embedder promote` chose (already in ``settings``).
    served: ServedChoice | None = None
    _lock: threading.RLock = field(init=False, repr=False, default_factory=threading.RLock)
    _retrieval: _Once[RetrievalPipeline] = field(init=False, repr=False, default_factory=_Once)
    _sanitizer: _Once[SanitizeService] = field(init=False, repr=False, default_factory=_Once)
    _answerer: _Once[AnswerService] = field(init=False, repr=False, default_factory=_Once)
    _answer_llm: _Once[AnswerLLM] = field(init=False, repr=False, default_factory=_Once)
    _moderation: _Once[ModerationService] = field(init=False, repr=False, default_factory=_Once)
    _moderator_auth: _Once[ModeratorAuth] = field(init=False, repr=False, default_factory=_Once)
    _embedders: dict[str, Embedder] = field(init=False, repr=False, default_factory=dict)

    # -- the models ---------------------------------------------------------------------------
    def loaded_models(self) -> LoadedModels:
        """The loaded models; resources started without them refuse."""
        if self.loaded is None:
            raise ConfigurationError("these resources were started without models "
                                     "(start_resources(..., load_models=False))")
        return self.loaded

    @property
    def embedder(self) -> Embedder:
        """The serving model's embedder."""
        return self.loaded_models().embedder

    @property
    def search(self) -> SearchService:
        """The search pipeline (semantic and keyword legs, fusion, rerank chain)."""
        return self.loaded_models().search

    @property
    def profile(self) -> ProfileState:
        """The served search configuration (the settings, or the profile of ``sidecar tune``)."""
        return self.loaded_models().profile

    @property
    def reranker(self) -> Reranker | None:
        """The cross-encoder, if one is configured and loaded."""
        return self.loaded_models().reranker

    @property
    def reranker_error(self) -> str | None:
        """Why the configured cross-encoder is not loaded, if it is not."""
        return self.loaded_models().reranker_error

    @property
    def reranker_residual(self) -> Residual | None:
        """The cosine the served reranker corrects (a forum-trained one), else None."""
        return self.loaded_models().residual

    def conninfo(self, purpose: Purpose) -> str:
        """The database's connection string with a ``purpose``'s name and limits (for the
        connections made outside the pool: index builds, migrations, imports)."""
        return session_limits(self.settings, purpose).conninfo(self.urls.database_url)

    def model_by_id(self, model_id: int) -> RegisteredModel:
        """A registered model by id (the serving model without a query)."""
        if model_id == self.model.id:
            return self.model
        with self.db.connection() as conn:
            return registered_model(conn, model_id)

    def embedder_for(self, model: RegisteredModel) -> Embedder:
        """The embedder that produced ``model``'s vectors: the serving one, or its prepared dir.

        A model other than the serving one is loaded the first time a job needs it, and kept.
        """
        if model.name == self.model.name:
            return self.embedder
        # While a tuned model serves, the configured one keeps its vectors fresh (rollback
        # serves them) from the folder the settings name for it.
        configured = self.served.configured if self.served is not None else None
        path = (configured.embed_dir() if configured is not None
                and model.name == configured.embed_model else None)
        with self._lock:
            if model.name not in self._embedders:
                self._embedders[model.name] = load_prepared_embedder(self.settings, model, path)
            return self._embedders[model.name]

    def indexer(self, model: RegisteredModel, strategy: int) -> Indexer:
        """An indexer for one (model, strategy) (cheap: it holds references only)."""
        return Indexer(self.db, self.embedder_for(model), model, strategy)

    # -- services built on first use ----------------------------------------------------------
    def retrieval(self) -> RetrievalPipeline:
        """The retrieval pipeline of ``/v1/retrieve`` (it holds the LLM client and its pool)."""
        return self._retrieval.get(self._lock, lambda: RetrievalPipeline(self))

    def sanitizer(self) -> SanitizeService:
        """The answer sanitizer of ``/v1/sanitize`` (and of ``/v1/answer``'s replies)."""
        def build() -> SanitizeService:
            embed = None
            if self.loaded is not None:  # an unanswered question keeps its query's vector
                embedder = self.loaded.embedder
                embed = lambda query: embedder.embed([query], kind="query")[0]  # noqa: E731
            return SanitizeService(self.db, self.settings, embed, self.model.name)
        return self._sanitizer.get(self._lock, build)

    @property
    def llm_configured(self) -> bool:
        """True when an LLM is configured to write answers (``/v1/answer`` serves)."""
        return self.settings.answer_llm_url() is not None

    def answerer(self) -> AnswerService:
        """The answer of ``/v1/answer``; :class:`LLMNotConfigured` (503) without an LLM."""
        if not self.llm_configured:
            raise LLMNotConfigured(
                "no LLM is configured to write answers: set OLLAMA_URL (an Ollama; the model "
                "is SIDECAR_OLLAMA_MODEL), or SIDECAR_ANSWER_API=openai with SIDECAR_ANSWER_URL "
                "(any OpenAI-compatible server). /v1/retrieve and /v1/sanitize work without one.",
                details={"settings": ["OLLAMA_URL", "SIDECAR_ANSWER_URL"]})

        def build() -> AnswerService:
            llm = self._answer_llm.get(self._lock, lambda: _required(
                answer_llm_from_settings(self.settings)))
            return AnswerService(pipeline=self.retrieval(), sanitizer=self.sanitizer(),
                                 db=self.db, redis=self.redis, settings=self.settings, llm=llm,
                                 model_name=self.model.name)
        return self._answerer.get(self._lock, build)

    def moderation(self) -> ModerationService:
        """The review of stored retrievals (the moderator pages and API)."""
        return self._moderation.get(self._lock,
                                    lambda: ModerationService(self.db, self.settings,
                                                              self.model.name))

    def moderator_auth(self) -> ModeratorAuth:
        """The moderator key check, its rate limit and the moderators' sessions (in Redis)."""
        return self._moderator_auth.get(self._lock, lambda: ModeratorAuth(
            self.settings.moderator_key, self.redis, self.settings.queue_prefix))

    def close(self) -> None:
        """Release connections (the embedded servers stop when their last user exits)."""
        if self.loaded is not None:
            self.loaded.search.keyword.close()
        if self._answer_llm.value is not None:
            self._answer_llm.value.close()
        self.db.close()
        self.redis.close()
        for model in self.owned_models:
            close = getattr(model, "close", None)  # remote models hold an HTTP pool
            if callable(close):
                close()


def _required(llm: AnswerLLM | None) -> AnswerLLM:
    if llm is None:  # llm_configured said there is one: the settings changed under us
        raise LLMNotConfigured("no LLM is configured to write answers")
    return llm


def start_resources(
    settings: Settings,
    *,
    load_models: bool = True,
    model_name: str | None = None,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    migrate: bool = True,
    purpose: Purpose = "command",
) -> Resources:
    """Start or join the services, migrate, and (``load_models``) load the models.

    With the models, the embedding model (``embedder``, else the configured one) is loaded and
    registered, the cross-encoder loaded (``reranker``, else the configured one, if any), and
    the search built. Without them, ``model_name`` (default: the configured model) is resolved
    from its manifest or the registry, and the pool is small. With ``migrate=False`` (the API's
    workers) the schema is only checked: migrations belong to ``sidecar db upgrade``, run once,
    not to every process that starts. ``purpose`` names the pool's connections and sets their
    limits and size (:mod:`sidecar.runtime.dbsession`): ``api``, ``worker``, ``backfill``...
    """
    if load_models and model_name is not None:
        raise ValueError("model_name is for resources without models: set embed_model instead")
    urls = resolve_services(settings)
    migrating = session_limits(settings, "migrate").conninfo(urls.database_url)
    info = upgrade(migrating) if migrate else None
    if not migrate:
        check_current(migrating)
    low, high = pool_size(settings, purpose, load_models=load_models)
    db = Database(urls.database_url, min_size=low, max_size=high,
                  limits=session_limits(settings, purpose))
    db.open()
    redis_client = redis.Redis.from_url(urls.redis_url)
    owned: list[Any] = []
    try:
        with db.connection() as conn:
            version = pgvector_version(conn)
        pgvector = version if version is not None else str(info["pgvector"] if info else "")
        # The promoted embedder replaces the configured model before any model loads (a given
        # embedder is the caller's choice).
        served = served_choice(settings, db) if embedder is None else None
        settings = served.settings if served is not None else settings
        if not load_models:
            return Resources(settings=settings, urls=urls, db=db, redis=redis_client,
                             model=resolve_model(db, settings, model_name), pgvector=pgvector,
                             served=served)
        loaded, model = _load_models(settings, db, pgvector, embedder, reranker, owned)
    except BaseException:
        for part in (*owned, db, redis_client):
            close = getattr(part, "close", None)
            if callable(close):
                close()
        raise
    return Resources(settings=settings, urls=urls, db=db, redis=redis_client, model=model,
                     pgvector=pgvector, loaded=loaded, owned_models=tuple(owned), served=served)


def _load_models(settings: Settings, db: Database, pgvector: str, embedder: Embedder | None,
                 reranker: Reranker | None, owned: list[Any]
                 ) -> tuple[LoadedModels, RegisteredModel]:
    """Load (or take) the models, register the embedder, build the search; ``owned`` grows."""
    if embedder is None:
        embedder = load_embedder(settings)
        owned.append(embedder)
    with db.connection() as conn:
        model = register_embedder(conn, embedder)
    profile = load_served(settings, model.name)
    reranker_error = None
    if reranker is None:
        reranker, reranker_error = load_reranker(settings, profile.promoted_reranker(settings))
        owned.append(reranker)
    residual = None
    if reranker is not None:
        try:
            residual = residual_of(reranker, model, settings.strategy)
        except ConfigurationError as exc:  # served without it would mis-score: not served
            log.error("%s", exc)
            reranker, reranker_error = None, str(exc)
    search = SearchService(db, embedder, model, settings,
                           iterative_scan=parse_version(pgvector) >= (0, 8, 0),
                           served=profile.config, served_details=profile.details_config,
                           served_by=profile.served_by(), link_rule=profile.link_rule())
    return LoadedModels(embedder=embedder, search=search, profile=profile, reranker=reranker,
                        reranker_error=reranker_error, residual=residual), model
