"""The records of scheduled inbox runs in Redis: runs, delivered files, and the entry lock.

`producer.inbox` decides what a run does; this module only stores what it decided, under
the keys of `store.keys.InboxKeys`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import redis
from redis.lock import Lock

from store import defaults
from store.keys import InboxKeys

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


@dataclass(frozen=True)
class InboxRun:
    """The record of one run of an inbox entry."""

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

    def to_json(self) -> str:
        """Serialize for the runs hash."""
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> InboxRun:
        """Parse what `to_json` wrote."""
        return cls(**json.loads(text))


class RunStore:
    """Reads and writes the run records, delivered-file hashes and locks of inbox entries."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def list(self, name: str) -> list[InboxRun]:
        """The recorded runs of an inbox entry, oldest first."""
        raw = self.client.hgetall(InboxKeys(name).runs)
        return [InboxRun.from_json(raw[run_id]) for run_id in sorted(raw)]

    def get(self, name: str, run_id: str) -> InboxRun | None:
        """One run of an inbox entry, or None if it is not recorded (any more)."""
        raw = self.client.hget(InboxKeys(name).runs, run_id)
        return None if raw is None else InboxRun.from_json(raw)

    def save(self, run: InboxRun) -> None:
        """Store a run; past `defaults.RUNS_KEPT`, drop the oldest runs no longer in flight."""
        key = InboxKeys(run.inbox).runs
        self.client.hset(key, run.run_id, run.to_json())
        self.client.expire(key, defaults.INBOX_RECORDS_TTL)
        extra = self.client.hlen(key) - defaults.RUNS_KEPT
        if extra > 0:
            finished = [r.run_id for r in self.list(run.inbox) if r.state != SUBMITTED]
            if finished[:extra]:
                self.client.hdel(key, *finished[:extra])

    def seen(self, name: str) -> dict[str, str]:
        """File name -> sha256 of every file of the entry already delivered (or invalid)."""
        return self.client.hgetall(InboxKeys(name).seen)

    def mark_seen(self, name: str, files: dict[str, str]) -> None:
        """Remember files (name -> sha256) as done: they are not submitted again unchanged."""
        if files:
            key = InboxKeys(name).seen
            self.client.hset(key, mapping=files)
            self.client.expire(key, defaults.INBOX_RECORDS_TTL)

    def forget_seen(self, name: str, names: list[str]) -> None:
        """Forget done files (no longer in the inbox): the hash holds only present files."""
        if names:
            self.client.hdel(InboxKeys(name).seen, *names)

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
