"""producer.schedule: the inbox schedule file and the beat entries built from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from celery.schedules import crontab

from producer import defaults
from producer.schedule import CATCHUP_ENTRY, InboxEntry, ScheduleError, beat_schedule, load_schedule
from store.queues import CATCHUP_TASK, SCAN_TASK

TOML = """
[[inbox]]
name = "support"
inbox = "/data/in"
outbox = "/data/out"
schedule = "*/10 * * * *"
fields = ["text"]

[[inbox]]
name = "fast"
inbox = "/data/in2"
outbox = "/data/out2"
schedule = 30
reflow = true
settle = 0.5
"""


def test_toml_entries_become_beat_entries(tmp_path):
    path = tmp_path / "schedule.toml"
    path.write_text(TOML, encoding="utf-8")
    entries = load_schedule(path)
    assert entries[0] == InboxEntry("support", "/data/in", "/data/out", "*/10 * * * *", ("text",), False)
    assert entries[1].reflow and entries[1].schedule == 30
    assert (entries[0].settle, entries[1].settle) == (3, 0.5)  # the default, and the entry's own
    beat = beat_schedule(entries)
    assert set(beat) == {"inbox:support", "inbox:fast", CATCHUP_ENTRY}
    assert beat["inbox:support"]["task"] == SCAN_TASK
    assert beat["inbox:support"]["schedule"] == crontab.from_string("*/10 * * * *")
    assert beat["inbox:fast"]["schedule"] == 30.0
    assert beat["inbox:support"]["args"] == ["support"]  # a name: the scheduler knows the paths
    json.dumps(beat["inbox:fast"]["args"])  # the task argument travels as JSON


def test_the_beat_schedule_catches_up_on_lost_deliveries_every_minute(tmp_path):
    path = tmp_path / "schedule.toml"
    path.write_text(TOML, encoding="utf-8")
    catchup = beat_schedule(load_schedule(path))[CATCHUP_ENTRY]
    assert defaults.INBOX_CATCHUP_INTERVAL_S == 60
    # whatever the entries' own schedules (a daily one would deliver a lost job a day late);
    # no arguments: it delivers the entries of the scheduler's own schedule file
    assert catchup == {"task": CATCHUP_TASK, "schedule": 60.0, "args": [], "options": {"expires": 60.0}}
    assert beat_schedule(()) == {}  # nothing to catch up on without an entry


def test_the_deploy_schedule_loads_with_its_table_columns():
    entries = {e.name: e for e in load_schedule(Path(__file__).parents[1] / "deploy" / "schedule.toml")}
    assert entries["tables"].columns == ("body",) and entries["records"].fields == ("text",)
    assert (entries["articles"].settle, entries["tables"].settle) == (5, 3)


def test_json_schedule(tmp_path):
    path = tmp_path / "schedule.json"
    path.write_text(
        json.dumps({"inbox": [{"name": "a", "inbox": "i", "outbox": "o", "schedule": 5}]}), encoding="utf-8"
    )
    assert load_schedule(path)[0].schedule == 5


@pytest.mark.parametrize("data", [[{"name": "a", "inbox": "i", "outbox": "o", "schedule": 5}], {"inbox": 5}])
def test_entries_not_under_the_inbox_key_say_where_they_go(tmp_path, data):
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(
        ScheduleError, match=r"as a list under the key 'inbox' .*\{\"inbox\": \[\.\.\.\]\} in JSON"
    ):
        load_schedule(path)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"name": "a", "inbox": "i", "outbox": "o"}, "inbox entry 1: missing schedule"),
        ({"name": "a", "inbox": "i", "outbox": "o", "schedule": "* * *"}, "schedule '\\* \\* \\*'"),
        ({"name": "a", "inbox": "i", "outbox": "o", "schedule": "61 * * * *"}, "inbox entry 1"),
        ({"name": "a", "inbox": "i", "outbox": "o", "schedule": -1}, "above 0"),
        ({"name": "a", "inbox": "i", "outbox": "o", "schedule": float("nan")}, "above 0 .* not nan"),
        ({"name": "a", "inbox": "i", "outbox": "o", "schedule": float("inf")}, "at most 31,622,400"),
        ({"name": "a", "inbox": "i", "outbox": "o", "schedule": 1e15}, "at most 31,622,400"),
        ({"name": "a", "inbox": "i", "outbox": "o", "schedule": 10**400}, "too large to convert"),
        ({"name": "a", "inbox": "i", "outbox": "i/", "schedule": 1}, "outbox must differ"),
        ({"name": "a", "inbox": "i", "outbox": "./i", "schedule": 1}, "outbox must differ"),
        ({"name": "a", "inbox": "i", "outbox": "o", "schedule": 1, "color": 1}, "unknown keys"),
        ({"name": "a", "inbox": "i", "outbox": "i", "schedule": 1}, "outbox must differ"),
        ({"name": "a:runs", "inbox": "i", "outbox": "o", "schedule": 1}, "inbox name 'a:runs'"),
        ({"name": "a", "inbox": "i", "outbox": "o", "schedule": 1, "protect": ["(x"]}, "not a regular expr"),
        ({"name": "a", "inbox": "i", "outbox": "o", "schedule": 1, "protect": [3]}, "list of regular expr"),
        # a lone string must not be read as a list of its characters
        (
            {"name": "a", "inbox": "i", "outbox": "o", "schedule": 1, "protect": "TICKET"},
            "protect must be a list",
        ),
        (
            {"name": "a", "inbox": "i", "outbox": "o", "schedule": 1, "fields": "text"},
            "fields must be a list",
        ),
        (
            {"name": "a", "inbox": "i", "outbox": "o", "schedule": 1, "columns": "text"},
            "columns must be a list",
        ),
        (
            {"name": "a", "inbox": "i", "outbox": "o", "schedule": 1, "columns": [True]},
            "columns must be a list",
        ),
        (
            {"name": "a", "inbox": "i", "outbox": "o", "schedule": 1, "reflow": "no"},
            "reflow must be true or false",
        ),
        ({"name": "a", "inbox": 3, "outbox": "o", "schedule": 1}, "inbox must be a directory path"),
        *(
            ({"name": "a", "inbox": "i", "outbox": "o", "schedule": 1, "settle": settle}, message)
            for settle, message in [
                (-1, "settle must be a number of seconds from 0 to 86,400 \\(a day\\), not -1"),
                (86401, "not 86401"),
                (float("nan"), "not nan"),
                ("3", "not '3'"),
                (True, "not True"),
            ]
        ),
    ],
)
def test_bad_entries_name_file_and_entry(tmp_path, entry, message):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"inbox": [entry]}), encoding="utf-8")
    with pytest.raises(ScheduleError, match=message) as error:
        load_schedule(path)
    assert str(path) in str(error.value)


def test_the_deployed_example_protects_ticket_ids(tmp_path):
    entries = load_schedule(Path(__file__).parents[1] / "deploy" / "schedule.toml")
    assert entries[0].protect == (r"\b[A-Z]+-\d+\b",) and entries[1].protect == ()


def test_duplicate_names_and_bad_syntax(tmp_path):
    path = tmp_path / "s.json"
    entry = {"name": "a", "inbox": "i", "outbox": "o", "schedule": 1}
    path.write_text(json.dumps({"inbox": [entry, entry]}), encoding="utf-8")
    with pytest.raises(ScheduleError, match="used twice"):
        load_schedule(path)
    path.write_text("{", encoding="utf-8")
    with pytest.raises(ScheduleError, match="line 1 column 2"):
        load_schedule(path)


@pytest.mark.parametrize("second", ["o", "./o/", "o/sub"])
def test_two_entries_may_not_share_an_outbox(tmp_path, second):
    path = tmp_path / "s.json"
    entries = [
        {"name": "a", "inbox": "i", "outbox": "o", "schedule": 1},
        {"name": "b", "inbox": "i2", "outbox": second, "schedule": 1},
    ]
    path.write_text(json.dumps({"inbox": entries}), encoding="utf-8")
    with pytest.raises(ScheduleError, match=r"entries 1 \('a'\) and 2 \('b'\) write to the same outbox"):
        load_schedule(path)
    entries[1]["outbox"] = "o2"  # a sibling whose name starts the same is another directory
    path.write_text(json.dumps({"inbox": entries}), encoding="utf-8")
    assert [e.outbox for e in load_schedule(path)] == [os.path.abspath("o"), os.path.abspath("o2")]


def test_directories_are_held_absolute_as_a_job_stores_its_output(tmp_path, monkeypatch):
    """A relative outbox was stored as the job's output directory as it was, which `fetch`
    refuses (a stored path that is not absolute is tampered with); `~` was a directory named
    so, relative to the scheduler's working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = tmp_path / "s.json"
    entry = {"name": "a", "inbox": "in/../in2", "outbox": "~/out", "schedule": 1}
    path.write_text(json.dumps({"inbox": [entry]}), encoding="utf-8")
    [loaded] = load_schedule(path)
    assert (loaded.inbox, loaded.outbox) == (str(tmp_path / "in2"), str(tmp_path / "home" / "out"))


