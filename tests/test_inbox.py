"""producer.inbox on a real redis-server, without workers: run records, the lock, the scan."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import os
import re
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from producer import defaults as producer_defaults
from producer import inbox
from producer.files import FileTask, plan_files
from producer.inbox import deliver_finished, deliver_job, run_inbox
from producer.jobs import JobBuilder
from producer.schedule import InboxEntry
from store import defaults
from store.config import Settings
from store.jobstore import CorruptRecord, JobStore
from store.keys import InboxKeys, JobKeys
from store.queues import queue_length
from store.runs import DELIVERED, FAILED, NOTHING_NEW, SKIPPED, SUBMITTED, InboxRun

pytest_plugins = ["distributed_support"]


@pytest.fixture
def store(redis_server):
    redis_server.client().flushdb()
    # Nobody consumes this queue: submitted runs stay in flight.
    return JobStore.from_settings(Settings(redis_url=redis_server.url, queue="nobody"))


@pytest.fixture
def entry(tmp_path) -> InboxEntry:
    (tmp_path / "inbox").mkdir()
    (tmp_path / "inbox" / "a.txt").write_text("Hello there.\n", encoding="utf-8")
    # settle=0: the files of these tests are taken as soon as they are written (see below)
    return InboxEntry("docs", str(tmp_path / "inbox"), str(tmp_path / "outbox"), 60, settle=0)


def test_trimming_the_runs_keeps_those_in_flight(store, entry, monkeypatch):
    monkeypatch.setattr(defaults, "RUNS_KEPT", 2)
    submitted = run_inbox(store, entry)
    assert submitted.state == SUBMITTED
    for _ in range(3):
        assert run_inbox(store, entry).state == NOTHING_NEW  # a.txt is still in flight
    runs = store.runs.list("docs")
    assert len(runs) == 2 and submitted in runs


#: Records of a tampered runs hash: not JSON, not an object, fields missing, unknown or of
#: the wrong type, or naming another entry.
CORRUPT_RUNS = {
    "0000000000001-0000": "not json",
    "0000000000001-0001": "[1]",
    "0000000000001-0002": '{"run_id": 1}',
    "0000000000001-0003": '{"run_id": "0000000000001-0003", "inbox": "docs", "started": 1, '
    '"state": "submitted", "files": 5, "job": "j"}',
    "0000000000001-0004": '{"run_id": "0000000000001-0004", "inbox": "docs", "started": "s", '
    '"state": "failed"}',
    "0000000000001-0005": '{"run_id": "0000000000001-0005", "inbox": "docs", "started": 1e300, '
    '"state": "failed"}',
    "0000000000001-0006": '{"run_id": "other", "inbox": "docs", "started": 1, "state": "failed"}',
    "0000000000001-0007": '{"run_id": "0000000000001-0007", "inbox": "docs", "started": 1, '
    '"state": "failed", "surprise": 1}',
    # the client writes a lone surrogate as the byte it escapes: 0xff is no UTF-8
    "0000000000001-0008": '{"run_id": "0000000000001-0008", "inbox": "docs", "started": 1, '
    '"state": "failed", "message": "\udcff"}',
    "0000000000001-0009": '{"run_id": "0000000000001-0009", "inbox": "docs", "started": 1, '
    '"state": "failed", "message": "\\udcff"}',
    "0000000000001-0010": '{"run_id": "0000000000001-0010", "inbox": "docs", "started": 1, '
    '"state": "delivered", "files": {"a.txt": "x"}, "delivered": 2}',
    "0000000000001-0011": "[" * 100_000,  # json.loads raises RecursionError, not ValueError
}


def test_a_corrupt_run_record_is_replaced_by_the_scan_and_the_valid_ones_kept(store, entry, caplog):
    submitted = run_inbox(store, entry)
    assert submitted.state == SUBMITTED
    store.client.hset(InboxKeys("docs").runs, mapping=CORRUPT_RUNS)
    runs, corrupt = store.runs.read("docs")
    assert runs == [submitted] and sorted(problem.run_id for problem in corrupt) == sorted(CORRUPT_RUNS)
    for run_id in CORRUPT_RUNS:
        with pytest.raises(CorruptRecord, match=f"^tq:inbox:docs:runs entry '{run_id}' is not a run record"):
            store.runs.get("docs", run_id)
    assert store.runs.list("docs") == [submitted]  # left out, logged
    assert run_inbox(store, entry).state == NOTHING_NEW  # a.txt is still in flight: not submitted again
    assert "tq:inbox:docs:runs entry '0000000000001-0000' is not a run record" in caplog.text
    runs, corrupt = store.runs.read("docs")
    assert not corrupt and submitted in runs
    replaced = {run.run_id: run for run in runs if run.run_id in CORRUPT_RUNS}
    assert sorted(replaced) == sorted(CORRUPT_RUNS)
    assert all(
        run.state == FAILED and "was replaced: tq:inbox:docs:runs entry" in run.message
        for run in replaced.values()
    )


def test_a_directory_named_as_a_translated_tree_is_an_inbox_directory_like_any(store, entry):
    """`translate` passes over `D.zh` beside `D` (its own earlier output); an inbox's outputs
    go to the outbox, so there both are directories of inputs."""
    for name in ("reports", "reports.zh"):
        (Path(entry.inbox) / name).mkdir()
        (Path(entry.inbox) / name / "b.txt").write_text("Good night.\n", encoding="utf-8")
    run = run_inbox(store, entry)
    assert sorted(run.files) == ["a.txt", "reports.zh/b.txt", "reports/b.txt"]


def test_a_file_vanishing_during_the_scan_is_skipped(store, entry, monkeypatch):
    inbox_dir = Path(entry.inbox)

    def listing_with_a_vanished_file(inputs, out, **options):
        tasks = plan_files(inputs, out, **options)
        return [*tasks, FileTask(inbox_dir / "gone.txt", Path(out) / "gone.txt")]

    monkeypatch.setattr(inbox, "plan_files", listing_with_a_vanished_file)
    run = run_inbox(store, entry)
    assert run.state == SUBMITTED and list(run.files) == ["a.txt"]
    assert run.skipped == {"gone.txt": "No such file or directory"}
    assert store.runs.list("docs") == [run]


def test_a_lock_lost_during_the_run_is_recorded_not_raised(store, entry, monkeypatch):
    submit = JobBuilder.submit

    def submit_after_the_lock_expired(*args, **kwargs):
        store.client.delete("tq:inbox:docs:lock")
        return submit(*args, **kwargs)

    monkeypatch.setattr(JobBuilder, "submit", submit_after_the_lock_expired)
    run = run_inbox(store, entry)  # releasing a lock that is not ours anymore must not raise
    assert run.state == SUBMITTED and "the lock expired during the run" in run.message
    assert store.runs.list("docs") == [run]


def test_a_lock_within_the_longest_timeout_is_left_to_its_run(store, entry):
    """Another scheduler's live run, with a longer timeout than this one's, may hold it: cut
    short, its entry was taken by a second run while the first went on."""
    lock = InboxKeys("docs").lock
    store.client.set(lock, "another scheduler's run", ex=600)  # its TRANSQUEUE_INBOX_LOCK_TIMEOUT
    assert store.settings.inbox_lock_timeout < 600
    assert run_inbox(store, entry).state == SKIPPED
    assert store.client.pttl(lock) > store.settings.inbox_lock_timeout * 1000
    store.client.delete(lock)


@pytest.mark.parametrize("ttl", [None, 10 * 365 * 24 * 3600])
def test_a_lock_set_without_expiry_or_for_years_blocks_the_entry_one_timeout_at_most(store, entry, ttl):
    lock = InboxKeys("docs").lock
    store.client.set(lock, "not a run's token", ex=ttl)  # tampered: no run ever frees it
    assert run_inbox(store, entry).state == SKIPPED
    assert 0 < store.client.pttl(lock) <= store.settings.inbox_lock_timeout * 1000
    store.client.delete(lock)
    store.client.hset(lock, "x", "y")  # not even a string: the same
    assert run_inbox(store, entry).state == SKIPPED
    assert 0 < store.client.pttl(lock) <= store.settings.inbox_lock_timeout * 1000


def test_a_run_longer_than_the_lock_timeout_keeps_its_lock_and_releases_it(redis_server, entry, monkeypatch):
    """The keeper thread extends the lock while the run goes on: held by this run's token
    for more than a whole timeout of a busy run, gone once the run ends."""
    redis_server.client().flushdb()
    timeout = 2  # seconds (TRANSQUEUE_INBOX_LOCK_TIMEOUT): extended every 2/3 s
    store = JobStore.from_settings(
        Settings(redis_url=redis_server.url, queue="nobody", inbox_lock_timeout=timeout)
    )
    lock_key = InboxKeys("docs").lock
    submit = JobBuilder.submit
    seen: list[str | None] = []

    def submit_after_a_long_wait(*args, **kwargs):
        # The run is busy here (a real one would be hashing or reading a big inbox): the lock,
        # taken before, is watched until more than one timeout has gone by.
        busy = time.monotonic()
        seen.append(store.client.get(lock_key))
        while time.monotonic() - busy < 1.5 * timeout:
            seen.append(store.client.get(lock_key))
            time.sleep(0.05)
        return submit(*args, **kwargs)

    # The real submit, made to wait: nothing real keeps a run busy for a chosen time.
    monkeypatch.setattr(JobBuilder, "submit", submit_after_a_long_wait)
    run = run_inbox(store, entry)
    token = seen[0]
    assert token is not None and set(seen) == {token}  # held by this run all along
    assert run.state == SUBMITTED and not run.message  # no lock problem noted
    assert store.client.exists(lock_key) == 0  # released at the end
    assert run_inbox(store, entry).state == NOTHING_NEW  # the next run takes it


def finish(store: JobStore, job_id: str) -> None:
    """Settle every sentence of a job as a worker would (nobody consumes its chunks here)."""
    for slot in range(store.info(job_id).total):
        store.record(job_id, slot, f"s{slot}", f"译{slot}", fingerprint="f", hit=False)


def test_a_finished_job_is_delivered_to_the_configured_outbox_only(store, entry, tmp_path):
    run = run_inbox(store, entry)
    finish(store, run.job)
    store.client.hset(JobKeys(run.job).meta, "out", str(tmp_path / "elsewhere"))  # tampered
    deliver_job(store, run.job, {"docs": entry})
    assert (Path(entry.outbox) / "a.txt").read_text(encoding="utf-8") == "译0\n"
    assert not (tmp_path / "elsewhere").exists()
    assert store.runs.list("docs")[-1].state == DELIVERED


def test_a_finished_job_whose_delivery_was_lost_is_delivered_by_the_catch_up(store, entry, monkeypatch):
    run = run_inbox(store, entry)
    finish(store, run.job)  # and its deliver task never came
    monkeypatch.setattr(inbox, "plan_files", None)  # no scan: the inbox is not even listed
    deliver_finished(store, entry)
    assert (Path(entry.outbox) / "a.txt").read_text(encoding="utf-8") == "译0\n"
    delivered = store.runs.get("docs", run.run_id)
    assert delivered.state == DELIVERED and store.runs.list("docs") == [delivered]  # no new run
    assert store.runs.seen("docs") == run.files
    assert store.client.exists(InboxKeys("docs").lock) == 0  # released


def test_the_catch_up_with_nothing_pending_reads_the_runs_only(store, entry, monkeypatch):
    finish(store, run_inbox(store, entry).job)
    deliver_finished(store, entry)  # delivered
    (Path(entry.inbox) / "b.txt").write_text("Good night.\n", encoding="utf-8")
    in_flight = run_inbox(store, entry)  # its job not finished
    assert in_flight.state == SUBMITTED and list(in_flight.files) == ["b.txt"]
    records = {key: store.client.dump(key) for key in store.client.scan_iter("tq:inbox:*")}
    (Path(entry.outbox) / "a.txt").unlink()
    for name in ("plan_files", "_EntryLock", "write_document"):  # no scan, no lock, no write
        monkeypatch.setattr(inbox, name, None)
    deliver_finished(store, entry)
    assert {key: store.client.dump(key) for key in store.client.scan_iter("tq:inbox:*")} == records
    assert not any(Path(entry.outbox).iterdir())  # the delivered run is not written again


def test_the_catch_up_and_a_deliver_task_racing_write_the_job_once(store, entry, monkeypatch):
    run = run_inbox(store, entry)
    finish(store, run.job)
    writes = []
    write_document = inbox.write_document
    monkeypatch.setattr(inbox, "write_document", lambda *args: writes.append(write_document(*args)))
    ended = inbox._ended

    def delivered_meanwhile(*args):  # the deliver task takes the lock first, and delivers
        found = ended(*args)
        deliver_job(store, run.job, {"docs": entry})
        return found

    monkeypatch.setattr(inbox, "_ended", delivered_meanwhile)
    deliver_finished(store, entry)
    assert len(writes) == 1 and store.runs.get("docs", run.run_id).state == DELIVERED


def test_the_catch_up_leaves_a_held_lock_for_its_next_check(store, entry):
    run = run_inbox(store, entry)
    finish(store, run.job)
    crashed = store.client.lock(InboxKeys("docs").lock, timeout=60)  # a crashed run's, say
    assert crashed.acquire(blocking=False)
    started = time.monotonic()
    deliver_finished(store, entry)
    assert time.monotonic() - started < 1  # not waited on
    assert store.runs.get("docs", run.run_id).state == SUBMITTED and not Path(entry.outbox).exists()
    crashed.release()  # it expired
    deliver_finished(store, entry)
    assert store.runs.get("docs", run.run_id).state == DELIVERED


def test_the_catch_up_fails_a_run_whose_job_id_was_tampered_with(store, entry):
    run = run_inbox(store, entry)
    store.runs.save(dataclasses.replace(run, job="../x"))
    deliver_finished(store, entry)
    failed = store.runs.get("docs", run.run_id)
    assert failed.state == FAILED and "job id '../x' is not valid" in failed.message


def test_a_document_record_with_a_nul_in_its_target_fails_its_run_not_the_catch_up(store, entry):
    run = run_inbox(store, entry)
    finish(store, run.job)
    key = JobKeys(run.job).docs
    record = json.loads(store.client.hget(key, "0"))
    store.client.hset(key, "0", json.dumps({**record, "target": "x\u0000.txt"}))  # tampered
    deliver_finished(store, entry)  # raised ValueError (embedded null byte), the run left submitted
    failed = store.runs.get("docs", run.run_id)
    assert failed.state == FAILED and f"{key} field 0" in failed.message
    assert not Path(entry.outbox).exists()


@pytest.mark.parametrize("field", ["x", "\u00b2", "9" * 5000])
def test_a_document_number_that_is_no_number_fails_its_run_not_every_scan(store, entry, field):
    run = run_inbox(store, entry)
    finish(store, run.job)
    key = JobKeys(run.job).docs
    store.client.hset(key, field, store.client.hget(key, "0"))  # tampered
    (Path(entry.inbox) / "b.txt").write_text("Good night.\n", encoding="utf-8")
    later = run_inbox(store, entry)  # raised ValueError, at each scan, before it looked at b.txt
    assert later.state == SUBMITTED and "b.txt" in later.files
    failed = store.runs.get("docs", run.run_id)
    assert failed.state == FAILED and f"{key} field" in failed.message
    assert not Path(entry.outbox).exists()


@pytest.mark.parametrize(
    ("part", "change"),
    [
        ("layouts", lambda layout: {**layout, "parts": [*layout["parts"], [0, 1]]}),  # AttributeError
        ("docs", lambda record: {**record, "name": ""}),  # ValueError of os.path.relpath
    ],
)
def test_a_stored_record_that_failed_rendering_fails_its_run_not_every_scan(store, entry, part, change):
    run = run_inbox(store, entry)
    finish(store, run.job)
    key = getattr(JobKeys(run.job), part)
    field = "0" if part == "docs" else "0:0"
    store.client.hset(key, field, json.dumps(change(json.loads(store.client.hget(key, field)))))
    (Path(entry.inbox) / "b.txt").write_text("Good night.\n", encoding="utf-8")
    later = run_inbox(store, entry)  # raised, at each scan, before it looked at b.txt
    assert later.state == SUBMITTED and "b.txt" in later.files
    failed = store.runs.get("docs", run.run_id)  # failed, or delivered without a.txt
    assert failed.state == FAILED or "a.txt" in failed.message, failed
    assert not (Path(entry.outbox) / "a.txt").exists()


def test_a_run_naming_another_runs_job_is_failed_not_delivered(store, entry):
    first = run_inbox(store, entry)
    finish(store, first.job)
    deliver_finished(store, entry)
    (Path(entry.inbox) / "b.txt").write_text("Good night.\n", encoding="utf-8")
    second = run_inbox(store, entry)
    store.runs.save(dataclasses.replace(second, job=first.job))  # tampered: the first run's job
    deliver_finished(store, entry)
    failed = store.runs.get("docs", second.run_id)
    assert failed.state == FAILED and f"is not the job of run {second.run_id}" in failed.message
    assert "b.txt" not in store.runs.seen("docs")  # tried again at the next run


def test_one_entry_failing_its_catch_up_does_not_hold_back_the_others(store, entry, monkeypatch, caplog):
    from producer import scheduler

    broken = dataclasses.replace(entry, name="broken")
    finish(store, run_inbox(store, entry).job)
    monkeypatch.setattr(scheduler, "configured_inboxes", lambda: {"broken": broken, "docs": entry})
    monkeypatch.setattr(scheduler, "process_store", lambda settings: store)

    def deliver_finished_but_broken(store, entry):  # an error no one foresaw, in one entry
        if entry.name == "broken":
            raise RuntimeError("unforeseen")
        deliver_finished(store, entry)

    monkeypatch.setattr(scheduler, "deliver_finished", deliver_finished_but_broken)
    scheduler.deliver_finished_inbox_jobs()  # raised, and "docs" was never caught up
    assert (Path(entry.outbox) / "a.txt").read_text(encoding="utf-8") == "译0\n"
    assert "inbox broken: the deliveries' catch-up failed" in caplog.text


def test_a_job_with_nothing_to_translate_is_sent_for_delivery_at_once(store, entry):
    # Finished at submit (no sentence, so no worker finishes it): the scan sends its delivery,
    # as a worker's last write would, instead of leaving it to the entry's next run.
    (Path(entry.inbox) / "a.txt").write_text("", encoding="utf-8")
    (Path(entry.inbox) / "code.md").write_text("```\nkept()\n```\n", encoding="utf-8")
    run = run_inbox(store, entry)
    assert run.state == SUBMITTED and store.info(run.job).finished
    assert queue_length(store.settings, store.settings.inbox_queue) == 1
    deliver_job(store, run.job, {"docs": entry})
    assert (Path(entry.outbox) / "a.txt").read_text(encoding="utf-8") == ""
    assert (Path(entry.outbox) / "code.md").read_text(encoding="utf-8") == "```\nkept()\n```\n"
    assert store.runs.get("docs", run.run_id).state == DELIVERED


def test_a_stored_target_outside_the_outbox_is_refused(store, entry, tmp_path):
    run = run_inbox(store, entry)
    finish(store, run.job)
    (record,) = store.documents(run.job)
    escaped = dataclasses.replace(record, target="../../escaped.jsonl")
    store.client.hset(JobKeys(run.job).docs, "0", escaped.to_json())
    deliver_job(store, run.job, {"docs": entry})
    (failed,) = store.runs.list("docs")
    assert failed.state == FAILED and "refusing to write outside" in failed.message
    assert not (tmp_path.parent / "escaped.jsonl").exists() and not Path(entry.outbox).exists()


def test_a_job_naming_an_inbox_that_is_not_configured_is_not_delivered(store, entry):
    run = run_inbox(store, entry)
    finish(store, run.job)
    deliver_job(store, run.job, {})
    assert store.runs.list("docs")[-1].state == SUBMITTED and not Path(entry.outbox).exists()


def test_the_delivered_hashes_hold_only_files_still_in_the_inbox(store, entry):
    finish(store, run_inbox(store, entry).job)
    assert run_inbox(store, entry).state == NOTHING_NEW  # it delivers the finished run first
    assert store.runs.list("docs")[0].state == DELIVERED
    assert set(store.runs.seen("docs")) == {"a.txt"}
    assert 0 < store.client.ttl(InboxKeys("docs").seen) <= defaults.INBOX_RECORDS_TTL
    assert 0 < store.client.ttl(InboxKeys("docs").runs) <= defaults.INBOX_RECORDS_TTL
    (Path(entry.inbox) / "a.txt").unlink()
    assert run_inbox(store, entry).state == NOTHING_NEW
    assert store.runs.seen("docs") == {}


def test_special_files_in_the_inbox_are_skipped_unopened(store, entry):
    inbox_dir = Path(entry.inbox)
    os.mkfifo(inbox_dir / "pipe.txt")
    (inbox_dir / "zero.md").symlink_to("/dev/zero")
    run = run_inbox(store, entry)
    assert run.state == SUBMITTED and list(run.files) == ["a.txt"]
    assert run.skipped == {
        "pipe.txt": f"{inbox_dir / 'pipe.txt'}: not a regular file (a FIFO); not read",
        "zero.md": f"{inbox_dir / 'zero.md'}: not a regular file (a character device); not read",
    }


def test_compressed_tables_are_delivered_compressed_with_their_columns_translated(store, tmp_path):
    inbox_dir = tmp_path / "tables"
    inbox_dir.mkdir()
    rows = 'id,body,note\r\n1,"Hello there, friend.",keep\r\n2,,"also, kept"\r\n'
    (inbox_dir / "rows.csv.gz").write_bytes(gzip.compress(rows.encode(), mtime=0))
    (inbox_dir / "t.parquet").write_bytes(b"PAR1")
    entry = InboxEntry("tables", str(inbox_dir), str(tmp_path / "outbox"), 60, columns=("body",), settle=0)
    run = run_inbox(store, entry)
    assert run.state == SUBMITTED and list(run.files) == ["rows.csv.gz"]
    assert "t.parquet: not a readable Parquet file" in run.invalid["t.parquet"]
    assert [record.columns for record in store.documents(run.job)] == [("body",)]
    finish(store, run.job)
    deliver_job(store, run.job, {"tables": entry})
    delivered = gzip.decompress((tmp_path / "outbox" / "rows.csv.gz").read_bytes()).decode()
    assert delivered == 'id,body,note\r\n1,"译0",keep\r\n2,,"also, kept"\r\n'


def test_a_parquet_file_is_delivered_from_the_inbox_only_while_unchanged(store, tmp_path):
    inbox_dir, outbox = tmp_path / "tables", tmp_path / "outbox"
    inbox_dir.mkdir()
    pq.write_table(pa.table({"body": ["Hello there.", None], "n": [1, 2]}), inbox_dir / "t.parquet")
    entry = InboxEntry("pq", str(inbox_dir), str(outbox), 60, columns=("body",), settle=0)
    run = run_inbox(store, entry)
    assert run.state == SUBMITTED and list(run.files) == ["t.parquet"]
    finish(store, run.job)
    pq.write_table(pa.table({"body": ["Changed."], "n": [3]}), inbox_dir / "t.parquet")
    deliver_job(store, run.job, {"pq": entry})
    delivered = store.runs.get("pq", run.run_id)
    assert delivered.state == DELIVERED and not outbox.exists()
    assert f"{inbox_dir / 't.parquet'}: the Parquet file it was read from" in delivered.message
    assert re.search(
        r"t\.parquet has [\d,]+ bytes \(not delivered; submitted again at the next run\)$", delivered.message
    )
    again = run_inbox(store, entry)
    assert again.state == SUBMITTED and list(again.files) == ["t.parquet"]
    finish(store, again.job)
    deliver_job(store, again.job, {"pq": entry})
    table = pq.read_table(outbox / "t.parquet")
    assert table.column("body").to_pylist() == ["译0"] and table.column("n").to_pylist() == [3]
    assert run_inbox(store, entry).state == NOTHING_NEW


def test_an_output_the_outbox_refuses_fails_that_file_alone_and_the_scan_goes_on(store, entry):
    finish(store, run_inbox(store, entry).job)
    (Path(entry.outbox) / "a.txt").mkdir(parents=True)  # the target is a directory
    (Path(entry.inbox) / "b.txt").write_text("Good night.\n", encoding="utf-8")
    run = run_inbox(store, entry)  # delivers the first run, then scans
    first = store.runs.list("docs")[0]
    assert first.state == DELIVERED  # the reason, as fetch words it: not the temporary file's name
    assert first.message == (
        "a.txt: Is a directory (not delivered; written by a later run once the outbox takes it)"
    )
    assert run.state == SUBMITTED and list(run.files) == ["b.txt"]  # a.txt: not translated again


def test_a_file_name_that_is_not_utf8_is_skipped_and_the_others_submitted(store, entry):
    os.close(os.open(os.fsencode(entry.inbox) + b"/caf\xe9.txt", os.O_CREAT | os.O_WRONLY))
    run = run_inbox(store, entry)
    assert run.state == SUBMITTED and list(run.files) == ["a.txt"]
    assert run.skipped == {"caf\\udce9.txt": "the file name is not UTF-8"}


def test_a_run_is_recorded_before_its_job_is_queued(store, entry, monkeypatch):
    recorded = []
    submit = JobBuilder.submit

    def submit_noting_the_record(builder, **kwargs):
        recorded.extend(run.job for run in store.runs.list("docs") if run.state == SUBMITTED)
        return submit(builder, **kwargs)

    monkeypatch.setattr(JobBuilder, "submit", submit_noting_the_record)
    run = run_inbox(store, entry)
    assert recorded == [run.job]  # a crash from here on cannot submit a.txt twice


def test_an_older_job_never_overwrites_the_output_of_a_newer_version(store, entry):
    first = run_inbox(store, entry)
    (Path(entry.inbox) / "a.txt").write_text("Hello again.\n", encoding="utf-8")
    second = run_inbox(store, entry)
    assert second.state == SUBMITTED and list(second.files) == ["a.txt"]
    finish(store, second.job)
    deliver_job(store, second.job, {"docs": entry})
    finish(store, first.job)
    deliver_job(store, first.job, {"docs": entry})
    assert (Path(entry.outbox) / "a.txt").read_text(encoding="utf-8") == "译0\n"  # the second's
    older = store.runs.get("docs", first.run_id)
    assert older.state == DELIVERED and "a later run submitted it again" in older.message
    assert store.runs.seen("docs")["a.txt"] == second.files["a.txt"]


def test_a_file_found_invalid_is_submitted_once_its_entry_is_fixed(store, tmp_path):
    inbox_dir = tmp_path / "tables"
    inbox_dir.mkdir()
    (inbox_dir / "t.csv").write_text("id,body\r\n1,Hello there.\r\n")
    typo = InboxEntry("tables", str(inbox_dir), str(tmp_path / "outbox"), 60, columns=("bdy",), settle=0)
    run = run_inbox(store, typo)
    assert "no column 'bdy'" in run.invalid["t.csv"]
    assert run_inbox(store, typo).state == NOTHING_NEW  # not retried while the entry is unchanged
    fixed = dataclasses.replace(typo, columns=("body",))
    run = run_inbox(store, fixed)
    assert run.state == SUBMITTED and list(run.files) == ["t.csv"]


def test_a_delivered_file_is_translated_again_for_a_new_outbox_or_fields(store, entry, tmp_path):
    finish(store, run_inbox(store, entry).job)
    assert run_inbox(store, entry).state == NOTHING_NEW  # delivered, and nothing changed
    moved = dataclasses.replace(entry, outbox=str(tmp_path / "outbox2"))
    run = run_inbox(store, moved)
    assert run.state == SUBMITTED and list(run.files) == ["a.txt"]
    finish(store, run.job)
    assert run_inbox(store, moved).state == NOTHING_NEW
    assert (tmp_path / "outbox2" / "a.txt").read_text(encoding="utf-8") == "译0\n"
    assert run_inbox(store, dataclasses.replace(moved, reflow=True)).state == SUBMITTED


def test_records_from_before_the_settings_hash_translate_nothing_again(store, entry):
    content = hashlib.sha256((Path(entry.inbox) / "a.txt").read_bytes()).hexdigest()
    store.runs.mark_seen("docs", {"a.txt": content})  # as the code before it recorded a file
    assert run_inbox(store, entry).state == NOTHING_NEW


def set_mtime(path: Path, seconds_from_now: float) -> None:
    """Date a file's mtime (and atime) `seconds_from_now`, instead of sleeping."""
    when = time.time() + seconds_from_now
    os.utime(path, (when, when))


