"""What the operator's pages must keep saying (issue 37): read from the pages themselves.

The README stays short (the detail lives in docs/), and docs/deployment.md says what a
``login_required`` forum's "public" is, how the Docker setup trusts its proxy only, what
``allowed_internal_hosts`` opens, and that Prometheus scrapes with the key.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENT = ROOT / "docs" / "deployment.md"


def _section(path: Path, heading: str) -> str:
    """The text under a heading, down to the next heading of its level, on one line."""
    text = path.read_text()
    start = text.index(heading)
    level = heading.split(" ", 1)[0]
    end = re.search(rf"^{level} ", text[start + len(heading):], re.M)
    body = text[start:start + len(heading) + end.start()] if end else text[start:]
    return " ".join(body.split())


def test_the_readme_stays_under_250_lines() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) < 250, len(lines)


def test_a_login_required_forum_s_public_is_any_signed_in_member() -> None:
    section = _section(DEPLOYMENT, '## What "public" means on a `login_required` forum')
    assert "any signed-in member" in section
    for served in ("/v1/search", "/v1/retrieve", "related", "moderator"):
        assert served in section, served


def test_the_docker_setup_believes_forwarded_headers_from_its_proxy_only() -> None:
    section = _section(DEPLOYMENT, "## The standard Discourse install (Docker standalone)")
    assert "SIDECAR_TRUSTED_PROXIES=172.17.0.1" in section
    assert "SIDECAR_PROXY_HOPS=0" in section  # the forum alone: no header believed
    # What listing the sidecar in allowed_internal_hosts opens: the members' oneboxes.
    opened = section[section.index("What `allowed_internal_hosts` opens"):]
    assert "onebox" in opened and "/v1/health" in opened and "401" in opened


def test_prometheus_scrapes_with_the_key() -> None:
    section = _section(DEPLOYMENT, "## Watching it")
    assert "credentials_file" in section and "type: Bearer" in section