@pytest.mark.parametrize("inbox", ["o", "o/sub", "."])
def test_an_outbox_may_not_overlap_another_entrys_inbox(tmp_path, inbox):
    path = tmp_path / "s.json"
    entries = [
        {"name": "a", "inbox": "i", "outbox": "o", "schedule": 1},
        {"name": "b", "inbox": inbox, "outbox": "o2", "schedule": 1},
    ]
    path.write_text(json.dumps({"inbox": entries}), encoding="utf-8")
    with pytest.raises(
        ScheduleError, match=r"outbox of inbox entry 1 \('a', /\S*/o\) overlaps the inbox of entry 2"
    ):
        load_schedule(path)
    entries[1]["inbox"] = "i"  # two entries may read one inbox into outboxes of their own
    path.write_text(json.dumps({"inbox": entries}), encoding="utf-8")
    assert [e.inbox for e in load_schedule(path)] == [os.path.abspath("i")] * 2


def test_crontab_fields_split_on_any_whitespace_and_intervals_expire(tmp_path):
    path = tmp_path / "s.json"
    entries = [
        {"name": "a", "inbox": "i", "outbox": "o", "schedule": " 0  3\t* * * "},
        {"name": "b", "inbox": "i2", "outbox": "o2", "schedule": 30},
    ]
    path.write_text(json.dumps({"inbox": entries}), encoding="utf-8")
    beat = beat_schedule(load_schedule(path))
    assert beat["inbox:a"]["schedule"] == crontab.from_string("0 3 * * *")
    assert beat["inbox:a"]["options"] == {}  # a daily scan is never dropped for being late
    # a scan every 30 s that waited 30 s is superseded by the next: no backlog of scans
    assert beat["inbox:b"]["options"] == {"expires": 30.0}