def test_a_file_is_taken_only_once_unchanged_for_the_settle_time(store, entry):
    settled = dataclasses.replace(entry, settle=InboxEntry.settle)  # the default: 3 s
    assert settled.settle == producer_defaults.INBOX_SETTLE_S == 3
    inbox_dir = Path(entry.inbox)
    set_mtime(inbox_dir / "a.txt", -10)
    (inbox_dir / "b.txt").write_text("Still being cop", encoding="utf-8")  # mtime: now
    (inbox_dir / "c.md").write_text("# Half\n", encoding="utf-8")
    set_mtime(inbox_dir / "c.md", -2)
    run = run_inbox(store, settled)
    assert run.state == SUBMITTED and list(run.files) == ["a.txt"] and run.invalid == {}
    assert set(run.skipped) == {"b.txt", "c.md"}
    assert re.fullmatch(r"deferred: changed 0\.\d s ago; taken once unchanged for 3 s", run.skipped["b.txt"])
    assert re.fullmatch(r"deferred: changed 2\.\d s ago; taken once unchanged for 3 s", run.skipped["c.md"])
    assert set(store.runs.settling("docs")) == {"b.txt", "c.md"}
    assert set(store.runs.seen("docs")) == set()  # nothing recorded against them

    (inbox_dir / "b.txt").write_text("Still being copied.\n", encoding="utf-8")
    set_mtime(inbox_dir / "b.txt", -3)
    set_mtime(inbox_dir / "c.md", -3)
    run = run_inbox(store, settled)
    assert run.state == SUBMITTED and sorted(run.files) == ["b.txt", "c.md"] and run.skipped == {}
    assert store.runs.settling("docs") == {}
    whole = hashlib.sha256(b"Still being copied.\n").hexdigest()
    assert run.files["b.txt"].startswith(f"{whole}:")  # the whole file, not its first part


