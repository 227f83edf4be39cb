"""Crafted task messages sent to a real worker and a real scheduler (as anyone who can write
to Redis could send them): each is refused with one log line, never requeued, and never
makes a process read or write a path that the message names."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from celery import Celery
from click.testing import CliRunner
from distributed_support import CELERY_WORKER, TRANSQUEUE_SCHEDULER, TRANSQUEUE_WORKER, Worker, wait_for

from cli import main
from producer.inbox import run_inbox
from producer.schedule import load_schedule
from store.config import Settings
from store.jobstore import JobStore
from store.keys import ORPHANS_KEY, JobKeys
from store.queues import CATCHUP_TASK, DELIVER_TASK, SCAN_TASK, TRANSLATE_TASK, client, model_key, model_queue
from store.runs import FAILED

pytestmark = pytest.mark.slow
pytest_plugins = ["distributed_support"]


@pytest.fixture(scope="module")
def services(redis_server, tiny_bundle, tmp_path_factory):
    """A worker and a scheduler (with one configured inbox, "docs") on the module's Redis."""
    root = tmp_path_factory.mktemp("untrusted")
    (root / "inbox").mkdir()
    (root / "inbox" / "a.txt").write_text("Hello there.\n", encoding="utf-8")
    schedule = root / "schedule.json"
    schedule.write_text(
        json.dumps(
            {
                "inbox": [
                    {
                        "name": "docs",
                        "inbox": str(root / "inbox"),
                        "outbox": str(root / "outbox"),
                        "schedule": 3600,
                        "settle": 0,  # a.txt is scanned as soon as it is written
                    }
                ]
            }
        ),
        encoding="utf-8",
    )
    env = {
        "TRANSQUEUE_REDIS_URL": redis_server.url,
        "TRANSQUEUE_BUNDLE": str(tiny_bundle),
        "TRANSQUEUE_THREADS": "1",
        "TRANSQUEUE_SCHEDULE": str(schedule),
    }
    worker = Worker("w1", env, root, CELERY_WORKER)
    scheduler = Worker("scheduler", env, root, TRANSQUEUE_SCHEDULER)
    try:  # a scheduler that fails to start must not leave the worker running
        worker.start()
        scheduler.start()
        yield {
            "root": root,
            "schedule": schedule,
            "worker": worker,
            "scheduler": scheduler,
            "url": redis_server.url,
            "bundle": str(tiny_bundle),
        }
    finally:
        worker.kill()
        scheduler.kill()


def send(services: dict, task: str, args: list, kwargs: dict | None = None, **options: object) -> None:
    """Send a task as anyone could: chunks to the workers' model queue, the others by route;
    `options` are more of Celery's (an ETA, say)."""
    settings = Settings(bundle=services["bundle"])
    queue = model_queue(settings, model_key(settings)) if task == TRANSLATE_TASK else None
    with client.connection_for_write(services["url"]) as connection:
        client.send_task(task, args=args, kwargs=kwargs, connection=connection, queue=queue, **options)


def store_of(services: dict, **changes: object) -> JobStore:
    return JobStore.from_settings(Settings(redis_url=services["url"], **changes))


def dropped(process: Worker, task: str, count: int = 1) -> None:
    """Wait until `process` logged `count` refusals of `task`."""
    wait_for(
        lambda: process.log_text().count(f"dropped a {task} message") >= count,
        f"{process.name} to drop a {task} message",
        timeout=60,
        detail=process.log_text,
    )


def test_a_scan_naming_directories_reads_and_writes_nothing(services, tmp_path):
    private, other = tmp_path / "private", tmp_path / "other"
    private.mkdir()
    (private / "secret.txt").write_text("The secret plans are here.\n", encoding="utf-8")
    store = store_of(services)
    send(services, SCAN_TASK, [{"name": "evil", "inbox": str(private), "outbox": str(other), "schedule": 60}])
    send(services, SCAN_TASK, ["evil"])  # a name, but not one this scheduler is configured with
    dropped(services["scheduler"], SCAN_TASK, 2)
    assert not other.exists()
    assert not [job for job in store.job_ids() if "evil" in store.info(job).origin]
    assert not [key for key in store.client.scan_iter("tq:*") if b"secret" in store.client.dump(key)]
    assert "is not an inbox of this scheduler's schedule" in services["scheduler"].log_text()


