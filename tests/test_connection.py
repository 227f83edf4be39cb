"""store.connection: Redis clients that ride out an outage for a while, then give up."""

from __future__ import annotations

import multiprocessing
import socket
import threading
import time

import pytest
import redis

from store import connection
from store.connection import PatientRetry, connect

pytest_plugins = ["distributed_support"]


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


class _SimulatedStop:
    """A STOPPING never set whose waits advance a simulated clock."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock

    def is_set(self) -> bool:
        return False

    def wait(self, seconds: float) -> bool:
        self.clock[0] += seconds
        return False


def test_an_outage_of_hours_never_overflows_the_backoff(monkeypatch):
    # a real outage of hours cannot run here: the clock is simulated, the failures are real
    clock = [0.0]
    monkeypatch.setattr(connection.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(connection, "STOPPING", _SimulatedStop(clock))
    failures = []

    def fail():
        raise redis.ConnectionError("down")

    retry = PatientRetry(patience=4 * 3600.0)
    with pytest.raises(redis.ConnectionError):
        retry.call_with_retry(fail, lambda error: failures.append(error))
    assert len(failures) > 1024 and clock[0] >= 4 * 3600.0  # waits stay at the 2 s cap


@pytest.fixture
def stopping(monkeypatch):
    """`connection.STOPPING` for one test (a fresh event, cleared after)."""
    monkeypatch.setattr(connection, "STOPPING", threading.Event())
    return connection.STOPPING


def test_a_stopping_worker_stops_waiting_for_redis(stopping):
    client = connect(f"redis://127.0.0.1:{_free_port()}/0", patience=60.0)
    started = time.monotonic()
    threading.Timer(0.5, stopping.set).start()  # a stop while the client waits
    with pytest.raises(redis.ConnectionError):
        client.ping()
    assert time.monotonic() - started < 10.0  # not the minute of patience
    started = time.monotonic()
    with pytest.raises(redis.ConnectionError):  # once stopping, a failed call raises at once
        client.ping()
    assert time.monotonic() - started < 2.0


def test_a_stopping_worker_still_reconnects_a_connection_redis_closed(stopping, redis_server):
    # a warm shutdown lets the chunk under way finish: a pooled connection that Redis closed
    # while idle fails once, and the call goes on over a new one
    client = connect(redis_server.url, patience=60.0)
    client.set("tq:test:stopping", "1")
    redis_server.client().client_kill_filter(_type="normal", skipme=True)
    stopping.set()
    assert client.get("tq:test:stopping") == "1"


def _exits_when_stopping() -> None:
    raise SystemExit(0 if connection.STOPPING.wait(30.0) else 1)


def _shared_with_a_child(monkeypatch, target) -> multiprocessing.Process:
    """`connection.STOPPING` shared as a prefork worker shares it (restored after the test),
    and a forked child running `target`, started a moment ago."""
    monkeypatch.setattr(connection, "STOPPING", connection.StopFlag())  # made before the fork
    child = multiprocessing.get_context("fork").Process(target=target)
    child.start()
    time.sleep(0.3)
    return child


def test_a_prefork_workers_children_see_it_stop(monkeypatch):
    child = _shared_with_a_child(monkeypatch, _exits_when_stopping)
    connection.STOPPING.set()  # in the parent, as worker_shutting_down does
    child.join(timeout=10.0)
    assert child.exitcode == 0


def _waits_to_stop() -> None:
    connection.STOPPING.wait(30.0)


def test_a_stop_is_not_held_up_by_a_child_killed_while_waiting(monkeypatch):
    # a prefork child killed (time limit, OOM) while it waits on STOPPING: the parent's set,
    # made in Celery's signal handler, must still return at once
    child = _shared_with_a_child(monkeypatch, _waits_to_stop)
    child.kill()
    child.join(timeout=10.0)
    setter = threading.Thread(target=connection.STOPPING.set, daemon=True)
    setter.start()
    setter.join(timeout=5.0)
    assert not setter.is_alive() and connection.STOPPING.is_set()