def test_a_file_whose_mtime_is_ahead_of_the_clock_waits_the_settle_time_not_the_clock(store, entry):
    settled = dataclasses.replace(entry, settle=3)
    inbox_dir = Path(entry.inbox)
    (inbox_dir / "a.txt").unlink()
    ahead = inbox_dir / "ahead.txt"  # written on a host whose clock is an hour fast
    ahead.write_text("From the future.\n", encoding="utf-8")
    set_mtime(ahead, 3600)

    def one_scan_earlier(seconds: float) -> None:
        """Date the record the last scan left as if that scan ran `seconds` ago."""
        (record,) = store.runs.settling("docs").values()
        shape, _, since = record.rpartition(":")
        store.runs.keep_settling("docs", {"ahead.txt": f"{shape}:{int(since) - int(seconds * 1e9)}"})

    first = run_inbox(store, settled)
    assert first.state == NOTHING_NEW and first.files == {}
    assert re.fullmatch(
        r"deferred: its mtime is 3,\d{3}\.\d s ahead of this clock; taken once unchanged for 3 s",
        first.skipped["ahead.txt"],
    )
    assert run_inbox(store, settled).skipped.keys() == {"ahead.txt"}  # unchanged, but not for 3 s yet
    one_scan_earlier(2)
    assert run_inbox(store, settled).skipped.keys() == {"ahead.txt"}
    one_scan_earlier(3)
    ahead.write_text("From the future, still growing.\n", encoding="utf-8")
    set_mtime(ahead, 3600)
    assert run_inbox(store, settled).skipped.keys() == {"ahead.txt"}  # changed: waits anew
    one_scan_earlier(3)
    run = run_inbox(store, settled)
    assert run.state == SUBMITTED and list(run.files) == ["ahead.txt"] and run.skipped == {}
    # taken, its record is kept while its mtime is ahead: each later scan finds it settled,
    # never deferred again (it was listed as deferred every other run, its job in flight)
    assert set(store.runs.settling("docs")) == {"ahead.txt"}
    for _ in range(2):
        again = run_inbox(store, settled)
        assert (again.state, again.skipped) == (NOTHING_NEW, {})
    finish(store, run.job)
    again = run_inbox(store, settled)  # delivers it, then finds it unchanged
    assert (again.state, again.skipped) == (NOTHING_NEW, {})
    assert store.runs.get("docs", run.run_id).state == DELIVERED
    set_mtime(ahead, -3)  # the clock caught up: the record is no longer needed
    assert run_inbox(store, settled).skipped == {} and store.runs.settling("docs") == {}


