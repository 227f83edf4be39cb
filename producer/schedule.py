r"""Scheduled corpus jobs: the inbox entries of the TRANSQUEUE_SCHEDULE file, as beat entries.

The file is TOML (``*.toml``) or JSON (anything else), with a list of ``inbox`` tables::

    [[inbox]]
    name = "support"                 # unique; letters, digits, '_', '-': names the runs and lock
    inbox = "/data/inbox/support"    # scanned for .txt .md .jsonl .csv .tsv (also .gz, .zst) .parquet
    outbox = "/data/outbox/support"  # translations land here, mirrored as `transqueue translate`
    schedule = "*/10 * * * *"        # a crontab line (UTC), or seconds between runs (a number)
    fields = ["text"]                # optional: JSONL fields to translate
    columns = ["body"]               # optional: CSV/TSV/Parquet columns to translate
    reflow = false                   # optional: .txt hard-wrapped paragraphs
    protect = ['\b[A-Z]+-\d+\b']     # optional: text kept as is (ticket ids), as --protect
    settle = 3                       # optional: seconds a file must stay unchanged to be taken
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery.schedules import crontab

from producer import defaults
from producer.protect import ProtectError, compile_patterns
from store.keys import BadName, check_name
from store.queues import CATCHUP_TASK, SCAN_TASK

#: The longest interval a schedule may give in seconds (a year): beat cannot wait longer.
MAX_INTERVAL_S = 366 * 24 * 3600

#: The longest settle time an entry may give in seconds (a day): a file unchanged for that
#: long is not being written.
MAX_SETTLE_S = 24 * 3600


class ScheduleError(ValueError):
    """The schedule file is not valid; the message names the file and the entry."""


@dataclass(frozen=True)
class InboxEntry:
    """One scheduled inbox: where to look, where to write, and when."""

    name: str
    inbox: str
    outbox: str
    schedule: str | float
    fields: tuple[str, ...] = ()
    reflow: bool = False
    columns: tuple[str, ...] = ()
    protect: tuple[str, ...] = ()
    settle: float = defaults.INBOX_SETTLE_S

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InboxEntry:
        """An entry from one table of the schedule file."""
        return cls(
            name=data["name"],
            inbox=data["inbox"],
            outbox=data["outbox"],
            schedule=data["schedule"],
            fields=tuple(data.get("fields", ())),
            reflow=bool(data.get("reflow", False)),
            columns=tuple(str(column) for column in data.get("columns", ())),
            protect=tuple(data.get("protect", ())),
            settle=float(data.get("settle", defaults.INBOX_SETTLE_S)),
        )

    def celery_schedule(self) -> crontab | float:
        """The beat schedule: a crontab for a string (fields split on any whitespace, as
        cron does), seconds for a number."""
        if isinstance(self.schedule, str):
            return crontab.from_string(" ".join(self.schedule.split()))
        return float(self.schedule)


def load_schedule(path: str | Path) -> tuple[InboxEntry, ...]:
    """Read and check a schedule file; raise ScheduleError naming the file and the entry."""
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
        data = tomllib.loads(raw) if path.suffix == ".toml" else json.loads(raw)
    except (OSError, ValueError) as exc:  # TOMLDecodeError and JSONDecodeError say where
        raise ScheduleError(f"{path}: {exc}") from None
    tables = data.get("inbox") if isinstance(data, dict) else None
    if not isinstance(tables, list):
        raise ScheduleError(
            f"{path}: expected the entries as a list under the key 'inbox' ([[inbox]] tables in "
            'TOML, {"inbox": [...]} in JSON)'
        )
    entries = tuple(_entry(path, n, table) for n, table in enumerate(tables))
    names = [e.name for e in entries]
    for name in names:
        if names.count(name) > 1:
            raise ScheduleError(f"{path}: inbox name {name!r} is used twice")
    _check_outboxes(path, entries)
    return entries


def _check_outboxes(path: Path, entries: tuple[InboxEntry, ...]) -> None:
    """ScheduleError when two entries' outboxes are the same directory or one holds the
    other: their deliveries would write over each other's translations (two inboxes each
    holding ``a.txt``), every run of each saying it delivered; likewise when an entry's
    outbox and another entry's inbox overlap (its outputs read back as inputs, or written
    over them)."""
    outboxes = [Path(e.outbox).expanduser().resolve() for e in entries]
    inboxes = [Path(e.inbox).expanduser().resolve() for e in entries]
    for i, outbox in enumerate(outboxes):
        for j in range(i + 1, len(outboxes)):
            if _overlap(outbox, outboxes[j]):
                raise ScheduleError(
                    f"{path}: inbox entries {i + 1} ({entries[i].name!r}) and {j + 1} "
                    f"({entries[j].name!r}) write to the same outbox ({entries[i].outbox} and "
                    f"{entries[j].outbox}): their translations would overwrite each other"
                )
        for j, inbox in enumerate(inboxes):
            if j != i and _overlap(outbox, inbox):
                raise ScheduleError(
                    f"{path}: the outbox of inbox entry {i + 1} ({entries[i].name!r}, "
                    f"{entries[i].outbox}) overlaps the inbox of entry {j + 1} ({entries[j].name!r}, "
                    f"{entries[j].inbox}): its translations would be read back as inputs, or "
                    "written over them"
                )


def _overlap(a: Path, b: Path) -> bool:
    """Whether directories ``a`` and ``b`` are the same or one holds the other."""
    return a == b or a in b.parents or b in a.parents


def _entry(path: Path, n: int, table: object) -> InboxEntry:
    where = f"{path}: inbox entry {n + 1}"
    if not isinstance(table, dict):
        raise ScheduleError(f"{where}: expected a table")
    missing = [k for k in ("name", "inbox", "outbox", "schedule") if k not in table]
    if missing:
        raise ScheduleError(f"{where}: missing {', '.join(missing)}")
    known = {"name", "inbox", "outbox", "schedule", "fields", "reflow", "columns", "protect", "settle"}
    unknown = set(table) - known
    if unknown:
        raise ScheduleError(f"{where}: unknown keys {', '.join(sorted(unknown))}")
    try:
        check_name(table["name"], "inbox name")
    except BadName as exc:
        raise ScheduleError(f"{where}: {exc}") from None
    schedule = table["schedule"]
    if isinstance(schedule, bool) or not isinstance(schedule, str | int | float):
        raise ScheduleError(f"{where}: schedule must be a crontab string or seconds")
    for key in ("inbox", "outbox"):
        if not isinstance(table[key], str) or not table[key]:
            raise ScheduleError(f"{where}: {key} must be a directory path")
    if Path(table["inbox"]).expanduser().resolve() == Path(table["outbox"]).expanduser().resolve():
        raise ScheduleError(f"{where}: outbox must differ from inbox (outputs would be read back as inputs)")
    _check_list(where, table, "fields", "a list of field names", (str,))
    _check_list(where, table, "columns", "a list of column names or 0-based indexes", (str, int))
    _check_list(where, table, "protect", "a list of regular expressions", (str,))
    if not isinstance(table.get("reflow", False), bool):
        raise ScheduleError(f"{where}: reflow must be true or false")
    settle = table.get("settle", defaults.INBOX_SETTLE_S)
    if isinstance(settle, bool) or not isinstance(settle, int | float) or not 0 <= settle <= MAX_SETTLE_S:
        raise ScheduleError(
            f"{where}: settle must be a number of seconds from 0 to {MAX_SETTLE_S:,} (a day), not {settle!r}"
        )
    # absolute, as submit stores a job's output directory (`~` and a relative path taken
    # from the scheduler's home and working directory when it loads the file)
    directories = {key: os.path.abspath(os.path.expanduser(table[key])) for key in ("inbox", "outbox")}
    entry = InboxEntry.from_dict({**table, **directories})
    try:
        compile_patterns(entry.protect)
    except ProtectError as exc:
        raise ScheduleError(f"{where}: {exc}") from None
    try:
        when = entry.celery_schedule()
    except (ValueError, OverflowError) as exc:  # OverflowError: an int too large for a float
        raise ScheduleError(f"{where}: schedule {schedule!r}: {exc}") from None
    if isinstance(when, float) and not 0 < when <= MAX_INTERVAL_S:  # nan and inf fail too
        raise ScheduleError(
            f"{where}: schedule must be a number of seconds above 0 and at most {MAX_INTERVAL_S:,} "
            f"(a year), not {schedule!r}"
        )
    return entry


#: The beat entry of the deliveries' catch-up (`producer.inbox.deliver_finished`); an inbox
#: entry's beat entry is ``inbox:NAME``, so no inbox name can take it.
CATCHUP_ENTRY = "inbox-deliveries"


def beat_schedule(entries: tuple[InboxEntry, ...]) -> dict[str, dict[str, Any]]:
    """Celery `beat_schedule` with one scan task per inbox entry, and the catch-up of their
    deliveries every `defaults.INBOX_CATCHUP_INTERVAL_S` if there is any entry. A task sent
    every N seconds expires after N: when the scheduler falls behind (stopped, or a scan
    longer than the interval), the next one supersedes it instead of queueing behind it."""
    interval = defaults.INBOX_CATCHUP_INTERVAL_S
    catchup = {"task": CATCHUP_TASK, "schedule": interval, "args": [], "options": {"expires": interval}}
    schedule = {CATCHUP_ENTRY: catchup} if entries else {}
    for e in entries:
        when = e.celery_schedule()
        options = {"expires": when} if isinstance(when, float) else {}
        schedule[f"inbox:{e.name}"] = {
            "task": SCAN_TASK,
            "schedule": when,
            "args": [e.name],
            "options": options,
        }
    return schedule


def _check_list(where: str, table: dict, key: str, what: str, kinds: tuple[type, ...]) -> None:
    """ScheduleError unless `table[key]`, when present, is a list of `kinds` (never bools):
    a lone string would otherwise be read as a list of its characters."""
    value = table.get(key, [])
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, kinds) for v in value):
        raise ScheduleError(f"{where}: {key} must be {what}, not {value!r}")
