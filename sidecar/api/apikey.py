"""The API key of the embedded mode: generated once, kept owner-only under the state directory.

Kept apart from the heavy modules on purpose: `sidecar run`'s parent process imports it and must
never load ONNX Runtime (see `sidecar/cli/run.py`).
"""

from __future__ import annotations

import os
import secrets

from pydantic import SecretStr

from sidecar.config.settings import Settings


def ensure_api_key(settings: Settings) -> tuple[Settings, bool]:
    """In embedded mode without a key, reuse or generate one under the state directory.

    Returns the settings with the key and whether it was generated just now.
    """
    if settings.api_key is not None:
        return settings, False
    path = settings.state_dir / "api_key"
    created = False
    if path.is_file():
        key = path.read_text().strip()
    else:
        settings.state_dir.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(32)
        # Written owner-only before the secret goes in.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(key + "\n")
        created = True
    return settings.model_copy(update={"api_key": SecretStr(key)}), created