def test_names_of_files_in_progress_are_passed_over(store, entry):
    inbox_dir = Path(entry.inbox)
    (inbox_dir / ".rsync-partial").mkdir()
    names = [
        ".a.txt.Xy12Qz",  # rsync's temporary file
        ".draft.txt",
        ".rsync-partial/b.txt",  # rsync --partial-dir
        "c.txt.part",
        "d.jsonl.partial",
        "e.md.tmp",
        "f.csv.crdownload",
        "g.txt~",
    ]
    for name in names:
        (inbox_dir / name).write_text("Not yet.\n", encoding="utf-8")
    run = run_inbox(store, entry)
    assert run.state == SUBMITTED and list(run.files) == ["a.txt"]
    assert (run.skipped, run.invalid) == ({}, {})


def test_a_run_record_whose_entry_name_is_not_utf8_is_dropped_by_the_scan(store, entry):
    submitted = run_inbox(store, entry)
    store.client.hset(InboxKeys("docs").runs, "0000000000001-\udcff", "{}")  # the byte 0xff
    runs, (problem,) = store.runs.read("docs")
    assert runs == [submitted] and "'0000000000001-\\udcff' is not a run record" in str(problem)
    assert run_inbox(store, entry).state == NOTHING_NEW
    runs, corrupt = store.runs.read("docs")
    assert not corrupt and submitted in runs
    assert "0000000000001-\udcff" not in store.client.hkeys(InboxKeys("docs").runs)


