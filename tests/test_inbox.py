"""producer.inbox on a real redis-server, without workers: run records, the lock, the scan."""

from __future__ import annotations

from pathlib import Path

import pytest

from producer import inbox
from producer.files import FileTask, plan_files
from producer.inbox import run_inbox
from producer.schedule import InboxEntry
from store import defaults
from store.config import Settings
from store.jobstore import JobStore
from store.runs import NOTHING_NEW, SUBMITTED

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
    return InboxEntry("docs", str(tmp_path / "inbox"), str(tmp_path / "outbox"), 60)


def test_trimming_the_runs_keeps_those_in_flight(store, entry, monkeypatch):
    monkeypatch.setattr(defaults, "RUNS_KEPT", 2)
    submitted = run_inbox(store, entry)
    assert submitted.state == SUBMITTED
    for _ in range(3):
        assert run_inbox(store, entry).state == NOTHING_NEW  # a.txt is still in flight
    runs = store.runs.list("docs")
    assert len(runs) == 2 and submitted in runs


def test_a_file_vanishing_during_the_scan_is_skipped(store, entry, monkeypatch):
    inbox_dir = Path(entry.inbox)

    def listing_with_a_vanished_file(inputs, out):
        tasks = plan_files(inputs, out)
        return [*tasks, FileTask(inbox_dir / "gone.txt", Path(out) / "gone.txt")]

    monkeypatch.setattr(inbox, "plan_files", listing_with_a_vanished_file)
    run = run_inbox(store, entry)
    assert run.state == SUBMITTED and list(run.files) == ["a.txt"]
    assert run.skipped == {"gone.txt": "No such file or directory"}
    assert store.runs.list("docs") == [run]


def test_a_lock_lost_during_the_run_is_recorded_not_raised(store, entry, monkeypatch):
    submit = inbox.submit

    def submit_after_the_lock_expired(*args, **kwargs):
        store.client.delete("tq:inbox:docs:lock")
        return submit(*args, **kwargs)

    monkeypatch.setattr(inbox, "submit", submit_after_the_lock_expired)
    run = run_inbox(store, entry)  # releasing a lock that is not ours anymore must not raise
    assert run.state == SUBMITTED and "the lock expired during the run" in run.message
    assert store.runs.list("docs") == [run]
