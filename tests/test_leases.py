"""store.leases on a real redis-server: runs, heartbeats, strikes and the sweeper."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis
from distributed_support import RedisServer, wait_for

from store.config import Settings
from store.jobstore import JobInfo, JobStore, NewJob
from store.keys import JOBS_KEY, RUNNING_KEY, JobKeys
from store.leases import BUSY, GONE, STARTED, LostRun, Sweeper, held
from store.queues import client, queue_length

pytest_plugins = ["distributed_support"]

ITEMS = [(0, "One."), (1, "Two.")]


@pytest.fixture
def store(redis_server):
    redis_server.client().flushdb()
    # Nobody consumes this queue: requeued chunks stay there to be counted.
    settings = Settings(redis_url=redis_server.url, queue="leases-test", lease_ttl=1.0)
    store = JobStore.from_settings(settings)
    store.create(
        NewJob(
            job_id="j",
            documents=1,
            segments=2,
            total=2,
            chunks=3,
            out="",
            origin="files",
        )
    )
    return store


def test_a_run_holds_its_chunk_until_it_ends(store):
    run = store.leases.start("j", 0, ITEMS, "host:1", "q")
    assert (run.state, run.attempt) == (STARTED, 1)
    assert store.leases.start("j", 0, ITEMS, "host:2", "q").state == BUSY  # a duplicate message
    store.leases.finish(run)
    assert not store.client.hexists(RUNNING_KEY, "j:0")
    assert not store.client.exists(JobKeys("j").lease(0))
    assert store.leases.start("j", 0, ITEMS, "host:2", "q").attempt == 1  # no strike: it ended
    assert store.client.hget(JobKeys("j").deliveries, "0") == "2"
    assert store.leases.start("gone", 0, ITEMS, "host:1", "q").state == GONE


def test_a_run_that_died_is_a_strike_but_a_retry_by_the_same_process_is_not(store):
    store.leases.start("j", 1, ITEMS, "host:1", "q")
    store.client.delete(JobKeys("j").lease(1))  # its lease expired: the worker is gone
    assert store.leases.start("j", 1, ITEMS, "host:2", "q").attempt == 2
    store.client.delete(JobKeys("j").lease(1))
    assert store.leases.start("j", 1, ITEMS, "host:2", "q").attempt == 2  # host:2 itself (a Redis outage)
    assert store.leases.strike("j", 1) == 2  # a run that raised


#: Records a start would fail on after writing the run's entry and lease (Redis keeps what a
#: script wrote before an error): every later delivery would then be skipped as a duplicate.
START_CORRUPTIONS = {
    "deliveries is not a hash": lambda client: client.set(JobKeys("j").deliveries, "x"),
    "a delivery count is not a number": lambda client: client.hset(JobKeys("j").deliveries, "0", "x"),
    "a strike count is not a number": lambda client: client.hset(JobKeys("j").strikes, "0", "x"),
}


@pytest.mark.parametrize("corrupt", START_CORRUPTIONS.values(), ids=START_CORRUPTIONS.keys())
def test_a_start_that_would_fail_part_way_writes_nothing(store, corrupt):
    corrupt(store.client)
    with pytest.raises(redis.ResponseError) as refused:
        store.leases.start("j", 0, ITEMS, "host:1", "q")
    assert not store.client.hexists(RUNNING_KEY, "j:0") and not store.client.exists(JobKeys("j").lease(0))
    assert "nothing written" in str(refused.value)


def test_a_run_entry_that_is_not_json_is_replaced_without_a_strike(store):
    for junk in ("garbage", "5", "null"):
        store.client.hset(RUNNING_KEY, "j:0", junk)
        run = store.leases.start("j", 0, ITEMS, "host:1", "q")
        assert (run.state, run.attempt) == (STARTED, 1)
        assert json.loads(store.client.hget(RUNNING_KEY, "j:0"))["token"] == run.token
        store.leases.finish(run)


def test_a_restarted_process_with_the_same_host_and_pid_is_another_worker():
    # a worker container restarted after a crash runs as pid 1 on the same host name again
    probe = (
        "import os; os.getpid = lambda: 1; from store.leases import current_worker; print(current_worker())"
    )
    names = {
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    }
    assert len(names) == 2 and all(name.startswith(f"{socket.gethostname()}:1:") for name in names)


def test_the_heartbeat_keeps_a_lease_alive_and_recreates_a_lost_one(store):
    run = store.leases.start("j", 2, ITEMS, "host:1", "q")
    with held(store.leases, run, interval=0.2):
        time.sleep(1.5)  # past the 1 s lease
        assert store.client.exists(JobKeys("j").lease(2))
        store.client.delete(JobKeys("j").lease(2))  # as a Redis restart after a long outage
        deadline = time.monotonic() + 10  # the next beats recreate it (polled, not guessed)
        while not store.client.exists(JobKeys("j").lease(2)):
            assert time.monotonic() < deadline, "the lost lease was never recreated"
            time.sleep(0.05)
    assert not store.client.hexists(RUNNING_KEY, "j:2")


def test_the_sweeper_requeues_a_lost_run_once_after_the_grace(store):
    store.leases.start("j", 0, ITEMS, "host:1", "leases-test")
    store.client.delete(JobKeys("j").lease(0))
    first, second = (
        Sweeper(store, grace=5.0),
        Sweeper(store, grace=5.0),
    )
    assert first.sweep(now=100.0) == [] and second.sweep(now=100.0) == []  # within the grace
    (lost,) = first.sweep(now=106.0)
    assert (lost.job_id, lost.chunk, lost.worker, lost.job_chunks) == ("j", 0, "host:1", 3)
    assert lost.queue == "leases-test"
    assert [tuple(item) for item in lost.items] == ITEMS
    assert second.sweep(now=106.0) == []  # claimed once among all sweepers
    assert queue_length(store.settings, "leases-test") == 1
    assert store.leases.start("j", 0, ITEMS, "host:2", "q").attempt == 2  # the loss is a strike


def test_a_lease_set_without_expiry_holds_its_chunk_one_lease_ttl_at_most(store):
    """Its run entry and its lease made the chunk look taken by a live run, for good: the
    sweeper never requeued it, and the stall watch never resent it."""
    store.leases.start("j", 0, ITEMS, "host:1", "leases-test")
    lease = JobKeys("j").lease(0)
    store.client.set(lease, "no run's token")  # tampered: no run ever frees it
    sweeper = Sweeper(store, grace=0.0)
    assert sweeper.sweep() == []  # leased, for now
    assert 0 < store.client.pttl(lease) <= 1000  # lease_ttl=1.0
    wait_for(lambda: not store.client.exists(lease), "the lease to expire", timeout=5)
    assert [(lost.job_id, lost.chunk) for lost in sweeper.sweep()] == [("j", 0)]


def test_a_run_that_wakes_after_its_chunk_was_requeued_holds_no_lease(store):
    run = store.leases.start("j", 0, ITEMS, "host:1", "leases-test")
    store.client.delete(JobKeys("j").lease(0))  # stopped (SIGSTOP) past its lease
    (lost,) = Sweeper(store, grace=0.0).sweep()
    assert not store.leases.renew(run)  # it woke up: the requeued copy is the chunk's run now
    assert not store.client.exists(JobKeys("j").lease(0))
    assert store.leases.start("j", 0, ITEMS, "host:2", "leases-test").state == STARTED


def test_a_requeued_chunk_lost_again_is_sent_again_by_the_stall_watch(store):
    writer = store.writer("j")
    writer.chunks(0, [ITEMS])
    writer.flush()
    store.leases.start("j", 0, ITEMS, "host:1", "leases-test")
    store.client.delete(JobKeys("j").lease(0))  # its worker was killed
    sweeper = Sweeper(store, grace=0.0)
    assert [lost.chunk for lost in sweeper.sweep(now=0.0)] == [0]
    with client.connection_for_write(store.settings.redis_url) as connection:
        connection.default_channel.queue_purge("leases-test")  # the requeued copy is lost: a Redis crash
    assert sweeper.stalls(now=0.0, after=30.0) == []
    assert sweeper.sweep(now=31.0) == [] and sweeper.stalls(now=31.0, after=30.0) == ["j"]
    assert queue_length(store.settings, "leases-test") == 1


def test_the_sweeper_forgets_runs_of_finished_and_cancelled_jobs(store):
    store.leases.start("j", 0, ITEMS, "host:1", "leases-test")
    store.leases.start("j", 1, ITEMS, "host:1", "leases-test")
    store.client.delete(JobKeys("j").lease(0), JobKeys("j").lease(1))
    sweeper = Sweeper(store, grace=0.0)
    assert sorted(lost.chunk for lost in sweeper.sweep()) == [0, 1]
    store.leases.start("j", 2, ITEMS, "host:1", "leases-test")
    store.client.delete(JobKeys("j").lease(2))  # lost, not claimed yet
    assert store.cancel("j")
    assert sweeper.sweep() == []  # a chunk of a cancelled job is not requeued
    assert store.client.hkeys(RUNNING_KEY) == []  # and the requeued runs' entries go


def test_the_sweeper_forgets_runs_of_gone_jobs(store):
    store.leases.start("j", 0, ITEMS, "host:1", "q")
    store.client.delete(JobKeys("j").lease(0), JobKeys("j").meta)
    assert Sweeper(store, grace=0.0).sweep() == []
    assert not store.client.hexists(RUNNING_KEY, "j:0")


def test_corrupt_run_entries_are_dropped_and_the_others_still_requeued(store):
    store.leases.start("j", 1, ITEMS, "host:1", "leases-test")
    store.client.delete(JobKeys("j").lease(1))  # a real lost run
    store.client.hset(RUNNING_KEY, mapping={"x:y": "{}", "j:2": json.dumps({"token": "t"})})  # corrupt
    (lost,) = Sweeper(store, grace=0.0).sweep()
    assert (lost.job_id, lost.chunk) == ("j", 1)
    assert store.client.hkeys(RUNNING_KEY) == ["j:1"]  # claimed, kept until the chunk runs again


@pytest.mark.parametrize("chunk", ["\u00b2", "\u0663", "9" * 5000, "-1", " 1"])
def test_run_entries_whose_chunk_is_no_ascii_number_are_dropped_and_stop_no_sweep(store, chunk):
    """A field whose chunk `str.isdigit` takes but `int` refuses (or reads as another chunk)
    once made every sweep, and every stall watch, of every worker fail."""
    store.client.hset(RUNNING_KEY, f"j:{chunk}", "{}")
    store.leases.start("j", 1, ITEMS, "host:1", "leases-test")
    store.client.delete(JobKeys("j").lease(1))  # a real lost run
    sweeper = Sweeper(store, grace=0.0)
    assert [(lost.job_id, lost.chunk) for lost in sweeper.sweep()] == [("j", 1)]
    assert store.client.hkeys(RUNNING_KEY) == ["j:1"]
    assert sweeper.stalls() == []


def test_run_entries_that_are_not_json_are_dropped_and_every_lost_run_still_requeued(store):
    store.client.hset(
        RUNNING_KEY, "j:2", "garbage"
    )  # listed first: entries of a hash this small keep their order
    for chunk in (0, 1):
        store.leases.start("j", chunk, ITEMS, "host:1", "leases-test")
        store.client.delete(JobKeys("j").lease(chunk))  # lost
    sweeper = Sweeper(store, grace=0.0)
    assert sorted(lost.chunk for lost in sweeper.sweep()) == [0, 1]
    assert queue_length(store.settings, "leases-test") == 2
    assert sorted(store.client.hkeys(RUNNING_KEY)) == ["j:0", "j:1"]  # claimed, kept until they run again


def test_a_run_whose_entry_is_not_json_any_more_ends_without_an_error(store):
    run = store.leases.start("j", 0, ITEMS, "host:1", "q")
    store.client.hset(RUNNING_KEY, "j:0", "garbage")
    assert not store.leases.renew(run)  # no longer the chunk's run
    store.leases.finish(run)
    assert not store.client.exists(JobKeys("j").lease(0))


def test_a_corrupt_job_does_not_stop_the_stall_watch_of_the_others(store):
    store.client.zadd(JOBS_KEY, {"bad": 0})
    store.client.hset(JobKeys("bad").meta, "state", "running")  # no other field: not a job
    sweeper = Sweeper(store)
    assert sweeper.stalls(now=0.0, after=30.0) == []
    assert sweeper.stalls(now=31.0, after=30.0) == ["j"]  # "j" made no progress, nothing queued


#: Records of job "bad" that fail one of the stall watch's reads of it.
STALL_CORRUPTIONS = {
    "a delivery count is not a number": lambda client: client.hset(JobKeys("bad").deliveries, "0", "x"),
    "the deliveries are not a hash": lambda client: client.set(JobKeys("bad").deliveries, "x"),
    "a chunk is not a list of pairs": lambda client: client.hset(JobKeys("bad").chunks, "0", "5"),
    "a chunk is nested too deeply": lambda client: client.hset(JobKeys("bad").chunks, "0", "[" * 100_000),
}


@pytest.mark.parametrize("corrupt", STALL_CORRUPTIONS.values(), ids=STALL_CORRUPTIONS.keys())
def test_one_job_s_corrupt_records_do_not_stop_the_stall_watch_of_the_others(store, corrupt, caplog):
    store.create(NewJob(job_id="bad", documents=1, segments=1, total=1, chunks=1, out="", origin="files"))
    store.client.zadd(JOBS_KEY, {"bad": 0})  # the oldest: watched first
    corrupt(store.client)
    sweeper = Sweeper(store)
    assert [sweeper.stalls(now=now, after=30.0) for now in (0.0, 31.0, 62.0)] == [[], ["j"], []]
    assert sum("job bad" in record.getMessage() for record in caplog.records) == 1  # logged once


#: A script that keeps Redis busy for ARGV[1] seconds (or until SCRIPT KILL).
BUSY_SCRIPT = """
local start = redis.call('TIME')
repeat
    local now = redis.call('TIME')