def invalid_now(store: JobStore, name: str = "docs") -> dict[str, str]:
    """File name -> error of the files the entry lists as invalid now (none corrupt)."""
    files, corrupt = store.runs.read_invalid(name)
    assert not corrupt
    return {file: record.error for file, record in files.items()}


def test_each_run_renews_the_expiry_of_the_delivered_and_invalid_files(store, entry):
    """A file delivered or found invalid long ago is remembered as long as the entry runs:
    the hashes of delivered and invalid files expired 90 days after their last change, even
    while the entry ran every minute, and every file was then submitted or parsed again."""
    finish(store, run_inbox(store, entry).job)
    (Path(entry.inbox) / "bad.txt").write_bytes(b"Hello\n\xff there.\n")
    assert run_inbox(store, entry).state == NOTHING_NEW  # a.txt delivered, bad.txt invalid
    keys = InboxKeys("docs")
    for key in (keys.seen, keys.invalid, keys.runs):
        store.client.expire(key, 100)  # as if their last change were long ago
    assert run_inbox(store, entry).state == NOTHING_NEW
    assert all(store.client.ttl(key) > 100 for key in (keys.seen, keys.invalid, keys.runs))


def test_an_invalid_file_stays_listed_until_it_parses_or_leaves_the_inbox(store, entry, monkeypatch):
    monkeypatch.setattr(defaults, "RUNS_KEPT", 1)
    (Path(entry.inbox) / "a.txt").unlink()
    bad = Path(entry.inbox) / "bad.txt"
    bad.write_bytes(b"Hello\n\xff there.\n")
    run = run_inbox(store, entry)
    assert run.state == NOTHING_NEW and list(run.invalid) == ["bad.txt"]
    assert invalid_now(store) == run.invalid
    assert 0 < store.client.ttl(InboxKeys("docs").invalid) <= defaults.INBOX_RECORDS_TTL
    for _ in range(2):  # the run that found it is trimmed: the entry still lists the file
        assert run_inbox(store, entry).state == NOTHING_NEW
    assert all(not r.invalid for r in store.runs.list("docs")) and invalid_now(store) == run.invalid
    bad.write_text("Hello there again.\n", encoding="utf-8")  # fixed: it parses
    run = run_inbox(store, entry)
    assert run.state == SUBMITTED and list(run.files) == ["bad.txt"] and invalid_now(store) == {}
    bad.write_bytes(b"\xff\n")
    assert list(run_inbox(store, entry).invalid) == ["bad.txt"] and list(invalid_now(store)) == ["bad.txt"]
    bad.unlink()
    assert run_inbox(store, entry).state == NOTHING_NEW and invalid_now(store) == {}


