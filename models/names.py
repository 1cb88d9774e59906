"""Names of the models a command writes: plain folder names inside a models folder.

A command that trains or exports a model (``sidecar train-reranker``, ``sidecar train-embedder``)
takes its name from the command line and writes ``<models folder>/<name>``. A name with a path
separator or ``..`` would put the model anywhere the process may write (and an export that
cleared its folder first could delete any of them), and a name already taken would replace a
model that may be the one served. So every such command goes through :func:`new_model_dir`: a
strict pattern (:data:`MODEL_NAME`), and a folder that is not there yet.
"""

from __future__ import annotations

import re
from pathlib import Path

from models.errors import ModelError

# Letters, digits, '.', '_' and '-', starting with a letter or digit (so neither '.', '..' nor
# an option-like '-x'), at most 100 characters; never two dots in a row.
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


class InvalidModelName(ModelError, ValueError):
    """A model name that is not a plain folder name (see :data:`MODEL_NAME`)."""


class ModelExists(ModelError, FileExistsError):
    """A new model's folder is already there: models are never overwritten."""


def check_model_name(name: str) -> str:
    """``name`` when it is a plain model name (:data:`MODEL_NAME`, no ``..``); raises
    :class:`InvalidModelName` otherwise."""
    if not MODEL_NAME.fullmatch(name) or ".." in name:
        raise InvalidModelName(
            f"not a plain model name: {name!r} (letters, digits, '.', '_' and '-', starting with "
            "a letter or digit, at most 100 characters, no '..': it names a folder inside the "
            "models folder)")
    return name


def new_model_dir(models_dir: Path, name: str) -> Path:
    """The folder a new model ``name`` goes to, inside ``models_dir``; nothing is created.

    Raises :class:`InvalidModelName` for a name that is not plain, and :class:`ModelExists`
    when anything (a model, a file, a link) already has that name: a run never replaces a
    model, served or not. Whoever writes it creates the folder with ``mkdir(exist_ok=False)``,
    so that two runs racing for one name cannot both write it.
    """
    out = models_dir / check_model_name(name)
    if out.exists() or out.is_symlink():
        raise ModelExists(f"a model named {name!r} is already in {models_dir}: models are never "
                          "overwritten; choose another name (or remove that folder yourself)")
    return out
