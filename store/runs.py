"""The records of scheduled inbox runs in Redis: runs, delivered, invalid and refused files,
and the entry lock.

`producer.inbox` decides what a run does; this module only stores what it decided, under
the keys of `store.keys.InboxKeys`.
"""

from __future__ import annotations

import json
import logging
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Self, TypeVar

import redis
from redis.lock import Lock

from store import defaults
from store.errors import CorruptRecord, is_text, is_time, load_json, printable
from store.keys import InboxKeys, quoted

logger = logging.getLogger(__name__)

#: States of an inbox run: its files were submitted as a job (in flight), delivered to the
#: outbox, nothing new was found, it was skipped (the lock was held), its job was lost
#: (expired or cancelled: the files are submitted again), or it failed (the message says why).
SUBMITTED, DELIVERED, NOTHING_NEW, SKIPPED, LOST, FAILED = (
    "submitted",
    "delivered",
    "nothing new",
    "skipped",
    "lost",
    "failed",
)
STATES = (SUBMITTED, DELIVERED, NOTHING_NEW, SKIPPED, LOST, FAILED)


class CorruptEntry(CorruptRecord):
    """An entry of one of an inbox entry's hashes that is not the record this transqueue
    writes there (`what`); the message names the key and the entry, `entry` is the entry. The
    reason may quote the record (Python's TypeError quotes a field name as it is): its control
    characters are escaped (`printable`), as the message goes to logs and into a run's record."""

    what: str

    def __init__(self, key: str, entry: str, reason: str) -> None:
        super().__init__(
            f"{key} entry {quoted(entry)} is not {self.what} of this transqueue ({printable(reason)})"
        )
        self.entry = entry


class CorruptRun(CorruptEntry):
    """An entry of an inbox's runs hash that is not a run record; `run_id` is the entry."""

    what = "a run record"

    @property
    def run_id(self) -> str:
        """The entry: the id of the run it should hold."""
        return self.entry


class CorruptInvalid(CorruptEntry):
    """An entry of an inbox's invalid-files hash that is not an invalid-file record."""

    what = "an invalid-file record"


class CorruptRefused(CorruptEntry):
    """An entry of an inbox's refused-files hash that is not a refused-file record."""

    what = "a refused-file record"


@dataclass(frozen=True)
class _Record(ABC):
    """A JSON record of one of an inbox entry's hashes: `to_json` writes it, `from_json`
    reads it back, checked by the subclass's `check`."""

    def to_json(self) -> str:
        """Serialize for the hash."""
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Self:
        """Parse what `to_json` wrote; ValueError or TypeError for anything else (a field
        missing, unknown or of another type)."""
        data = load_json(text)
        if not isinstance(data, dict):
            raise TypeError(f"{quoted(data)} is not a JSON object")
        record = cls(**data)
        record.check()
        return record

    @abstractmethod
    def check(self) -> None:
        """ValueError unless every field holds what `to_json` writes."""


@dataclass(frozen=True)
class InboxRun(_Record):
    """The record of one run of an inbox entry. `delivered` counts the files of `files`
    written to the outbox: None until the run is delivered (and in the records of versions
    before it)."""

    run_id: str
    inbox: str
    started: float
    state: str
    files: dict[str, str] = field(default_factory=dict)  # file name -> sha256 submitted
    invalid: dict[str, str] = field(default_factory=dict)  # file name -> parse error
    skipped: dict[str, str] = field(default_factory=dict)  # file name -> why it was unread
    job: str = ""
    dead: int = 0
    finished: float | None = None
    message: str = ""
    delivered: int | None = None

    def check(self) -> None:
        """ValueError unless every field holds what `to_json` writes."""
        for name in ("run_id", "inbox", "job", "message"):
            _expect(isinstance(getattr(self, name), str), name, "a string")
        _expect(is_time(self.started), "started", "a time")
        _expect(self.finished is None or is_time(self.finished), "finished", "a time or null")
        _expect(self.state in STATES, "state", f"one of {', '.join(STATES)}")
        _expect(type(self.dead) is int and self.dead >= 0, "dead", "a count")
        delivered = self.delivered
        _expect(
            delivered is None or (type(delivered) is int and 0 <= delivered <= len(self.files)),
            "delivered",
            "null or a count of its files",
        )
        for name in ("files", "invalid", "skipped"):
            value = getattr(self, name)
            strings = isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
            _expect(strings, name, "an object of strings")