def test_an_older_version_delivered_later_leaves_the_newer_invalid_one_listed(store, entry):
    first = run_inbox(store, entry)
    (Path(entry.inbox) / "a.txt").write_bytes(b"\xff\n")
    assert list(run_inbox(store, entry).invalid) == ["a.txt"]
    finish(store, first.job)
    assert run_inbox(store, entry).state == NOTHING_NEW  # delivers the first version, then scans
    assert store.runs.get("docs", first.run_id).state == DELIVERED
    assert list(invalid_now(store)) == ["a.txt"]  # what the inbox holds now is still invalid


def test_a_corrupt_invalid_file_record_is_named_and_its_file_tried_again(store, entry, caplog):
    (Path(entry.inbox) / "bad.txt").write_bytes(b"\xff\n")
    found = run_inbox(store, entry).invalid
    key = InboxKeys("docs").invalid
    store.client.hset(key, mapping={"bad.txt": "not json", "gone.txt": '{"digest": 1}', "x\udcff": "{}"})
    files, corrupt = store.runs.read_invalid("docs")
    assert files == {} and [problem.entry for problem in corrupt] == ["bad.txt", "gone.txt", "x\udcff"]
    assert str(corrupt[2]).endswith(
        "entry 'x\\udcff' is not an invalid-file record of this transqueue (the file name is not UTF-8)"
    )
    assert str(corrupt[0]).startswith(
        "tq:inbox:docs:invalid entry 'bad.txt' is not an invalid-file record of this transqueue ("
    )
    assert run_inbox(store, entry).invalid == found  # tried again, found invalid again
    assert "tq:inbox:docs:invalid entry 'gone.txt' is not an invalid-file record" in caplog.text
    assert invalid_now(store) == found