def test_a_delivery_never_writes_outside_the_configured_outbox(services):
    # Submitted on a queue nobody consumes, settled by hand, then its target tampered with.
    store = store_of(services, queue="nobody")
    (entry,) = load_schedule(services["schedule"])
    run = run_inbox(store, entry)
    for slot in range(store.info(run.job).total):
        store.record(run.job, slot, "s", "译", fingerprint="f", hit=False)
    (record,) = store.documents(run.job)
    escaped = dataclasses.replace(record, target="../../escaped.jsonl")
    store.client.hset(JobKeys(run.job).docs, "0", escaped.to_json())
    store.client.hset(JobKeys(run.job).meta, "out", "/tmp")  # ignored: the outbox is configured
    send(services, DELIVER_TASK, [run.job])
    wait_for(
        lambda: store.runs.list("docs")[-1].state == FAILED,
        "the delivery to be refused",
        timeout=60,
        detail=services["scheduler"].log_text,
    )
    assert "refusing to write outside" in store.runs.list("docs")[-1].message
    root = services["root"]
    assert not (root.parent / "escaped.jsonl").exists() and not (root / "outbox").exists()
    assert not Path("/tmp/escaped.jsonl").exists()
    send(services, DELIVER_TASK, ["no:such:job"])
    dropped(services["scheduler"], DELIVER_TASK)


def test_a_catch_up_message_with_arguments_is_dropped(services):
    scheduler = services["scheduler"]
    log_size = len(scheduler.log_text())
    send(services, CATCHUP_TASK, [str(services["root"] / "inbox")])
    send(services, CATCHUP_TASK, [], {"inbox": "/etc"})
    dropped(scheduler, CATCHUP_TASK, 2)
    log = scheduler.log_text()[log_size:]
    assert f"dropped a {CATCHUP_TASK} message: it takes no arguments, not ['{services['root']}" in log
    assert "not ['inbox']" in log and "Traceback" not in log


def test_scan_and_delivery_messages_of_another_shape_are_dropped_in_one_line(services):
    scheduler = services["scheduler"]
    log_size = len(scheduler.log_text())
    scans, deliveries = (
        scheduler.log_text().count(f"dropped a {task}") for task in (SCAN_TASK, DELIVER_TASK)
    )
    send(services, SCAN_TASK, ["docs", "/etc"])
    send(services, SCAN_TASK, [], {"name": "docs"})
    send(services, DELIVER_TASK, [])
    send(services, DELIVER_TASK, ["abc"], {"inbox": "/tmp"})
    dropped(scheduler, SCAN_TASK, scans + 2)
    dropped(scheduler, DELIVER_TASK, deliveries + 2)
    log = scheduler.log_text()[log_size:]
    assert "it takes one argument, not ['docs', '/etc']" in log and "not ['abc', 'inbox']" in log
    assert "Traceback" not in log and "TypeError" not in log


def test_chunks_that_do_not_fit_their_job_are_dropped_once(services):
    store = store_of(services, queue="nobody")
    (entry,) = load_schedule(services["schedule"])
    job_id = run_inbox(store, entry).job  # one sentence: "Hello there."
    worker = services["worker"]
    send(services, TRANSLATE_TASK, [job_id, 0, [[0, "Hello there."], [5, "Out of range."]]])
    send(services, TRANSLATE_TASK, [job_id, 3, [[0, "Hello there."]]])  # no chunk 3
    send(services, TRANSLATE_TASK, [f"{job_id}:docs", 0, [[0, "x"]]])  # addresses another key
    store.client.set(JobKeys("wrongtype").meta, "not a job")
    send(services, TRANSLATE_TASK, ["wrongtype", 0, [[0, "x"]]])
    send(services, TRANSLATE_TASK, [job_id, 0, [[0, "Forged text."]]])  # a real slot, other text
    dropped(worker, TRANSLATE_TASK, 5)
    info = store.info(job_id)
    assert (info.done, info.finished) == (0, False)

    send(services, TRANSLATE_TASK, [job_id, 0, [[0, "Hello there."]]])  # the real chunk still works
    wait_for(lambda: store.info(job_id).finished, "the real chunk", timeout=60, detail=worker.log_text)
    # a dropped message requeued would have come back before the real chunk, sent after it,
    # and been refused again: each was refused once
    assert worker.log_text().count(f"dropped a {TRANSLATE_TASK} message") == 5
    refused = [o for o in store.orphans() if str(o["reason"]).startswith("refused")]
    assert len(refused) == 5