@dataclass(frozen=True)
class InvalidFile(_Record):
    """Why a file of an inbox entry is not translated: a scan (at `found`) could not parse
    it. `digest` is the file's as the scan recorded it (its content and the entry's
    settings): the record holds while the file keeps it."""

    digest: str
    error: str
    found: float

    def check(self) -> None:
        """ValueError unless every field holds what `to_json` writes."""
        for name in ("digest", "error"):
            _expect(isinstance(getattr(self, name), str), name, "a string")
        _expect(is_time(self.found), "found", "a time")


@dataclass(frozen=True)
class RefusedFile(_Record):
    """A file of an inbox entry whose translation the outbox refused (a directory in the place
    of its output, say): the delivery of job `job` found that (at `found`), and a later scan
    `error`. `digest` is the file's as its run submitted it: the record holds while the file
    keeps it, and the file is not submitted again meanwhile (`producer.inbox`)."""

    digest: str
    error: str
    found: float
    job: str

    def check(self) -> None:
        """ValueError unless every field holds what `to_json` writes."""
        for name in ("digest", "error", "job"):
            _expect(isinstance(getattr(self, name), str), name, "a string")
        _expect(is_time(self.found), "found", "a time")


_R = TypeVar("_R", InvalidFile, RefusedFile)
_C = TypeVar("_C", CorruptInvalid, CorruptRefused)


def _expect(ok: bool, name: str, what: str) -> None:
    """ValueError naming the field `name` of a run record unless `ok`."""
    if not ok:
        raise ValueError(f"{name} is not {what}")


def _parsed(key: str, name: str, run_id: str, raw: str) -> InboxRun:
    """The run record `raw` of entry `run_id` in the runs hash `key` of the inbox `name`, or
    CorruptRun naming them."""
    try:
        run = InboxRun.from_json(raw)
    except (TypeError, ValueError) as exc:
        raise CorruptRun(key, run_id, str(exc)) from None
    if (run.run_id, run.inbox) != (run_id, name):
        raise CorruptRun(key, run_id, f"it names run {quoted(run.run_id)} of inbox {quoted(run.inbox)}")
    return run