def test_the_scheduler_reads_its_schedule_once_and_a_bad_one_is_a_one_line_error(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cli import main
    from producer.scheduler import schedule_of

    path = tmp_path / "s.json"
    path.write_text(json.dumps({"inbox": [{"name": "a", "inbox": "i", "outbox": "o", "schedule": 5}]}))
    first = schedule_of(str(path))
    path.write_text(json.dumps({"inbox": [{"name": "b", "inbox": "i", "outbox": "o", "schedule": 5}]}))
    assert schedule_of(str(path)) is first  # beat and the scans it sends agree until a restart
    monkeypatch.setenv("TRANSQUEUE_SCHEDULE", str(tmp_path / "missing.toml"))
    result = CliRunner().invoke(main, ["scheduler"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and "missing.toml" in result.output
    assert "Traceback" not in result.output and len(result.output.splitlines()) == 1


def test_the_scheduler_refuses_a_bad_bundle_at_start_in_one_line(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cli import main

    path = tmp_path / "s.json"
    path.write_text(json.dumps({"inbox": [{"name": "a", "inbox": "i", "outbox": "o", "schedule": 5}]}))
    monkeypatch.setenv("TRANSQUEUE_SCHEDULE", str(path))
    monkeypatch.setenv("TRANSQUEUE_BUNDLE", str(tmp_path / "nonexist"))
    result = CliRunner().invoke(main, ["scheduler"])
    assert result.exit_code == 1  # not started: every scan would have failed with a traceback
    assert result.output.startswith("Error: TRANSQUEUE_BUNDLE=") and "nonexist" in result.output
    assert "Traceback" not in result.output


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The arguments of each Celery worker the scheduler command would run, which runs none;
    credentials unchecked, TRANSQUEUE_SCHEDULE unset."""
    import cli.service

    runs: list[list[str]] = []
    monkeypatch.setattr(cli.service, "refuse_bad_credentials", lambda settings: None)
    monkeypatch.setattr(cli.service, "run_celery_worker", lambda app, args: runs.append(args))
    monkeypatch.delenv("TRANSQUEUE_SCHEDULE", raising=False)
    return runs


def test_a_scheduler_without_a_schedule_says_so_as_it_starts(started):
    from click.testing import CliRunner

    from cli import main

    result = CliRunner().invoke(main, ["scheduler", "--no-beat"])
    assert result.exit_code == 0 and started, result.output
    assert result.output.startswith("warning: TRANSQUEUE_SCHEDULE is not set: this scheduler scans no inbox")


def test_the_scheduler_refuses_a_beat_state_file_in_no_directory(tmp_path, started):
    from click.testing import CliRunner

    from cli import main

    state = tmp_path / "missing" / "beat"
    result = CliRunner().invoke(main, ["scheduler", "--schedule", str(state)])
    assert result.exit_code == 1 and not started  # beat would die at start, the scheduler run on
    assert f"Error: --schedule {state}: no such directory {state.parent}" in result.output
    assert "Traceback" not in result.output
    state.parent.mkdir()
    result = CliRunner().invoke(main, ["scheduler", "--schedule", str(state)])
    assert result.exit_code == 0 and f"--schedule={state}" in started[0], result.output


def test_a_stopping_scheduler_stops_waiting_for_redis():
    # the scheduler is a Celery worker with patient clients too: its stop (Celery's
    # worker_shutting_down) must end their waits as a translation worker's does; a process
    # of its own, since importing worker.tasks anywhere in it would connect the workers' handler
    code = (
        "import sys, producer.scheduler\n"
        "from celery import signals\n"
        "from store import connection\n"
        "assert 'worker.tasks' not in sys.modules\n"
        "signals.worker_shutting_down.send(sender='s@test', sig='SIGTERM', how='Warm', exitcode=0)\n"
        "sys.exit(0 if connection.STOPPING.is_set() else 1)\n"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
