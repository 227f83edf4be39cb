"""worker.tasks.translate_chunk: a chunk is never acknowledged with its sentences unsettled."""

from __future__ import annotations

import base64
import json
import os
import signal
import threading
import time

import pytest
import redis
from celery import signals
from celery.exceptions import Reject
from distributed_support import TRANSQUEUE_WORKER, RedisServer, Worker, wait_for

from store import connection
from store.config import Settings
from store.connection import redis_away
from store.defaults import BUSY_REDIS_MAX_PAUSE_S, BUSY_REDIS_PAUSE_S, POISON_SLEEP
from store.jobstore import CANCELLED, DONE, JobStore, NewJob
from store.keys import RUNNING_KEY, JobKeys
from store.queues import DELIVER_TASK, model_key, model_queue, send_chunks
from worker import tasks

pytest_plugins = ["distributed_support"]


@pytest.fixture
def server(tmp_path):
    """A redis-server of this test alone: the test kills it."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.kill()


def _store_the_chunk(store: JobStore, job_id: str = "j") -> None:
    """Chunk 0 of `job_id` as submit stores it: the messages below are checked against it."""
    writer = store.writer(job_id)
    writer.chunks(0, [[(0, "One."), (1, "Two.")]])
    writer.flush()


def _create_the_job(store: JobStore, extra: dict[str, str] | None = None) -> None:
    """Job "j": two sentences in one chunk, stored as submit stores them."""
    _store_the_chunk(store)
    store.create(
        NewJob(
            job_id="j",
            documents=1,
            segments=2,
            total=2,
            chunks=1,
            out="",
            origin="files",
            extra=extra or {},
        )
    )


def _last_delivery(store: JobStore) -> None:
    """One strike for chunk 0 of job "j": under a cap of 2 (the least allowed), its next
    delivery is its last."""
    store.leases.strike("j", 0)


def _wire(monkeypatch, settings: Settings) -> None:
    """Run the tasks module as a worker of `settings` would: its settings, a store that
    fails at once when Redis is away (a worker's waits out the patience), and a Translator
    of its own bundle, loaded afresh."""
    monkeypatch.setattr(tasks, "env_settings", lambda: settings)
    monkeypatch.setattr(tasks, "process_store", JobStore.from_settings)
    monkeypatch.setattr(tasks.runtime, "_state", {})


def test_redis_lost_while_recording_a_failure_requeues_the_chunk(server, monkeypatch):
    """The chunk fails at its last allowed delivery; recording that (an error entry, dead
    letters) needs Redis, which has just gone away: the chunk must go back to the queue."""
    settings = Settings(redis_url=server.url, max_deliveries=2)
    store = JobStore.from_settings(settings)
    _create_the_job(store)
    _last_delivery(store)

    restart = threading.Timer(4.0, server.start)  # after the client (2 s) gives up

    def fail(*_args: object) -> None:
        server.kill()
        restart.start()  # the worker ends its run once Redis is back, then sends the chunk back
        raise RuntimeError("a bug")

    monkeypatch.setattr(tasks, "env_settings", lambda: settings)
    monkeypatch.setattr(tasks, "process_store", JobStore.from_settings)
    monkeypatch.setattr(tasks.runtime, "load_translator", lambda _settings: None)
    # Stand-in: no real failure of a chunk escapes process_chunk and then stops Redis before it is recorded.
    monkeypatch.setattr(tasks, "process_chunk", fail)
    with pytest.raises(Reject) as rejected:
        tasks.translate_chunk("j", 0, [[0, "One."], [1, "Two."]])
    assert rejected.value.requeue and "could not be recorded" in str(rejected.value.reason)

    # the AOF brings the job back: nothing was settled, nothing is lost, no run left behind
    info = store.info("j")
    assert (info.done, info.dead, info.finished) == (0, 0, False)
    assert store.dead_letters("j") == {} and not store.client.hexists(RUNNING_KEY, "j:0")


def _chunk_running_as_redis_dies(
    server: RedisServer, store: JobStore
) -> tuple[threading.Thread, list[BaseException]]:
    """Translate chunk 0 of job "j" in a thread (the settings' test hook holds its first
    sentence) and kill Redis once it runs; returns the thread and what it raised."""
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            tasks.translate_chunk("j", 0, [[0, "One."], [1, "Two."]])
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    # the job's fingerprint is claimed just before the translator is asked (and held)
    wait_for(lambda: store.client.hget(JobKeys("j").meta, "fingerprint") is not None, "the chunk to start")
    server.kill()
    return worker, outcome


def test_redis_lost_mid_chunk_requeues_the_chunk_without_a_strike(server, monkeypatch, tiny_bundle):
    """Redis dies while the worker translates (the test hook holds the first sentence):
    writing the result fails, and the chunk goes back to the queue with no strike and no
    error recorded, since it was not the chunk's fault."""
    settings = Settings(
        redis_url=server.url, bundle=str(tiny_bundle), threads=1, max_deliveries=2, test_poison="sleep:One."
    )
    store = JobStore.from_settings(settings)
    _create_the_job(store)
    _wire(monkeypatch, settings)
    worker, outcome = _chunk_running_as_redis_dies(server, store)
    # back after the held sentence (POISON_SLEEP) and the client (2 s) gave up: the run ends then
    restart = threading.Timer(POISON_SLEEP + 4.0, server.start)
    restart.start()
    worker.join()
    (rejected,) = outcome
    assert isinstance(rejected, Reject) and rejected.requeue
    reason = str(rejected.reason)  # requeued as Redis being away, not as a failure struck
    assert reason.startswith("chunk 0 of job j: ") and reason.endswith("ConnectionError")

    restart.join()
    assert not store.client.hexists(RUNNING_KEY, "j:0")  # so the next delivery is no strike
    info = store.info("j")
    assert (info.done, info.dead, info.finished) == (0, 0, False)
    assert store.client.hget(JobKeys("j").strikes, "0") is None and store.errors("j") == []


def test_a_worker_shutting_down_stops_waiting_for_redis_to_end_its_run(server, monkeypatch, tiny_bundle):
    """Redis dies mid-chunk and stays away: the worker would wait END_RUN_PATIENCE to end
    its run; a stop (Celery's worker_shutting_down, sent on Ctrl-C or SIGTERM) ends the wait,
    and the chunk goes back (its lease then expires by itself)."""
    settings = Settings(redis_url=server.url, bundle=str(tiny_bundle), threads=1, test_poison="sleep:One.")
    store = JobStore.from_settings(settings)
    _create_the_job(store)
    _wire(monkeypatch, settings)
    worker, outcome = _chunk_running_as_redis_dies(server, store)
    worker.join(timeout=POISON_SLEEP + 6.0)
    assert worker.is_alive()  # the sentence was written into a Redis that is away: waiting to end the run
    try:
        signals.worker_shutting_down.send(sender="w@test", sig="SIGTERM", how="Warm", exitcode=0)
        worker.join(timeout=10.0)
        assert not worker.is_alive()
    finally:
        connection.STOPPING.clear()
    (rejected,) = outcome
    assert isinstance(rejected, Reject) and rejected.requeue


@pytest.mark.parametrize("pool", ["prefork", "solo"])
def test_a_worker_stopped_while_redis_is_away_exits_at_once(server, tiny_bundle, tmp_path, pool):
    """A real `transqueue worker`, stopped (SIGTERM to its main process alone, as `docker
    stop` sends it) while its chunk's result waits for a Redis that went away: every wait
    for Redis ends (a prefork child sees its parent stop), and the worker exits within
    seconds, not after its client's patience (60 s a call) or END_RUN_PATIENCE (600 s)."""
    settings = Settings(redis_url=server.url, bundle=str(tiny_bundle))
    store = JobStore.from_settings(settings)
    _create_the_job(store)
    env = {
        "TRANSQUEUE_REDIS_URL": server.url,
        "TRANSQUEUE_BUNDLE": str(tiny_bundle),
        "TRANSQUEUE_THREADS": "1",
        "TRANSQUEUE_POOL": pool,
        "TRANSQUEUE_TEST_POISON": "sleep:One.",
    }
    worker = Worker(f"stopped-{pool}", env, tmp_path, TRANSQUEUE_WORKER).start()
    try:
        send_chunks(
            settings, "j", [(0, [[0, "One."], [1, "Two."]])], 1, model_queue(settings, model_key(settings))
        )
        wait_for(
            lambda: store.client.hget(JobKeys("j").meta, "fingerprint") is not None, "the chunk to start"
        )
        server.kill()
        time.sleep(POISON_SLEEP + 1.0)  # the held sentence is done: its result waits for Redis
        os.kill(worker.process.pid, signal.SIGTERM)
        worker.process.wait(timeout=30.0)
        assert "not ended: " in worker.log_text()  # it was waiting to end the chunk's run
    finally:
        worker.kill()


def _deliveries(server: RedisServer) -> list[tuple[str, list[object]]]:
    """The tasks waiting in the inbox queue (the scheduler's): (task name, arguments) of each."""
    messages = [json.loads(raw) for raw in server.client().lrange(Settings().inbox_queue, 0, -1)]
    return [(m["headers"]["task"], json.loads(base64.b64decode(m["body"]))[0]) for m in messages]


def _worker_without_mget(server: RedisServer) -> str:
    """The URL of a Redis user that may do anything but MGET, which a chunk needs for its
    translation-memory lookups: Redis refuses them (NOPERM), an error that is not Redis
    being away, while everything a failure is recorded with still works."""
    server.client().acl_setuser(
        "worker",
        enabled=True,
        passwords=["+secret"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-mget"],
    )
    return f"redis://worker:secret@127.0.0.1:{server.port}/0"


def test_a_redis_error_that_is_not_redis_away_is_struck_not_retried_forever(server, monkeypatch, tiny_bundle):
    store = JobStore.from_settings(Settings(redis_url=server.url))
    _create_the_job(store)
    _last_delivery(store)
    url = _worker_without_mget(server)
    _wire(monkeypatch, Settings(redis_url=url, bundle=str(tiny_bundle), threads=1, max_deliveries=2))
    tasks.translate_chunk("j", 0, [[0, "One."], [1, "Two."]])  # no Reject: the cap is reached
    info = store.info("j")
    assert (info.dead, info.finished, info.state) == (2, True, "partial")
    assert "NoPermissionError" in str(store.errors("j")[0]["error"])
    assert {letter.deliveries for letter in store.dead_letters("j").values()} == {2}


def test_a_job_whose_records_refuse_the_failure_drops_the_chunk_and_says_so(server, monkeypatch, tiny_bundle):
    settings = Settings(redis_url=server.url, bundle=str(tiny_bundle), threads=1, max_deliveries=2)
    store = JobStore.from_settings(settings)
    _create_the_job(store)
    _last_delivery(store)
    _wire(monkeypatch, settings)
    # where its dead letters go: the chunk's lookup of settled slots fails on it, and so does
    # the dead-lettering of that failure
    store.client.set(JobKeys("j").dead, "not a hash")
    tasks.translate_chunk("j", 0, [[0, "One."], [1, "Two."]])  # dropped, not requeued forever
    (orphan,) = store.orphans()
    assert orphan["job"] == "'j'" and "refused the failure" in str(orphan["reason"])
    assert "ResponseError" in str(store.errors("j")[0]["error"])  # the chunk's own failure


@pytest.mark.parametrize(
    ("record", "error"),
    [
        ("chunks", "WRONGTYPE"),  # read while the message is checked against its job
        ("deliveries", "WRONGTYPE"),  # written by the script that starts the run: a script error
    ],
)
def test_a_chunk_whose_job_records_are_bad_is_set_aside_once(server, monkeypatch, tiny_bundle, record, error):
    """A Redis error that is not Redis being away, before the chunk is translated, means the
    job's records are bad: retrying could only fail again, so the message is set aside (one
    orphan record) instead of going back to the queue."""
    settings = Settings(redis_url=server.url, bundle=str(tiny_bundle), threads=1)
    store = JobStore.from_settings(settings)
    _create_the_job(store)
    store.client.delete(getattr(JobKeys("j"), record))
    store.client.set(getattr(JobKeys("j"), record), "not a hash")
    _wire(monkeypatch, settings)
    tasks.translate_chunk("j", 0, [[0, "One."], [1, "Two."]])  # no Reject: not requeued
    (orphan,) = store.orphans()
    assert orphan["job"] == "'j'" and str(orphan["reason"]).startswith(f"refused: {error}")
    info = store.info("j")
    assert (info.done, info.dead, info.finished) == (0, 0, False)


def test_a_chunk_whose_stored_chunk_is_nested_too_deeply_is_set_aside_once(server, monkeypatch):
    """json.loads raises RecursionError on it, which failed the task with a traceback."""
    settings = Settings(redis_url=server.url)
    store = JobStore.from_settings(settings)
    _create_the_job(store)
    store.client.hset(JobKeys("j").chunks, "0", "[" * 100_000)  # tampered
    _wire(monkeypatch, settings)
    tasks.translate_chunk("j", 0, [[0, "One."], [1, "Two."]])  # no Reject: not requeued
    (orphan,) = store.orphans()
    assert "chunk 0 of job j is not a list of pairs" in str(orphan["reason"])
    assert store.info("j").done == 0


def test_dead_letters_that_finish_an_inbox_job_send_it_for_delivery(server, monkeypatch, tiny_bundle):
    store = JobStore.from_settings(Settings(redis_url=server.url))
    _create_the_job(store, extra={"inbox": "reports"})
    _last_delivery(store)
    url = _worker_without_mget(server)
    _wire(monkeypatch, Settings(redis_url=url, bundle=str(tiny_bundle), threads=1, max_deliveries=2))
    tasks.translate_chunk("j", 0, [[0, "One."], [1, "Two."]])
    assert store.info("j").dead == 2
    assert _deliveries(server) == [(DELIVER_TASK, ["j"])]


def test_a_chunk_whose_slots_are_all_settled_finishes_a_job_nothing_finished(
    server, monkeypatch, tiny_bundle
):
    """Every slot written and counted but the job never finalized: what a script that failed
    part way left (Redis keeps a failed script's writes). The retry of the chunk finishes it."""
    settings = Settings(redis_url=server.url, bundle=str(tiny_bundle), threads=1)
    store = JobStore.from_settings(settings)
    _create_the_job(store, extra={"inbox": "reports"})
    store.client.hset(JobKeys("j").results, mapping={"0": "一。", "1": "二。"})
    store.client.hset(JobKeys("j").meta, "done", 2)
    _wire(monkeypatch, settings)
    tasks.translate_chunk("j", 0, [[0, "One."], [1, "Two."]])
    info = store.info("j")
    assert (info.state, info.done, info.finished_at is not None) == (DONE, 2, True)
    assert _deliveries(server) == [(DELIVER_TASK, ["j"])]  # delivered as if its last write had finished it


def test_the_chunks_of_a_cancelled_job_are_skipped(server, monkeypatch, tiny_bundle):
    settings = Settings(redis_url=server.url, bundle=str(tiny_bundle), threads=1)
    store = JobStore.from_settings(settings)
    for job_id in ("cancelled", "kept"):
        _store_the_chunk(store, job_id)
        store.create(
            NewJob(job_id=job_id, documents=1, segments=2, total=2, chunks=1, out="", origin="files")
        )
    assert store.cancel("cancelled")
    monkeypatch.setattr(tasks, "env_settings", lambda: settings)
    monkeypatch.setattr(tasks, "process_store", JobStore.from_settings)
    monkeypatch.setattr(tasks.runtime, "_state", {})  # a Translator of the tiny bundle
    for job_id in ("cancelled", "kept"):
        tasks.translate_chunk(job_id, 0, [[0, "One."], [1, "Two."]])
    info = store.info("cancelled")
    assert (info.state, info.done, info.dead, store.deliveries("cancelled")) == (CANCELLED, 0, 0, 0)
    assert store.slot_states("cancelled", [0, 1]) == [None, None]
    # the same chunk of a job not cancelled is translated
    assert store.info("kept").state == DONE and None not in store.slot_states("kept", [0, 1])


def test_a_worker_s_translator_batches_as_its_settings_say(monkeypatch):
    monkeypatch.setattr(tasks.runtime, "_state", {})
    translator = tasks.runtime.load_translator(Settings(max_batch=3, threads=1))
    assert translator.max_batch == 3


def test_a_redis_out_of_memory_sends_the_chunk_back_not_aside(server, monkeypatch, tiny_bundle):
    """Redis refusing writes for now (maxmemory reached) is Redis being away, not bad records:
    the chunk goes back to the queue (after a pause), with no strike and no orphan record,
    and is translated once Redis takes writes again."""
    settings = Settings(redis_url=server.url, bundle=str(tiny_bundle), threads=1)
    store = JobStore.from_settings(settings)
    _create_the_job(store)
    _wire(monkeypatch, settings)
    monkeypatch.setattr(tasks, "BUSY_REDIS_PAUSE_S", 0.01)
    client = server.client()
    monkeypatch.setattr(tasks, "REFUSALS", tasks.RefusalPause())
    client.config_set("maxmemory", "1")
    try:
        for _ in range(3):
            with pytest.raises(Reject) as rejected:
                tasks.translate_chunk("j", 0, [[0, "One."], [1, "Two."]])
    finally:
        client.config_set("maxmemory", "0")
    assert rejected.value.requeue and "OutOfMemoryError" in str(rejected.value.reason)
    assert list(store.orphans()) == [] and store.errors("j") == []
    assert tasks.REFUSALS.in_a_row == 3  # each pause longer than the last
    tasks.translate_chunk("j", 0, [[0, "One."], [1, "Two."]])
    assert store.info("j").finished and tasks.REFUSALS.in_a_row == 0


def test_the_pause_before_a_refused_chunk_goes_back_doubles_up_to_a_cap():
    pause = tasks.RefusalPause()
    pauses = [pause.next() for _ in range(100)]
    assert pauses[:5] == [BUSY_REDIS_PAUSE_S * 2**n for n in range(5)]
    assert max(pauses) == pauses[-1] == BUSY_REDIS_MAX_PAUSE_S
    pause.reset()
    assert pause.next() == BUSY_REDIS_PAUSE_S


@pytest.mark.parametrize(
    ("reply", "away"),
    [
        ("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.", True),
        ("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist", True),
        ("WRONGTYPE Operation against a key holding the wrong kind of value", False),
        ("ERR Error running script (call to f_0): @user_script:1: nothing written", False),
    ],
)
def test_busy_and_misconf_replies_are_redis_away(reply, away):
    assert redis_away(redis.ResponseError(reply)) is away