def test_chunk_messages_of_another_shape_are_set_aside_once(services):
    """Too few arguments, too many, or keyword arguments: the task body refuses them as bad
    messages (one log line, one orphan record each), before Celery could fail the call."""
    store, worker = store_of(services), services["worker"]
    orphans, log_size = store.client.llen(ORPHANS_KEY), len(worker.log_text())
    send(services, TRANSLATE_TASK, ["abc", 0])
    send(services, TRANSLATE_TASK, ["abc", 0, [], []])
    send(services, TRANSLATE_TASK, ["abc", 0, []], {"items": []})
    send(services, TRANSLATE_TASK, [], {"job_id": "abc", "chunk": 0, "items": []})
    wait_for(
        lambda: store.client.llen(ORPHANS_KEY) == orphans + 4,
        "the four messages to be set aside",
        timeout=60,
        detail=worker.log_text,
    )
    reasons = [str(orphan["reason"]) for orphan in list(store.orphans())[:4]]
    assert sum("arguments, not 3" in reason for reason in reasons) == 2
    assert sum("keyword arguments" in reason for reason in reasons) == 2
    log = worker.log_text()[log_size:]
    assert log.count(f"dropped a {TRANSLATE_TASK} message") == 4 and "Traceback" not in log


def test_a_huge_refused_value_leaves_small_records(services):
    """A 2 MB job id, or chunk number, is quoted in 80 characters: the orphan records (kept
    with no expiry) and the log lines that refuse them stay small."""
    store, worker = store_of(services), services["worker"]
    orphans, log_size = store.client.llen(ORPHANS_KEY), len(worker.log_text())
    send(services, TRANSLATE_TASK, ["x" * 2_000_000, 0, []])
    send(services, TRANSLATE_TASK, ["ok", "y" * 2_000_000, []])
    wait_for(
        lambda: store.client.llen(ORPHANS_KEY) == orphans + 2,
        "both messages to be set aside",
        timeout=60,
        detail=worker.log_text,
    )
    records = store.client.lrange(ORPHANS_KEY, 0, 1)  # the newest two
    assert all(len(record) < 1000 for record in records), [len(record) for record in records]
    assert "'xxx" in records[1] and "'yyy" in records[0] and "…" in records[0]
    assert len(worker.log_text()) - log_size < 5000


def test_jobs_counts_the_chunk_messages_set_aside(redis_server, tiny_bundle, tmp_path):
    """A job removed while its chunk message is queued, and a refused message: the worker
    that takes them sets both aside, and `transqueue jobs` counts them."""
    # a queue of this test alone, which no worker consumes until the job is gone
    env = {
        "TRANSQUEUE_REDIS_URL": redis_server.url,
        "TRANSQUEUE_BUNDLE": str(tiny_bundle),
        "TRANSQUEUE_THREADS": "1",
        "TRANSQUEUE_QUEUE": "late",
    }
    store = JobStore.from_settings(Settings(redis_url=redis_server.url))
    store.client.delete(ORPHANS_KEY)  # those of the other tests
    source = tmp_path / "a.txt"
    source.write_text("Hello there.\n", encoding="utf-8")
    submitted = CliRunner().invoke(main, ["submit", str(source), "--out", str(tmp_path / "out")], env=env)
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.output.strip()
    assert store.info(job_id).chunks == 1
    store.discard(job_id)  # removed (as an expired job is) with its chunk still queued
    settings = Settings(bundle=str(tiny_bundle), queue="late")
    with client.connection_for_write(redis_server.url) as connection:
        client.send_task(
            TRANSLATE_TASK,
            args=[f"{job_id}:docs", 0, [[0, "x"]]],  # refused: addresses another key
            connection=connection,
            queue=model_queue(settings, model_key(settings)),
        )
    worker = Worker("late", env, tmp_path)
    try:
        worker.start()
        wait_for(
            lambda: len(list(store.orphans())) == 2,
            "both messages to be set aside",
            timeout=60,
            detail=worker.log_text,
        )
    finally:
        worker.kill()
    reasons = sorted(str(orphan["reason"]) for orphan in store.orphans())
    assert reasons[0].startswith("no such job") and reasons[1].startswith("refused")
    listed = CliRunner().invoke(main, ["jobs"], env=env)
    assert listed.exit_code == 0, listed.output
    assert (
        "2 chunk messages were set aside (their job no longer exists, or the message was refused)"
        in listed.output
    )


