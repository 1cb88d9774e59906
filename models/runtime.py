"""ONNX Runtime session factory with provider selection and a single, explicit CPU fallback."""

from __future__ import annotations

import functools
import logging
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.errors import ModelError, ModelLoadError

if TYPE_CHECKING:
    import onnxruntime as ort

log = logging.getLogger(__name__)

# The builds of ONNX Runtime on PyPI, by the extra of this project that installs each. All of
# them install the module `onnxruntime`: exactly one may be installed.
BUILDS: dict[str, str] = {"onnxruntime": "cpu", "onnxruntime-gpu": "gpu",
                          "onnxruntime-openvino": "openvino"}
NOT_INSTALLED = ("ONNX Runtime is not installed: `pip install '.[cpu]'` in the sidecar's checkout "
                 "(or '.[gpu]' for NVIDIA CUDA, '.[openvino]' for Intel), or run the models on a "
                 "model host (SIDECAR_EMBED_URL)")


def onnxruntime() -> Any:
    """The ``onnxruntime`` module, or a :class:`ModelError` that says which extra installs it."""
    try:
        import onnxruntime as module
    except ImportError as exc:
        raise ModelError(NOT_INSTALLED) from exc
    return module


@functools.cache
def runtime_report() -> dict[str, Any]:
    """Which ONNX Runtime build is installed and which providers it can run (read once).

    ``builds`` lists every installed distribution that provides the module: more than one means
    they overwrote each other's files (uninstall all, then install one extra).
    """
    try:
        module = onnxruntime()
    except ModelError as exc:
        return {"installed": False, "error": str(exc)}
    builds = sorted(set(metadata.packages_distributions().get("onnxruntime", [])))
    return {"installed": True, "version": module.__version__,
            "builds": [{"package": b, "extra": BUILDS.get(b.lower())} for b in builds],
            "available_providers": list(module.get_available_providers())}

PROVIDERS: dict[str, str] = {
    "cpu": "CPUExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "cuda": "CUDAExecutionProvider",
}
_SHORT_NAMES = {v: k for k, v in PROVIDERS.items()}

# OpenVINO is used for Intel integrated/discrete GPUs; CPU inference goes through ORT's own EP.
_DEFAULT_PROVIDER_OPTIONS: dict[str, dict[str, Any]] = {
    "openvino": {"device_type": "GPU"},
}


def session_options(intra_op_threads: int = 0, inter_op_threads: int = 0) -> ort.SessionOptions:
    """Session options with all graph optimisations; thread counts of 0 keep ORT's defaults."""
    if intra_op_threads < 0 or inter_op_threads < 0:
        raise ValueError("thread counts must be >= 0")
    ort = onnxruntime()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = intra_op_threads
    options.inter_op_num_threads = inter_op_threads
    return options


def active_provider(session: ort.InferenceSession) -> str:
    """Short name ("cpu", "cuda", "openvino") of the provider that runs most of the graph."""
    first = session.get_providers()[0]
    return _SHORT_NAMES.get(first, first)


def create_session(
    onnx_path: str | Path,
    provider: str = "cpu",
    intra_op_threads: int = 0,
    inter_op_threads: int = 0,
    provider_options: dict[str, Any] | None = None,
) -> ort.InferenceSession:
    """Create an inference session on ``provider``, falling back to CPU when it is unusable.

    A provider that is not compiled into the installed onnxruntime, or that fails to initialise
    (missing driver, no device), produces exactly one ``logging.warning`` and a CPU session; the
    provider really used is ``active_provider(session)``. Failures on CPU itself (missing or
    corrupt file) raise :class:`ModelLoadError` with the path and the reason.
    """
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r}; expected one of {sorted(PROVIDERS)}")
    path = Path(onnx_path)
    if not path.is_file():
        raise ModelLoadError(path, "ONNX file not found")
    try:
        ort = onnxruntime()
    except ModelError as exc:
        raise ModelLoadError(path, str(exc)) from None
    options = session_options(intra_op_threads, inter_op_threads)

    if provider != "cpu":
        wanted = PROVIDERS[provider]
        if wanted not in ort.get_available_providers():
            log.warning(
                "ONNX Runtime provider %r is not available in this onnxruntime build "
                "(available: %s); running %s on CPU",
                provider,
                ", ".join(ort.get_available_providers()),
                path.name,
            )
        else:
            opts = {**_DEFAULT_PROVIDER_OPTIONS.get(provider, {}), **(provider_options or {})}
            try:
                session = ort.InferenceSession(
                    str(path),
                    sess_options=options,
                    providers=[(wanted, opts), "CPUExecutionProvider"],
                )
            except Exception as exc:
                log.warning(
                    "ONNX Runtime provider %r failed to initialise (%s); running %s on CPU",
                    provider,
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                    path.name,
                )
            else:
                # ORT may silently drop a provider whose libraries fail to load.
                if session.get_providers()[0] == wanted:
                    return session
                log.warning(
                    "ONNX Runtime provider %r could not be initialised; running %s on CPU",
                    provider,
                    path.name,
                )
                return session
        options = session_options(intra_op_threads, inter_op_threads)

    try:
        return ort.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:
        raise ModelLoadError(path, f"ONNX Runtime cannot load the graph: {exc}") from exc
