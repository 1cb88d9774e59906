"""The import rules of `make lint`: function-level imports say why (scripts/check_imports.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

from tests.helpers import REPO as ROOT
from tests.helpers import load_script


def _checker() -> ModuleType:
    return load_script("check_imports")


def _flagged(tmp_path: Path, source: str) -> list[str]:
    path = tmp_path / "mod.py"
    path.write_text(source)
    return [line.split(": ", 1)[1] for line in _checker().unexplained(path)]


def test_an_unexplained_late_import_is_flagged(tmp_path: Path) -> None:
    assert _flagged(tmp_path, "def f():\n    import json\n    return json\n") == ["import json"]
    # A comment that gives no recognised reason is not enough.
    assert _flagged(tmp_path, "def f():\n    # avoids a circle\n    import json\n") \
        == ["import json"]


def test_a_reason_above_the_group_or_on_the_line_explains_it(tmp_path: Path) -> None:
    group = ("def f():\n    # Fork safety: loaded in the worker only.\n    import numpy\n\n"
             "    from onnx import helper\n    return numpy, helper\n")
    assert _flagged(tmp_path, group) == []
    assert _flagged(tmp_path, "def f():\n    import torch  # optional dependency\n") == []


def test_optional_imports_and_type_checking_blocks_need_no_comment(tmp_path: Path) -> None:
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import numpy\n"
              "def f():\n    try:\n        import matplotlib\n    except ImportError:\n"
              "        return None\n    return matplotlib\n")
    assert _flagged(tmp_path, source) == []


def test_a_module_comment_covers_every_command(tmp_path: Path) -> None:
    source = ("# Deferred imports (fork safety): commands import what they need.\n"
              "def a():\n    import json\n\ndef b():\n    import csv\n")
    assert _flagged(tmp_path, source) == []


def test_the_project_follows_the_rules() -> None:
    done = subprocess.run([sys.executable, "scripts/check_imports.py"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