def test_records_of_the_previous_version_read_as_they_were(store, entry):
    old = {
        "run_id": "0000000000001-aaaa",
        "inbox": "docs",
        "started": 1.0,
        "state": "delivered",
        "files": {"a.txt": "x"},
        "invalid": {},
        "skipped": {},
        "job": "abc",
        "dead": 0,
        "finished": 2.0,
        "message": "",
    }  # no count of files delivered, and no invalid-file hash
    store.client.hset(InboxKeys("docs").runs, old["run_id"], json.dumps(old))
    assert store.runs.read("docs") == ([InboxRun(**old)], []) and InboxRun(**old).delivered is None
    assert store.runs.read_invalid("docs") == ({}, [])


def test_a_delivered_run_counts_the_files_delivered(store, entry):
    (Path(entry.inbox) / "b.txt").write_text("Good night.\n", encoding="utf-8")
    run = run_inbox(store, entry)
    assert run.delivered is None
    finish(store, run.job)
    (Path(entry.outbox) / "a.txt").mkdir(parents=True)  # the outbox refuses a.txt
    run_inbox(store, entry)
    delivered = store.runs.get("docs", run.run_id)
    assert delivered.state == DELIVERED and len(delivered.files) == 2 and delivered.delivered == 1


def test_a_corrupt_run_record_is_logged_with_the_controls_it_quotes_escaped(store, caplog):
    """Python's TypeError quotes an unexpected field name as it is: the scheduler's log line
    (and the failed run that replaces the record) show it escaped."""
    record = json.dumps({"run_id": "0000000000001-0000", "\x1b]0;pwned\x07": 1})
    store.client.hset(InboxKeys("docs").runs, "0000000000001-0000", record)
    assert store.runs.list("docs") == []
    assert "unexpected keyword argument '\\x1b]0;pwned\\x07'" in caplog.text and "\x1b" not in caplog.text


def test_a_translation_longer_than_the_model_writes_fails_its_run_not_the_others(store, entry):
    """A sentence repeated in a file is one slot, rendered once per segment: a huge stored
    translation of it was delivered as many times over."""
    (Path(entry.inbox) / "a.txt").write_text("Hello there. " * 50 + "\n", encoding="utf-8")
    run = run_inbox(store, entry)
    finish(store, run.job)
    key = JobKeys(run.job).results
    store.client.hset(key, "0", "x" * 100_000)  # tampered: the delivery wrote 5 MB
    (Path(entry.inbox) / "b.txt").write_text("Good night.\n", encoding="utf-8")
    later = run_inbox(store, entry)
    finish(store, later.job)
    deliver_finished(store, entry)
    failed = store.runs.get("docs", run.run_id)
    assert failed.state == FAILED and f"{key} field 0 holds a translation of 100000 bytes" in failed.message
    # the catch-up before the later scan failed the run: a.txt was submitted again
    assert sorted(later.files) == ["a.txt", "b.txt"]
    assert store.runs.get("docs", later.run_id).state == DELIVERED
    assert (Path(entry.outbox) / "a.txt").stat().st_size < 1000


def refused_now(store: JobStore, name: str = "docs") -> dict[str, str]:
    """File name -> error of the files whose output the entry's outbox refuses now (none corrupt)."""
    files, corrupt = store.runs.read_refused(name)
    assert not corrupt
    return {file: record.error for file, record in files.items()}


def refuse_a_txt(store: JobStore, entry: InboxEntry) -> tuple[InboxRun, Path]:
    """Submit and finish a.txt, put a directory in the place of its output, and run the entry:
    the delivery is refused. Returns the run that submitted it, and the directory."""
    first = run_inbox(store, entry)
    finish(store, first.job)
    blocking = Path(entry.outbox) / "a.txt"
    blocking.mkdir(parents=True)
    assert run_inbox(store, entry).state == NOTHING_NEW
    assert store.runs.get("docs", first.run_id).state == DELIVERED
    return first, blocking


def test_an_output_the_outbox_refuses_is_written_once_the_way_is_clear_never_translated_again(
    store, entry, caplog
):
    """A directory in the place of a.txt's output: every later run submitted a.txt again,
    translated it again, and had its output refused again."""
    first, blocking = refuse_a_txt(store, entry)
    for _ in range(2):
        assert run_inbox(store, entry).state == NOTHING_NEW
    assert store.job_ids() == [first.job]  # translated once
    assert refused_now(store) == {"a.txt": "a.txt: Is a directory"}
    assert store.runs.read_refused("docs")[0]["a.txt"].job == first.job
    assert "a.txt" not in store.runs.seen("docs")
    assert "docs: 1 file(s) not delivered, the outbox refuses them" in caplog.text
    assert 0 < store.client.ttl(InboxKeys("docs").refused) <= defaults.INBOX_RECORDS_TTL
    blocking.rmdir()
    run = run_inbox(store, entry)  # written from the first job's translation
    assert run.state == NOTHING_NEW and run.message == "a.txt: delivered, the outbox refused it before"
    assert blocking.read_text(encoding="utf-8") == "译0\n"
    assert store.job_ids() == [first.job] and refused_now(store) == {}
    assert store.runs.seen("docs") == first.files
    run = run_inbox(store, entry)
    assert run.state == NOTHING_NEW and not run.message


def test_a_refused_output_written_by_a_run_that_submits_stays_in_that_run_s_message(store, entry):
    first, blocking = refuse_a_txt(store, entry)
    blocking.rmdir()
    (Path(entry.inbox) / "b.txt").write_text("Good night.\n", encoding="utf-8")
    run = run_inbox(store, entry)
    assert run.state == SUBMITTED and list(run.files) == ["b.txt"]
    finish(store, run.job)
    deliver_finished(store, entry)
    delivered = store.runs.get("docs", run.run_id)
    assert (
        delivered.state == DELIVERED and delivered.message == "a.txt: delivered, the outbox refused it before"
    )
    assert blocking.read_text(encoding="utf-8") == "译0\n"


