"""cli.service: `transqueue worker` runs the Celery pool it is told to run."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path

import pytest
from distributed_support import TRANSQUEUE_WORKER, Worker, wait_for

pytest_plugins = ["distributed_support"]


@pytest.mark.parametrize(("pool", "banner"), [("prefork", "prefork"), ("threads", "thread")])
def test_the_pool_flag_wins_over_the_configured_pool(redis_server, tmp_path, pool, banner):
    """TRANSQUEUE_POOL says solo; Celery would keep it for a --pool=prefork flag (its own
    default) unless `transqueue worker` configures the pool it was given."""
    env = {"TRANSQUEUE_REDIS_URL": redis_server.url, "TRANSQUEUE_POOL": "solo"}
    worker = Worker(f"{pool}-flag", env, tmp_path, TRANSQUEUE_WORKER, (f"--pool={pool}", "--concurrency=2"))
    try:
        worker.start()
        assert f"concurrency: 2 ({banner})" in worker.log_text()
    finally:
        worker.stop()


@pytest.mark.parametrize("command", ["worker", "scheduler"])
def test_a_bad_bundle_is_not_fixed_by_an_option_the_command_lacks(tmp_path, monkeypatch, command):
    # worker and scheduler take their bundle from TRANSQUEUE_BUNDLE alone: no --model advice
    from click.testing import CliRunner

    from cli import main

    path = tmp_path / "s.json"
    path.write_text(json.dumps({"inbox": [{"name": "a", "inbox": "i", "outbox": "o", "schedule": 5}]}))
    monkeypatch.setenv("TRANSQUEUE_SCHEDULE", str(path))
    monkeypatch.setenv("TRANSQUEUE_BUNDLE", str(tmp_path))
    result = CliRunner().invoke(main, [command])
    assert result.exit_code == 1 and "not a transqueue model bundle" in result.output
    assert "--model" not in result.output and "Traceback" not in result.output


def running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def children_of(pid: int) -> list[int]:
    """The processes whose parent is `pid`, found in each /proc/PID/stat.

    Not /proc/PID/task/PID/children, which kernels built without CONFIG_PROC_CHILDREN lack.
    """
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except (FileNotFoundError, ProcessLookupError):  # a process that has ended since
            continue
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    return children


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_scheduler_killed_outright_takes_its_beat_with_it(redis_server, tmp_path):
    """Beat runs in a child of the scheduler; orphaned by a SIGKILL it went on sending every
    scan, and each restart of the scheduler added one more beat."""
    schedule = tmp_path / "s.json"
    entry = {"name": "a", "inbox": str(tmp_path / "in"), "outbox": str(tmp_path / "out"), "schedule": 3600}
    schedule.write_text(json.dumps({"inbox": [entry]}), encoding="utf-8")
    env = {
        "TRANSQUEUE_REDIS_URL": redis_server.url,
        "TRANSQUEUE_SCHEDULE": str(schedule),
        "TRANSQUEUE_INBOX_QUEUE": "beat-test",
    }
    command = (sys.executable, "-c", "from cli import main; main()", "scheduler")
    scheduler = Worker("beat", env, tmp_path, command, (f"--schedule={tmp_path / 'beat'}",))
    try:
        scheduler.start()
        pid = scheduler.process.pid
        wait_for(lambda: "beat: Starting" in scheduler.log_text() and children_of(pid), "beat")
        (beat,) = children_of(pid)
        os.kill(pid, signal.SIGKILL)
        scheduler.process.wait(timeout=10)
        wait_for(lambda: not running(beat), "beat to end with its scheduler", timeout=10)
    finally:
        scheduler.kill()
        with contextlib.suppress(ProcessLookupError, AttributeError):  # a beat left over
            os.killpg(scheduler.process.pid, signal.SIGKILL)


def test_the_scheduler_takes_celery_s_short_option_for_beat_s_state(tmp_path, monkeypatch):
    """`-s FILE`, Celery's spelling, went on to Celery while the check looked at the default
    `./celerybeat-schedule`: a scheduler started so in a directory it cannot write in was
    refused, and a FILE in a missing directory was not checked."""
    from click.testing import CliRunner

    from cli import main

    monkeypatch.delenv("TRANSQUEUE_SCHEDULE", raising=False)
    state = tmp_path / "no-such-dir" / "beat"
    result = CliRunner().invoke(main, ["scheduler", "-s", str(state)])
    assert result.exit_code == 1, result.output
    assert f"--schedule {state}: no such directory {state.parent}" in result.output
