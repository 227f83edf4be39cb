"""store.connection: Redis clients that ride out an outage for a while, then give up."""

from __future__ import annotations

import socket

import pytest
import redis

from store import connection
from store.connection import PatientRetry, connect


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_redis_that_stays_down_is_given_up_on_after_the_patience():
    waited = []
    client = connect(f"redis://127.0.0.1:{_free_port()}/0", patience=0.3, on_wait=waited.append)
    with pytest.raises(redis.ConnectionError):
        client.ping()
    assert waited and all(isinstance(error, redis.ConnectionError) for error in waited)


def test_an_outage_of_hours_never_overflows_the_backoff(monkeypatch):
    # a real outage of hours cannot run here: the clock is simulated, the failures are real
    clock = [0.0]
    monkeypatch.setattr(connection.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(connection.time, "sleep", lambda seconds: clock.__setitem__(0, clock[0] + seconds))
    failures = []

    def fail():
        raise redis.ConnectionError("down")

    retry = PatientRetry(patience=4 * 3600.0)
    with pytest.raises(redis.ConnectionError):
        retry.call_with_retry(fail, lambda error: failures.append(error))
    assert len(failures) > 1024 and clock[0] >= 4 * 3600.0  # waits stay at the 2 s cap