until (now[1] - start[1]) + (now[2] - start[2]) / 1e6 >= tonumber(ARGV[1])
"""


@contextmanager
def redis_busy_with_a_script(server: RedisServer) -> Iterator[None]:
    """Redis answering BUSY: a script running past a script time limit lowered to 10 ms;
    the script is killed and the limit put back at the end."""
    admin = server.client()
    limit = admin.config_get("lua-time-limit")["lua-time-limit"]
    admin.config_set("lua-time-limit", 10)

    def run_script() -> None:
        with contextlib.suppress(redis.ResponseError):  # killed
            server.client().eval(BUSY_SCRIPT, 0, 30)

    script = threading.Thread(target=run_script, daemon=True)
    script.start()
    try:
        deadline = time.monotonic() + 10
        while not answers_busy(admin):
            assert time.monotonic() < deadline, "Redis never answered BUSY"
            time.sleep(0.01)
        yield
    finally:
        with contextlib.suppress(redis.ResponseError):  # NOTBUSY: it ended already
            admin.script_kill()
        script.join()
        admin.config_set("lua-time-limit", limit)


def answers_busy(client: redis.Redis) -> bool:
    """Whether Redis answers BUSY (a script runs past its time limit)."""
    try:
        client.ping()
    except redis.ResponseError as exc:
        return str(exc).startswith("BUSY")
    return False


def test_a_busy_redis_is_not_taken_for_corrupt_records_by_the_stall_watch(
    store, redis_server, caplog, monkeypatch
):
    info = store.info

    def info_once_redis_is_busy(job_id: str) -> JobInfo | None:
        with redis_busy_with_a_script(redis_server):
            return info(job_id)

    monkeypatch.setattr(store, "info", info_once_redis_is_busy)
    sweeper = Sweeper(store)
    assert sweeper.stalls(now=0.0, after=30.0) == []
    (logged,) = [record.getMessage() for record in caplog.records if "job j" in record.getMessage()]
    assert "corrupt" not in logged and "Redis is busy" in logged, logged
    monkeypatch.setattr(store, "info", info)  # no longer busy: the job is watched again
    assert sweeper.stalls(now=1.0, after=30.0) == [] and sweeper.stalls(now=32.0, after=30.0) == ["j"]


def test_a_lost_run_that_redis_was_too_busy_to_requeue_is_requeued_at_the_next_sweep(
    store, redis_server, caplog, monkeypatch
):
    store.leases.start("j", 0, ITEMS, "host:1", "leases-test")
    store.client.delete(JobKeys("j").lease(0))  # its worker was killed
    claim_lost, busy = store.leases.claim_lost, contextlib.ExitStack()

    def claim_then_redis_is_busy(field: str) -> LostRun | None:
        lost = claim_lost(field)  # claimed, once among all sweepers: nobody else sends it
        busy.enter_context(redis_busy_with_a_script(redis_server))
        return lost

    monkeypatch.setattr(store.leases, "claim_lost", claim_then_redis_is_busy)
    sweeper = Sweeper(store, grace=0.0)
    with busy:
        assert sweeper.sweep(now=0.0) == []  # sending it failed: BUSY
    assert "BUSY" in caplog.text and queue_length(store.settings, "leases-test") == 0
    monkeypatch.setattr(store.leases, "claim_lost", claim_lost)
    assert [lost.chunk for lost in sweeper.sweep(now=1.0)] == [0]  # not STALL_AFTER later
    assert sweeper.sweep(now=2.0) == [] and queue_length(store.settings, "leases-test") == 1


def test_chunks_are_never_sent_to_a_queue_that_a_stored_record_names_but_is_no_chunk_queue(store, caplog):
    writer = store.writer("bad")
    writer.chunks(0, [[(0, "One.")]])
    writer.flush()
    store.create(NewJob("bad", 1, 1, 1, 1, "", "files", queue="tq:orphans"))  # the stall watch's
    store.leases.start("j", 0, ITEMS, "host:1", "tq:orphans")  # the sweeper's
    store.leases.start("j", 1, ITEMS, "host:1", "leases-test")
    store.client.delete(JobKeys("j").lease(0), JobKeys("j").lease(1))  # both lost
    sweeper = Sweeper(store, grace=0.0)
    assert [lost.chunk for lost in sweeper.sweep()] == [1]  # the other lost run is requeued all the same
    assert [sweeper.stalls(now=now, after=30.0) for now in (0.0, 31.0, 62.0)] == [[], [], []]
    assert store.client.keys("*tq:orphans*") == []
    assert sum("job bad" in record.getMessage() for record in caplog.records) == 1


def test_the_stall_watch_finishes_a_job_whose_slots_are_all_settled(store):
    """Every slot written and counted but the job never finalized: what a script that failed
    part way left (Redis keeps a failed script's writes)."""
    store.client.hset(JobKeys("j").results, mapping={"0": "一。", "1": "二。"})
    store.client.hset(JobKeys("j").meta, mapping={"done": 2, "inbox": "reports"})
    assert Sweeper(store).stalls(now=0.0, after=30.0) == []
    info = store.info("j")
    assert (info.state, info.finished_at is not None) == ("done", True)
    assert queue_length(store.settings, store.settings.inbox_queue) == 1  # sent for delivery


def test_a_stalled_job_s_unsettled_chunks_are_sent_again_once(store):
    store.client.delete(JobKeys("j").meta)
    writer = store.writer("s")
    writer.chunks(0, [[(0, "One.")], [(1, "Two.")]])
    writer.flush()
    store.create(
        NewJob(
            job_id="s",
            documents=1,
            segments=2,
            total=2,
            chunks=2,
            out="",
            origin="files",
        )
    )
    store.record("s", 0, "One.", "一。", fingerprint="f", hit=False)
    first, second = Sweeper(store), Sweeper(store)
    assert first.stalls(now=0.0, after=30.0) == []  # progress is watched from now on
    assert second.stalls(now=0.0, after=30.0) == []
    assert first.stalls(now=31.0, after=30.0) == ["s"]
    assert second.stalls(now=31.0, after=30.0) == []  # one sweeper sends them
    assert queue_length(store.settings, "leases-test") == 1  # chunk 1 only: chunk 0 is settled
    assert list(store.unsettled_chunks("s")) == [(1, [[1, "Two."]])]


def test_bytes_that_are_not_utf8_in_the_run_entries_stop_no_sweep(store, redis_server):
    raw = redis.Redis.from_url(redis_server.url)  # writes bytes as they are
    raw.hset(RUNNING_KEY, mapping={b"j:\xff": b"{}", b"j:2": b'{"items": "\xff"}'})
    raw.zadd(JOBS_KEY, {b"\xffbad": 0})
    store.leases.start("j", 1, ITEMS, "host:1", "leases-test")
    store.client.delete(JobKeys("j").lease(1))  # a real lost run
    sweeper = Sweeper(store, grace=0.0)
    (lost,) = sweeper.sweep()
    assert (lost.job_id, lost.chunk) == ("j", 1)
    assert raw.hkeys(RUNNING_KEY) == [b"j:1"]  # the corrupt entries are gone, whatever their bytes
    assert sweeper.stalls(now=0.0, after=30.0) == []
    assert raw.zrange(JOBS_KEY, 0, -1) == [b"j"]


def test_a_lost_run_of_another_deployment_s_live_queue_is_left_to_its_sweeper(store):
    other = JobStore.from_settings(Settings(redis_url=store.settings.redis_url, queue="other", lease_ttl=1.0))
    store.leases.start("j", 0, ITEMS, "host:1", "other")
    store.client.delete(JobKeys("j").lease(0))  # lost
    store.announce("host:2:1", "other", ttl=10.0)  # a live worker of that deployment
    assert Sweeper(store, grace=0.0).sweep() == []  # not claimed by this deployment's sweeper
    (lost,) = Sweeper(other, grace=0.0).sweep()
    assert (lost.job_id, lost.chunk, lost.queue) == ("j", 0, "other")
    assert queue_length(other.settings, "other") == 1


def test_a_run_abandoned_while_redis_was_away_is_ended_once_it_is_back_and_is_no_strike(tmp_path):
    server = RedisServer(tmp_path / "redis")  # its own: this test kills it
    server.start()
    restart = threading.Timer(2.0, server.start)
    try:
        settings = Settings(redis_url=server.url, queue="leases-test", lease_ttl=1.0)
        store = JobStore.from_settings(settings, patience=0.5)
        store.create(NewJob("j", 1, 2, 2, 1, "", "files"))
        run = store.leases.start("j", 0, ITEMS, "host:1", "leases-test")
        with pytest.raises(redis.ConnectionError), held(store.leases, run, interval=0.2):
            server.kill()
            restart.start()
            store.client.ping()  # the chunk's work meets Redis away, and gives up
        assert not store.client.hexists(RUNNING_KEY, "j:0")  # ended once Redis was back
        assert store.leases.start("j", 0, ITEMS, "host:2", "leases-test").attempt == 1  # no strike
    finally:
        restart.cancel()
        server.kill()


def test_the_log_line_of_a_lost_run_shows_its_stored_worker_with_controls_escaped(store):
    store.leases.start("j", 0, ITEMS, "host\x1b]0;pwned\x07:1", "leases-test")
    store.client.delete(JobKeys("j").lease(0))  # its worker died
    (lost,) = Sweeper(store, grace=0.0).sweep()
    assert lost.requeued_line() == "chunk 0 of job j was lost with worker host\\x1b]0;pwned\\x07:1: requeued"
