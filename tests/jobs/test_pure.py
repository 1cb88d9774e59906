"""The pure parts of the jobs: deadlines, failure classification, retry policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import httpx
import pytest

from jobs.errors import Failure, classify, describe
from jobs.queues import retry_intervals, retry_policy
from jobs.runs import parse_until
from models.errors import ModelInputError, RemoteInputError, RemoteModelError
from sidecar.config.settings import Settings
from sidecar.errors import ConfigurationError, InvalidInput

PARIS_WINTER = timezone(timedelta(hours=1))


@pytest.mark.parametrize(("now", "until", "expected"), [
    (datetime(2026, 1, 10, 23, 0, tzinfo=PARIS_WINTER), "06:30",
     datetime(2026, 1, 11, 6, 30, tzinfo=PARIS_WINTER)),  # tomorrow morning
    (datetime(2026, 1, 10, 1, 0, tzinfo=PARIS_WINTER), "06:30",
     datetime(2026, 1, 10, 6, 30, tzinfo=PARIS_WINTER)),  # later tonight
    (datetime(2026, 1, 10, 6, 30, tzinfo=PARIS_WINTER), "6:30",
     datetime(2026, 1, 11, 6, 30, tzinfo=PARIS_WINTER)),  # now is already too late
    (datetime(2026, 12, 31, 23, 59, tzinfo=UTC), "00:00",
     datetime(2027, 1, 1, 0, 0, tzinfo=UTC)),
])
def test_until_is_the_next_local_time(now: datetime, until: str, expected: datetime) -> None:
    assert parse_until(until, now) == expected


@pytest.mark.parametrize("bad", ["25:00", "06:61", "6h30", "", "tonight", "06:30:00"])
def test_until_refuses_what_is_not_hh_mm(bad: str) -> None:
    with pytest.raises(InvalidInput):
        parse_until(bad, datetime(2026, 1, 10, tzinfo=UTC))


@pytest.mark.parametrize(("exc", "expected"), [
    (RemoteModelError("http://h", "bad key", status=401), Failure.TERMINAL),
    (RemoteModelError("http://h", "forbidden", status=403), Failure.TERMINAL),
    (RemoteModelError("http://h", "no such route", status=404), Failure.TERMINAL),
    (RemoteModelError("http://h", "busy", status=429), Failure.TRANSIENT),
    (RemoteModelError("http://h", "oops", status=502), Failure.TRANSIENT),
    (RemoteModelError("http://h", "connection refused"), Failure.TRANSIENT),
    (RemoteInputError("http://h", "too long", status=413), Failure.OTHER),
    (ModelInputError("empty text"), Failure.OTHER),
    (httpx.ConnectError("refused"), Failure.TRANSIENT),
    (TimeoutError(), Failure.TRANSIENT),
    (RuntimeError("a bug"), Failure.OTHER),
])
def test_provider_failures_are_classified(exc: BaseException, expected: Failure) -> None:
    assert classify(exc) is expected


def test_describe_is_one_line_with_the_status() -> None:
    text = describe(RemoteModelError("http://h", "bad key\nmore", status=401))
    assert text.startswith("RemoteModelError (HTTP 401): ") and "\n" not in text
    assert describe(RuntimeError()) == "RuntimeError"


def test_retry_policy_follows_the_settings() -> None:
    settings = Settings(job_retries=3, job_retry_intervals="10, 60,600")
    policy = retry_policy(settings)
    assert policy is not None and policy.max == 3 and policy.intervals == [10, 60, 600]
    assert retry_policy(Settings(job_retries=0)) is None
    assert retry_intervals(Settings(job_retry_intervals="")) == [0]
    for bad in ("ten", "5,-1"):
        with pytest.raises(ConfigurationError):
            retry_intervals(Settings(job_retry_intervals=bad))
