"""The worker's resources, loaded once per process and looked up by job functions.

``sidecar worker`` calls :func:`install` with started resources before it takes the first job.
A job run by a plain ``rq worker`` finds nothing installed and starts the resources itself, once
per process, from the environment's settings.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobs.env import open_env
from models import load_embedder
from models.protocols import Embedder
from sidecar.db.embeddings import RegisteredModel, registered_model
from sidecar.errors import ConfigurationError
from sidecar.indexing import Indexer
from sidecar.resources import Resources, start_resources
from sidecar.settings import Settings, load_settings

if TYPE_CHECKING:
    from jobs.env import Env

log = logging.getLogger(__name__)


@dataclass
class JobContext:
    """Resources plus the embedders of other registered models, loaded on first use."""

    resources: Resources
    embedders: dict[str, Embedder] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def settings(self) -> Settings:
        """The process's settings."""
        return self.resources.settings

    def model(self, model_id: int) -> RegisteredModel:
        """A registered model by id (the serving model without a query)."""
        if model_id == self.resources.model.id:
            return self.resources.model
        with self.resources.db.connection() as conn:
            return registered_model(conn, model_id)

    def embedder_for(self, model: RegisteredModel) -> Embedder:
        """The embedder that produced ``model``'s vectors: the preloaded one, or its prepared dir.

        A model other than the serving one is loaded from ``<state_dir>/models/<name>`` the first
        time a job needs it, and kept; its dimensions must match the registry.
        """
        if model.name == self.resources.model.name:
            return self.resources.embedder
        with self._lock:
            if model.name not in self.embedders:
                path = self.settings.models_dir / model.name
                if not (path / "manifest.json").is_file():
                    raise ConfigurationError(
                        f"model {model.name!r} is registered but not prepared in {path}: run "
                        f"`sidecar models prepare ... --out {path}` on the worker's machine"
                    )
                embedder = load_embedder(path, provider=self.settings.onnx_provider,
                                         threads=self.settings.onnx_threads)
                if embedder.dimensions != model.dimensions:
                    raise ConfigurationError(
                        f"{path} has {embedder.dimensions} dimensions but {model.name!r} is "
                        f"registered with {model.dimensions}"
                    )
                self.embedders[model.name] = embedder
            return self.embedders[model.name]

    def indexer(self, model: RegisteredModel, strategy: int) -> Indexer:
        """An indexer for one (model, strategy) (cheap: it holds references only)."""
        return Indexer(self.resources.db, self.embedder_for(model), model, strategy)


_CONTEXT: JobContext | None = None
_INSTALL_LOCK = threading.Lock()


def install(resources: Resources) -> JobContext:
    """Make ``resources`` the process's job context (``sidecar worker``, tests, benchmarks)."""
    global _CONTEXT
    with _INSTALL_LOCK:
        _CONTEXT = JobContext(resources)
        return _CONTEXT


def uninstall() -> None:
    """Forget the installed context (the caller closes the resources)."""
    global _CONTEXT
    with _INSTALL_LOCK:
        _CONTEXT = None


def current() -> JobContext:
    """The installed context, started from the environment on first use if none was installed."""
    global _CONTEXT
    with _INSTALL_LOCK:
        if _CONTEXT is None:
            log.info("no job context installed: starting resources from the environment")
            _CONTEXT = JobContext(start_resources(load_settings()))
        return _CONTEXT


_ENV: Any = None


def current_env() -> Env:
    """The installed resources, or else a model-free :class:`~jobs.env.LightEnv` (cached).

    For RQ failure callbacks: RQ may run them in any process that cleans its registries (a
    worker's maintenance, ``rq info``), where loading a model would be out of place.
    """
    global _ENV
    with _INSTALL_LOCK:
        if _CONTEXT is not None:
            return _CONTEXT.resources
        if _ENV is None:
            _ENV = open_env(load_settings(), migrate=False)
        env: Env = _ENV
        return env