@pytest.mark.parametrize("command", [CELERY_WORKER, TRANSQUEUE_WORKER])
def test_a_worker_with_a_bad_bundle_exits_at_once_with_one_line(redis_server, tmp_path, command):
    env = {**os.environ, "TRANSQUEUE_REDIS_URL": redis_server.url, "TRANSQUEUE_BUNDLE": str(tmp_path)}
    done = subprocess.run([*command, "--loglevel=info"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "cannot load the model" in done.stderr and "not a transqueue model bundle" in done.stderr
    assert "to fix it: set TRANSQUEUE_BUNDLE" in done.stderr and "Traceback" not in done.stderr
    assert "ready" not in done.stdout + done.stderr


@pytest.mark.parametrize("pool", ["solo", "prefork"])
def test_a_worker_with_a_corrupt_bundle_file_exits_before_it_is_ready(
    redis_server, tmp_path, tiny_bundle, pool
):
    """solo hashes the files while its Translator loads, prefork once in the parent: both
    refuse a file whose sha256 is not the manifest's, naming it, and never report ready."""
    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_bundle, bundle)
    data = bundle / "decoder.int8.onnx.data"
    content = data.read_bytes()
    data.write_bytes(content[:-1] + bytes([content[-1] ^ 1]))
    env = {**os.environ, "TRANSQUEUE_REDIS_URL": redis_server.url, "TRANSQUEUE_BUNDLE": str(bundle)}
    command = [*TRANSQUEUE_WORKER, f"--pool={pool}", "--loglevel=info"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1  # the line the README quotes, as for a bundle the command refuses
    assert f"Error: cannot load the model: {data}: sha256 does not match" in done.stderr
    assert "to fix it: set TRANSQUEUE_BUNDLE" in done.stderr and "Traceback" not in done.stderr
    assert "ready" not in done.stdout + done.stderr


def test_a_message_with_a_far_eta_runs_at_once_and_is_not_held(services):
    """Celery holds a message with an ETA in memory, unacknowledged, until then (and gets it
    again at each visibility timeout): forged ones could grow a worker or the scheduler
    without bound. transqueue never sends one, and runs each at once, refused as any other."""
    store, worker, scheduler = store_of(services), services["worker"], services["scheduler"]
    orphans = store.client.llen(ORPHANS_KEY)
    scans, deliveries = (
        scheduler.log_text().count(f"dropped a {task} message") for task in (SCAN_TASK, DELIVER_TASK)
    )
    send(services, TRANSLATE_TASK, ["noeta", 0, [[0, "x" * 1000]]], countdown=86_400)
    send(services, TRANSLATE_TASK, ["noeta", 1, [[0, "y"]]], eta=datetime.now(UTC) + timedelta(days=3650))
    send(services, SCAN_TASK, ["elsewhere"], countdown=86_400)
    send(services, DELIVER_TASK, ["no:such:job"], countdown=86_400)
    wait_for(
        lambda: store.client.llen(ORPHANS_KEY) == orphans + 2,
        "both chunks to be set aside now",
        timeout=60,
        detail=worker.log_text,
    )
    assert [str(orphan["job"]) for orphan in list(store.orphans())[:2]] == ["noeta", "noeta"]
    dropped(scheduler, SCAN_TASK, scans + 1)
    dropped(scheduler, DELIVER_TASK, deliveries + 1)


def test_remote_control_broadcasts_cannot_stop_or_steer_the_worker_or_scheduler(services):
    """Celery's remote control travels through Redis too: a shutdown, a pool restart or a
    queue added by a broadcast is refused; what only reports (ping) still answers."""
    store, worker, scheduler = store_of(services), services["worker"], services["scheduler"]
    anyone = Celery(broker=services["url"])
    for command, arguments in [
        ("shutdown", {}),
        ("pool_restart", {"reload": True}),
        ("add_consumer", {"queue": "elsewhere"}),
        ("cancel_consumer", {"queue": "elsewhere"}),
    ]:
        anyone.control.broadcast(command, arguments=arguments)
    for process in (worker, scheduler):
        wait_for(
            lambda process=process: process.log_text().count("refused the remote-control command") >= 4,
            f"{process.name} to refuse the commands",
            timeout=60,
            detail=process.log_text,
        )
        log = process.log_text()
        assert process.process.poll() is None and "Got shutdown from remote" not in log
        assert "refused the remote-control command shutdown: not one of transqueue's" in log
        assert "Traceback" not in log
    # what only reports still answers; the scheduler runs the solo pool, so it answers only
    # between its scans and catch-ups: ask until both have, not once
    answered: set[str] = set()

    def both_answered() -> bool:
        answered.update(name for reply in anyone.control.ping(timeout=5) for name in reply)
        return len(answered) == 2

    wait_for(
        both_answered,
        "the worker and the scheduler to answer a ping",
        timeout=60,
        detail=lambda: str(answered),
    )
    orphans = store.client.llen(ORPHANS_KEY)
    send(services, TRANSLATE_TASK, ["stillserving", 0, []])  # the worker still takes chunks
    wait_for(
        lambda: store.client.llen(ORPHANS_KEY) == orphans + 1, "the chunk", timeout=60, detail=worker.log_text
    )