def test_a_refused_file_that_changes_is_translated_again_and_one_that_leaves_is_forgotten(store, entry):
    first, _ = refuse_a_txt(store, entry)
    (Path(entry.inbox) / "a.txt").write_text("Hello again.\n", encoding="utf-8")
    second = run_inbox(store, entry)
    assert second.state == SUBMITTED and list(second.files) == ["a.txt"] and refused_now(store) == {}
    finish(store, second.job)
    assert run_inbox(store, entry).state == NOTHING_NEW  # refused again: this version's record
    refused, _ = store.runs.read_refused("docs")
    assert refused["a.txt"].job == second.job and refused["a.txt"].digest == second.files["a.txt"]
    (Path(entry.inbox) / "a.txt").unlink()
    assert run_inbox(store, entry).state == NOTHING_NEW and refused_now(store) == {}


def cleared_then_translated_again(store: JobStore, entry: InboxEntry, blocking: Path) -> None:
    """Remove the directory in the place of a.txt's output: the next run submits a.txt again
    (its refusal forgotten), and once that job is done the run after writes it there."""
    blocking.rmdir()
    run = run_inbox(store, entry)
    assert run.state == SUBMITTED and list(run.files) == ["a.txt"] and refused_now(store) == {}
    finish(store, run.job)
    run_inbox(store, entry)
    assert blocking.read_text(encoding="utf-8") == "译0\n"


def test_a_refused_file_whose_translation_expired_is_submitted_again_once_the_way_is_clear(store, entry):
    first, blocking = refuse_a_txt(store, entry)
    store.discard(first.job)  # its results expired
    assert run_inbox(store, entry).state == NOTHING_NEW  # still in the way: not translated again
    assert refused_now(store) == {"a.txt": "a.txt: Is a directory"}
    cleared_then_translated_again(store, entry, blocking)


MALFORMED_LAYOUT = '{"segments": 5, "parts": []}'


def test_a_job_whose_records_cannot_be_rendered_is_submitted_again_not_taken_for_a_refusal(store, entry):
    """A stored layout that is not one (the job's own records, not the outbox): the file was
    remembered as refused and never translated again while the job lived."""
    first = run_inbox(store, entry)
    finish(store, first.job)
    store.client.hset(JobKeys(first.job).layouts, "0:0", MALFORMED_LAYOUT)
    again = run_inbox(store, entry)  # the delivery fails, then the scan submits a.txt again
    delivery = store.runs.get("docs", first.run_id)
    assert "stored document is malformed" in delivery.message
    assert delivery.message.endswith("(not delivered; submitted again at the next run)")
    assert refused_now(store) == {} and not (Path(entry.outbox) / "a.txt").exists()
    assert again.state == SUBMITTED and list(again.files) == ["a.txt"]
    finish(store, again.job)
    run_inbox(store, entry)
    assert (Path(entry.outbox) / "a.txt").read_text(encoding="utf-8") == "译0\n"


def test_a_refused_file_whose_job_cannot_be_rendered_any_more_is_submitted_again(store, entry):
    first, blocking = refuse_a_txt(store, entry)
    store.client.hset(JobKeys(first.job).layouts, "0:0", MALFORMED_LAYOUT)
    cleared_then_translated_again(store, entry, blocking)


def test_a_file_in_the_place_of_an_output_directory_keeps_its_outputs_until_it_goes(store, entry):
    (Path(entry.inbox) / "a.txt").unlink()
    (Path(entry.inbox) / "sub").mkdir()
    (Path(entry.inbox) / "sub" / "b.txt").write_text("Good night.\n", encoding="utf-8")
    first = run_inbox(store, entry)
    finish(store, first.job)
    blocking = Path(entry.outbox) / "sub"
    blocking.parent.mkdir()
    blocking.write_text("in the way\n", encoding="utf-8")
    for _ in range(2):  # the delivery, then a run that sees the file still in the way
        assert run_inbox(store, entry).state == NOTHING_NEW
        assert refused_now(store) == {
            "sub/b.txt": f"sub/b.txt: Not a directory ({blocking} exists and is not a directory)"
        }
    assert store.job_ids() == [first.job]
    blocking.unlink()
    assert run_inbox(store, entry).state == NOTHING_NEW
    assert (blocking / "b.txt").read_text(encoding="utf-8") == "译0\n" and refused_now(store) == {}


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in any directory")
def test_an_outbox_that_cannot_be_written_keeps_its_outputs_until_it_can(store, entry):
    first = run_inbox(store, entry)
    finish(store, first.job)
    outbox = Path(entry.outbox)
    outbox.mkdir()
    outbox.chmod(0o555)
    try:
        for _ in range(2):
            assert run_inbox(store, entry).state == NOTHING_NEW
            assert refused_now(store) == {"a.txt": "a.txt: Permission denied"}
    finally:
        outbox.chmod(0o755)
    assert store.job_ids() == [first.job]
    assert run_inbox(store, entry).state == NOTHING_NEW
    assert (outbox / "a.txt").read_text(encoding="utf-8") == "译0\n"


def test_a_refused_output_waits_while_its_directory_is_seen_not_writable(store, entry, monkeypatch):
    """The test above, where the scheduler runs as root (os.access made to say no): no write
    is tried while the directory's permissions say it would fail."""
    first, blocking = refuse_a_txt(store, entry)
    blocking.rmdir()
    outbox, access = Path(entry.outbox), os.access
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != outbox and access(path, mode))
    assert run_inbox(store, entry).state == NOTHING_NEW
    assert refused_now(store) == {"a.txt": "a.txt: Permission denied"} and not blocking.exists()
    monkeypatch.setattr(os, "access", access)
    assert run_inbox(store, entry).message == "a.txt: delivered, the outbox refused it before"
    assert blocking.read_text(encoding="utf-8") == "译0\n" and store.job_ids() == [first.job]


@pytest.mark.parametrize("field, value", [("job", "../x"), ("job", "otherjob"), ("job", None), ("digest", 5)])
def test_a_refused_file_record_tampered_with_has_its_file_submitted_again(store, entry, caplog, field, value):
    """A record that is not one is dropped at once; one naming no job of the entry once the
    way is clear: either way a.txt is translated again, and nothing written from elsewhere."""
    _, blocking = refuse_a_txt(store, entry)
    blocking.rmdir()
    key = InboxKeys("docs").refused
    record = json.loads(store.client.hget(key, "a.txt"))
    if value is None:
        del record[field]
    else:
        record[field] = value
    store.client.hset(key, "a.txt", json.dumps(record))
    run = run_inbox(store, entry)
    assert run.state == SUBMITTED and list(run.files) == ["a.txt"] and refused_now(store) == {}
    assert not blocking.exists()
    if field == "digest" or value is None:
        assert "tq:inbox:docs:refused entry 'a.txt' is not a refused-file record" in caplog.text
