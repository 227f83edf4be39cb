"""worker.tasks.translate_chunk: a chunk is never acknowledged with its sentences unsettled."""

from __future__ import annotations

import pytest
import redis
from celery.exceptions import Reject
from distributed_support import RedisServer

from store.config import Settings
from store.jobstore import CANCELLED, DONE, JobStore, NewJob
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


@pytest.mark.parametrize("failure", [RuntimeError("a bug"), redis.ConnectionError("gone")])
def test_redis_lost_while_recording_a_failure_requeues_the_chunk(server, monkeypatch, failure):
    """The chunk fails at its last allowed delivery; recording that (an error entry, dead
    letters) needs Redis, which has just gone away: the chunk must go back to the queue."""
    settings = Settings(redis_url=server.url, max_deliveries=1)
    store = JobStore.from_settings(settings)
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
        )
    )

    def fail(*_args: object) -> None:
        server.kill()
        raise failure

    monkeypatch.setattr(tasks, "env_settings", lambda: settings)
    monkeypatch.setattr(tasks, "process_store", JobStore.from_settings)
    monkeypatch.setattr(tasks.runtime, "load_translator", lambda _settings: None)
    monkeypatch.setattr(tasks, "process_chunk", fail)
    with pytest.raises(Reject) as rejected:
        tasks.translate_chunk("j", 0, [[0, "One."], [1, "Two."]])
    assert rejected.value.requeue
    if isinstance(failure, redis.RedisError):  # Redis went away: requeued, no strike to record
        assert "ConnectionError" in str(rejected.value.reason)
    else:
        assert "could not be recorded" in str(rejected.value.reason)

    server.start()  # the AOF brings the job back: nothing was settled, nothing is lost
    info = store.info("j")
    assert (info.done, info.dead, info.finished) == (0, 0, False)
    assert store.dead_letters("j") == {}


def _job(server, monkeypatch, failure: Exception, extra: dict[str, str] | None = None) -> JobStore:
    """A two-sentence job of one chunk on `server`, whose chunk fails with `failure`, at a
    delivery cap of one; the tasks module wired to it, its sent tasks kept in `sent`."""
    settings = Settings(redis_url=server.url, max_deliveries=1)
    store = JobStore.from_settings(settings)
    _store_the_chunk(store)
    new = NewJob(job_id="j", documents=1, segments=2, total=2, chunks=1, out="", origin="files")
    store.create(NewJob(**{**new.__dict__, "extra": extra or {}}))

    def fail(*_args: object) -> None:
        raise failure

    monkeypatch.setattr(tasks, "env_settings", lambda: settings)
    monkeypatch.setattr(tasks, "process_store", JobStore.from_settings)
    monkeypatch.setattr(tasks.runtime, "load_translator", lambda _settings: None)
    monkeypatch.setattr(tasks, "process_chunk", fail)
    return store


def test_a_redis_error_that_is_not_redis_away_is_struck_not_retried_forever(server, monkeypatch):
    store = _job(server, monkeypatch, redis.ResponseError("WRONGTYPE Operation against a key"))
    tasks.translate_chunk("j", 0, [[0, "One."], [1, "Two."]])  # no Reject: the cap is reached
    info = store.info("j")
    assert (info.dead, info.finished, info.state) == (2, True, "partial")


def test_a_job_whose_records_refuse_the_failure_drops_the_chunk_and_says_so(server, monkeypatch):
    store = _job(server, monkeypatch, RuntimeError("a bug"))
    store.client.set("tq:job:j:dead", "not a hash")  # where its dead letters would go
    tasks.translate_chunk("j", 0, [[0, "One."], [1, "Two."]])  # dropped, not requeued forever
    (orphan,) = store.orphans()
    assert orphan["job"] == "'j'" and "refused the failure" in str(orphan["reason"])


def test_dead_letters_that_finish_an_inbox_job_send_it_for_delivery(server, monkeypatch):
    _job(server, monkeypatch, RuntimeError("a bug"), extra={"inbox": "reports"})
    sent: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(tasks.app, "send_task", lambda name, args: sent.append((name, args)))
    tasks.translate_chunk("j", 0, [[0, "One."], [1, "Two."]])
    assert sent == [(tasks.DELIVER_TASK, ["j"])]


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