class RunStore:
    """Reads and writes the run records, delivered-file hashes and locks of inbox entries."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def read(self, name: str) -> tuple[list[InboxRun], list[CorruptRun]]:
        """The recorded runs of an inbox entry, oldest first, and a CorruptRun for each of
        its records that is not a run (tampered with, or written by another version)."""
        key = InboxKeys(name).runs
        raw = self.client.hgetall(key)
        runs: list[InboxRun] = []
        corrupt: list[CorruptRun] = []
        for run_id in sorted(raw):
            try:
                runs.append(_parsed(key, name, run_id, raw[run_id]))
            except CorruptRun as exc:
                corrupt.append(exc)
        return runs, corrupt

    def list(self, name: str) -> list[InboxRun]:
        """The recorded runs of an inbox entry, oldest first; a record that is not a run is
        left out with a warning logged, so that it stops neither a scan nor a delivery."""
        runs, corrupt = self.read(name)
        for problem in corrupt:
            logger.warning("%s: left out", problem)
        return runs

    def get(self, name: str, run_id: str) -> InboxRun | None:
        """One run of an inbox entry, or None if it is not recorded (any more); CorruptRun
        when the record is not a run."""
        key = InboxKeys(name).runs
        raw = self.client.hget(key, run_id)
        return None if raw is None else _parsed(key, name, run_id, raw)

    def replace_corrupt(self, name: str) -> None:
        """Replace each record of the entry that is not a run by a failed run that says so
        (and log it): `transqueue runs` then shows what happened, and the record is trimmed
        as any other. A record whose entry name is not text is dropped (logged). The valid
        records are left as they are."""
        for problem in self.read(name)[1]:
            if not is_text(problem.run_id):  # bytes that are not UTF-8: no run can bear that id
                logger.warning("%s: dropped", problem)
                self.client.hdel(InboxKeys(name).runs, problem.run_id)
                continue
            logger.warning("%s: replaced by a failed run", problem)
            now = time.time()
            message = f"the stored record was replaced: {problem}"
            self.save(InboxRun(problem.run_id, name, now, FAILED, finished=now, message=message))

    def save(self, run: InboxRun) -> None:
        """Store a run, renewing the expiry of the entry's records (its runs, delivered, invalid
        and refused files); past `defaults.RUNS_KEPT`, drop the oldest runs no longer in flight."""
        keys = InboxKeys(run.inbox)
        key = keys.runs
        with self.client.pipeline() as pipe:
            pipe.hset(key, run.run_id, run.to_json())
            for renewed in (key, keys.seen, keys.invalid, keys.refused):
                pipe.expire(renewed, defaults.INBOX_RECORDS_TTL)
            pipe.execute()
        extra = self.client.hlen(key) - defaults.RUNS_KEPT
        if extra > 0:
            finished = [r.run_id for r in self.list(run.inbox) if r.state != SUBMITTED]
            if finished[:extra]:
                self.client.hdel(key, *finished[:extra])

    def seen(self, name: str) -> dict[str, str]:
        """File name -> digest of every file of the entry already delivered (and of files
        found invalid by versions before `read_invalid`)."""
        return self.client.hgetall(InboxKeys(name).seen)

    def mark_seen(self, name: str, files: dict[str, str]) -> None:
        """Remember files (name -> sha256) as done: they are not submitted again unchanged."""
        self._remember(InboxKeys(name).seen, files)

    def forget_seen(self, name: str, names: list[str]) -> None:
        """Forget done files (no longer in the inbox): the hash holds only present files."""
        self._forget(InboxKeys(name).seen, names)

    def read_invalid(self, name: str) -> tuple[dict[str, InvalidFile], list[CorruptInvalid]]:
        """File name -> record of each file of the entry found invalid as it is now, by name,
        and a CorruptInvalid for each entry of the hash that is not such a record."""
        return self._read_files(InboxKeys(name).invalid, InvalidFile, CorruptInvalid)

    def mark_invalid(self, name: str, files: dict[str, InvalidFile]) -> None:
        """Record files (name -> why) as invalid: they are not submitted again unchanged."""
        self._remember(InboxKeys(name).invalid, {file: record.to_json() for file, record in files.items()})

    def forget_invalid(self, name: str, names: list[str]) -> None:
        """Forget invalid files (changed, or no longer in the inbox) and entries that are not
        records: the hash holds only present files, as they are now."""
        self._forget(InboxKeys(name).invalid, names)

    def read_refused(self, name: str) -> tuple[dict[str, RefusedFile], list[CorruptRefused]]:
        """File name -> record of each file of the entry whose translation the outbox refused,
        by name, and a CorruptRefused for each entry of the hash that is not such a record."""
        return self._read_files(InboxKeys(name).refused, RefusedFile, CorruptRefused)

    def mark_refused(self, name: str, files: dict[str, RefusedFile]) -> None:
        """Record files (name -> why) as refused by the outbox: they are not submitted again
        unchanged."""
        self._remember(InboxKeys(name).refused, {file: record.to_json() for file, record in files.items()})

    def forget_refused(self, name: str, names: list[str]) -> None:
        """Forget refused files (delivered, changed, or no longer in the inbox) and entries that
        are not records: the hash holds only present files, as they are now."""
        self._forget(InboxKeys(name).refused, names)

    def _read_files(self, key: str, record: type[_R], corrupt: type[_C]) -> tuple[dict[str, _R], list[_C]]:
        """File name -> `record` of each entry of the per-file hash `key`, by name, and a
        `corrupt` for each entry that is not such a record (or whose name is not UTF-8)."""
        files: dict[str, _R] = {}
        problems: list[_C] = []
        for file, raw in sorted(self.client.hgetall(key).items()):
            try:
                if not is_text(file):
                    raise ValueError("the file name is not UTF-8")
                files[file] = record.from_json(raw)
            except (TypeError, ValueError) as exc:
                problems.append(corrupt(key, file, str(exc)))
        return files, problems

    def _remember(self, key: str, entries: dict[str, str]) -> None:
        """Set `entries` in the hash `key`, which then lives `INBOX_RECORDS_TTL` from now."""
        if entries:
            self.client.hset(key, mapping=entries)
            self.client.expire(key, defaults.INBOX_RECORDS_TTL)

    def _forget(self, key: str, names: list[str]) -> None:
        """Remove the fields `names` from the hash `key`."""
        if names:
            self.client.hdel(key, *names)

    def settling(self, name: str) -> dict[str, str]:
        """File name -> the record (`producer.inbox`) of each file the entry's last scan left
        to settle."""
        return self.client.hgetall(InboxKeys(name).settling)

    def keep_settling(self, name: str, files: dict[str, str]) -> None:
        """Replace the records of files left to settle with `files`: only those of the
        latest scan are kept."""
        key = InboxKeys(name).settling
        with self.client.pipeline() as pipe:
            pipe.delete(key)
            if files:
                pipe.hset(key, mapping=files)
                pipe.expire(key, defaults.INBOX_RECORDS_TTL)
            pipe.execute()

    def lock(self, name: str, timeout: float) -> Lock:
        """The entry's lock (not yet taken), expiring `timeout` seconds after each (re)take.

        Not thread-local: a keeper thread may extend it with the owner's token.
        """
        return self.client.lock(InboxKeys(name).lock, timeout=timeout, thread_local=False)
