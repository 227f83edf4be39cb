"""The Redis job store shared by producers and workers: job records, results, memory.

A job holds documents, each stored as one or more windows (consecutive pieces of it, each
with its stored layout, see `producer.stored_layout`, and, per segment, a *slot*: the index
of the job's distinct sentence it uses). A submit writes the documents, windows and chunks
as it reads them, then the job's counters (`create`), and only then sends the chunks. Workers write one
result per slot with `JobStore.record`, a Lua script that stores the text only if the slot
has neither a result nor a dead letter, counts it, and finalizes the job exactly once when
the last slot is written. A redelivered chunk or a retried write therefore never counts twice.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import TypeVar

import redis

from store import defaults, scripts
from store.config import Settings
from store.connection import connect
from store.errors import CorruptRecord, check_text, expect_str, is_text, is_time, load_json, printable
from store.keys import (
    JOBS_KEY,
    NAME_PATTERN,
    NUMBER_PATTERN,
    ORPHANS_KEY,
    STATS_KEY,
    WORKER_PREFIX,
    JobKeys,
    quoted,
    tm_capped_key,
    tm_key,
)
from store.leases import LeaseStore
from store.runs import RunStore

#: Job states. A job is "partial" when it finished with sentences in dead letters.
QUEUED, RUNNING, DONE, PARTIAL, CANCELLED = "queued", "running", "done", "partial", "cancelled"
FINISHED_STATES = (DONE, PARTIAL)
_Record = TypeVar("_Record")
#: The most bytes one character takes in UTF-8.
_UTF8_MAX_BYTES = 4


class MissingRecord(CorruptRecord):
    """A record that a job should hold is missing: the job expired part way through a
    command, or Redis lost (or evicted) the key; the message names it."""


@dataclass(frozen=True)
class DocumentRecord:
    """One document of a job: its name and format, how it was read, how many windows it is
    stored as (each with its own slots and layout, `WindowRecord`), and where its translation
    goes (relative to the job's output directory). A Parquet document's table is not stored,
    only its cells: ``size`` and ``sha256`` are those of its file, to find it again at fetch."""

    name: str
    fmt: str
    windows: int = 1
    fields: tuple[str, ...] = ()
    reflow: bool = False
    target: str = ""
    columns: tuple[str, ...] = ()
    size: int = 0
    sha256: str = ""

    def to_json(self) -> str:
        """Serialize for the job's docs hash."""
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> DocumentRecord:
        """Parse what `to_json` wrote (KeyError, TypeError or ValueError for anything else:
        names, targets and settings that are not strings, or hold a NUL)."""
        data = load_json(text)
        record = cls(
            name=data["name"],
            fmt=data["fmt"],
            windows=int(data["windows"]),
            fields=tuple(data["fields"]),
            reflow=data["reflow"],
            target=data["target"],
            columns=tuple(data["columns"]),
            size=int(data["size"]),
            sha256=str(data["sha256"]),
        )
        texts = (record.name, record.fmt, record.target, *record.fields, *record.columns)
        if not all(isinstance(value, str) and "\0" not in value for value in texts):
            raise ValueError("a name, format, target, field or column is not a string without NUL")
        if not record.name:
            raise ValueError("the name is empty")
        if not isinstance(record.reflow, bool):
            raise TypeError("reflow is not a boolean")
        return record


@dataclass(frozen=True)
class WindowRecord:
    """One window of a stored document: the slot of each of its segments, and the line of
    the document its text starts on (for the quality flags' line numbers)."""

    slots: tuple[int, ...]
    first_line: int = 1

    def to_json(self) -> str:
        """Serialize for the job's windows hash."""
        return json.dumps({"slots": self.slots, "first_line": self.first_line}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> WindowRecord:
        """Parse what `to_json` wrote (KeyError, TypeError or ValueError for anything else)."""
        data = load_json(text)
        return cls(tuple(int(slot) for slot in data["slots"]), int(data["first_line"]))


@dataclass(frozen=True)
class DeadLetter:
    """A sentence that will not be translated, and why."""

    slot: int
    text: str
    reason: str
    chunk: int
    deliveries: int
    at: float

    def to_json(self) -> str:
        """Serialize for the job's dead hash."""
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> DeadLetter:
        """Parse what `to_json` wrote (KeyError, TypeError or ValueError for anything else)."""
        data = load_json(text)
        return cls(
            slot=int(data["slot"]),
            text=expect_str(data["text"]),
            reason=expect_str(data["reason"]),
            chunk=int(data["chunk"]),
            deliveries=int(data["deliveries"]),
            at=float(data["at"]),
        )


@dataclass(frozen=True)
class JobInfo:
    """A job's counters as stored in its meta hash; times are Unix seconds."""

    job_id: str
    state: str
    created: float
    documents: int
    segments: int
    total: int
    done: int = 0
    hits: int = 0
    dead: int = 0
    chunks: int = 0
    out: str = ""
    origin: str = ""
    fingerprint: str = ""
    queue: str = ""
    model: str = ""
    started_at: float | None = None
    finished_at: float | None = None
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_hash(cls, job_id: str, h: dict[str, str]) -> JobInfo:
        """Build from the meta hash (as HGETALL returns it); KeyError or ValueError for a hash
        that is not a job's."""
        known = {
            "queue",
            "model",
            "state",
            "created",
            "documents",
            "segments",
            "total",
            "done",
            "hits",
            "dead",
            "chunks",
            "out",
            "origin",
            "fingerprint",
            "started_at",
            "finished_at",
        }
        ints = ("documents", "segments", "total", "done", "hits", "dead", "chunks")

        def opt_float(name: str) -> float | None:
            return _time(h[name]) if name in h else None

        for name, value in h.items():
            check_text(name), check_text(value)
        return cls(
            job_id=job_id,
            state=h["state"],
            created=_time(h["created"]),
            **{name: int(h.get(name, 0)) for name in ints},
            out=h.get("out", ""),
            origin=h.get("origin", ""),
            fingerprint=h.get("fingerprint", ""),
            queue=h.get("queue", ""),
            model=h.get("model", ""),
            started_at=opt_float("started_at"),
            finished_at=opt_float("finished_at"),
            extra={k: v for k, v in h.items() if k not in known},
        )

    @property
    def finished(self) -> bool:
        """True once every slot has a result or a dead letter."""
        return self.state in FINISHED_STATES

    @property
    def settled(self) -> int:
        """Slots that have a result or a dead letter."""
        return self.done + self.dead

    def rate(self, now: float) -> float | None:
        """Sentences settled per second since the first result, or None before it."""
        if self.started_at is None:
            return None
        elapsed = (self.finished_at or now) - self.started_at
        return self.settled / elapsed if elapsed > 0 else None

    def eta(self, now: float) -> float | None:
        """Seconds until the job finishes at the current rate; None when unknown or cancelled."""
        if self.state == CANCELLED:
            return None
        if self.finished:
            return 0.0
        rate = self.rate(now)
        return (self.total - self.settled) / rate if rate else None


@dataclass(frozen=True)
class NewJob:
    """What `JobStore.create` stores once a job's documents, windows and chunks are written
    (`JobWriter`)."""

    job_id: str
    documents: int
    segments: int
    total: int
    chunks: int
    out: str
    origin: str
    extra: dict[str, str] = field(default_factory=dict)
    #: The key of the model the job asks for, and the queue its chunks travel on.
    model: str = ""
    queue: str = ""


class JobWriter:
    """Stores the documents, windows and chunks of a job being submitted (before
    `JobStore.create`), sent to Redis in batches of about `defaults.WRITE_BATCH_BYTES`, in
    order, and at `flush`. Each batch renews the expiry of the keys it writes, so a submit
    that dies half way leaves nothing behind for longer than a job would stay."""

    def __init__(self, client: redis.Redis, keys: JobKeys, ttl: int) -> None:
        self.client, self.keys, self.ttl = client, keys, ttl
        self.pipe = client.pipeline(transaction=False)
        self.pending = 0  # bytes of the values waiting in the pipeline

    def document(self, n: int, record: DocumentRecord) -> None:
        """Store document `n`."""
        self._hset(self.keys.docs, str(n), record.to_json())

    def window(self, n: int, w: int, window: WindowRecord, layout: str) -> None:
        """Store window `w` of document `n`: its slots and its layout (`producer.stored_layout`)."""
        self._hset(self.keys.windows, f"{n}:{w}", window.to_json())
        self._hset(self.keys.layouts, f"{n}:{w}", layout)

    def chunks(self, first: int, chunks: Sequence[Sequence[tuple[int, str]]]) -> None:
        """Store chunks `first`, `first + 1`, ... as they will be sent (and sent again should
        Redis lose them)."""
        for i, items in enumerate(chunks):
            self._hset(self.keys.chunks, str(first + i), json.dumps(items, ensure_ascii=False))

    def drop_document(self, n: int, windows: int, chunks: range) -> None:
        """Remove what was stored of document `n` (its first `windows` windows) and the
        `chunks` stored since it began: a document that failed part way through submit."""
        fields = [f"{n}:{w}" for w in range(windows)]
        self.pipe.hdel(self.keys.docs, str(n))
        if fields:
            self.pipe.hdel(self.keys.windows, *fields)
            self.pipe.hdel(self.keys.layouts, *fields)
        if chunks:
            self.pipe.hdel(self.keys.chunks, *map(str, chunks))

    def flush(self) -> None:
        """Send what waits in the pipeline."""
        for key in (self.keys.docs, self.keys.windows, self.keys.layouts, self.keys.chunks):
            self.pipe.expire(key, self.ttl)
        self.pipe.execute()
        self.pending = 0

    def _hset(self, key: str, field: str, value: str) -> None:
        self.pipe.hset(key, field, value)
        self.pending += len(value)
        if self.pending >= defaults.WRITE_BATCH_BYTES:
            self.flush()


@dataclass(frozen=True)
class Written:
    """Outcome of a result or dead-letter write."""

    written: bool  # False: the slot was already settled (or the job is gone)
    finalized: bool  # True for exactly one write per job: the one that finished it


class JobStore:
    """Reads and writes jobs, results, dead letters and the translation memory in Redis;
    `runs` reads and writes the scheduled inbox runs (`store.runs.RunStore`), `leases` the
    runs of chunks (`store.leases.LeaseStore`)."""

    def __init__(self, client: redis.Redis, settings: Settings) -> None:
        self.client = client
        self.settings = settings
        self.runs = RunStore(client)
        self.leases = LeaseStore(client, settings.lease_ttl, settings.result_ttl)
        self._record = client.register_script(scripts.RECORD)
        self._dead = client.register_script(scripts.DEAD)
        self._try_finalize = client.register_script(scripts.TRY_FINALIZE)
        self._cancel = client.register_script(scripts.CANCEL)
        self._claim_fingerprint = client.register_script(scripts.CLAIM_FINGERPRINT)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        patience: float = defaults.IMPATIENCE,
        on_wait: Callable[[Exception], None] | None = None,
    ) -> JobStore:
        """A store on the Redis server named by the settings, whose client retries a lost
        connection for `patience` seconds (`store.connection`)."""
        return cls(connect(settings.redis_url, patience, on_wait), settings)

    # -- producer side ----------------------------------------------------------------------

    def writer(self, job_id: str) -> JobWriter:
        """A writer of the documents, windows and chunks of a job being submitted."""
        return JobWriter(self.client, JobKeys(job_id), self.settings.result_ttl)

    def discard(self, job_id: str) -> None:
        """Remove everything stored of a job that is not submitted after all."""
        self.client.delete(*JobKeys(job_id).all())

    def create(self, job: NewJob) -> None:
        """Store a new job's counters, once its documents, windows and chunks are stored
        (`writer`, flushed), and before any of its chunks is sent: workers and clients see the
        job from now on."""
        keys = JobKeys(job.job_id)
        now = time.time()
        meta = {
            "state": QUEUED,
            "created": repr(now),
            "documents": job.documents,
            "segments": job.segments,
            "total": job.total,
            "done": 0,
            "hits": 0,
            "dead": 0,
            "chunks": job.chunks,
            "out": job.out,
            "origin": job.origin,
            "model": job.model,
            "queue": job.queue or self.settings.queue,
            **job.extra,
        }
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(keys.meta, mapping=meta)
        for key in keys.all():
            pipe.expire(key, self.settings.result_ttl)
        pipe.zadd(JOBS_KEY, {job.job_id: now})
        pipe.execute()
        self._index(stop=defaults.INDEX_PRUNED_PER_JOB - 1)  # keeps the index near the live jobs

    def try_finalize(self, job_id: str) -> bool:
        """Finalize a job whose slots are all settled; True if this call finalized it."""
        return bool(self._try_finalize(keys=[JobKeys(job_id).meta], args=[repr(time.time())]))

    def cancel(self, job_id: str) -> bool:
        """Mark an unfinished job cancelled: workers skip its remaining chunks.

        False if there is no such job, or it already finished or was cancelled.
        """
        return bool(self._cancel(keys=[JobKeys(job_id).meta], args=[repr(time.time())]))

    # -- worker side --------------------------------------------------------------------------

    def claim_fingerprint(self, job_id: str, fingerprint: str) -> str | None:
        """Set the job's model fingerprint if unset; return the job's fingerprint, or None
        when the job no longer exists (then nothing is stored)."""
        return self._claim_fingerprint(keys=[JobKeys(job_id).meta], args=[fingerprint])

    def memory(self, sentences: Sequence[str], fingerprint: str) -> list[str | None]:
        """Translation-memory lookups, one per sentence (None on a miss, and for an entry that
        is not text or is longer than the model can write, `longest_translation`: it is
        translated again and rewritten)."""
        if not sentences:
            return []
        keys = [tm_key(s, fingerprint) for s in sentences]
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.strlen(key)
        # an entry longer than the model can write is never read (`longest_translation`)
        fits = [size <= longest_translation(s) for s, size in zip(sentences, pipe.execute(), strict=True)]
        wanted = [key for key, fit in zip(keys, fits, strict=True) if fit]
        read = iter(self.client.mget(wanted) if wanted else ())
        found = [next(read) if fit else None for fit in fits]
        return [text if text is not None and is_text(text) else None for text in found]

    def capped_in_memory(self, sentences: Sequence[str], fingerprint: str) -> list[bool]:
        """For each sentence: is the memory's translation one that hit the length cap?"""
        if not sentences:
            return []
        return [
            mark is not None for mark in self.client.mget([tm_capped_key(s, fingerprint) for s in sentences])
        ]

    def record(
        self,
        job_id: str,
        slot: int,
        source: str,
        text: str,
        *,
        fingerprint: str,
        hit: bool,
        capped: bool = False,
    ) -> Written:
        """Store the translation of a slot (and in the memory); see the module docstring.

        ``capped``: the translation hit the decoder's length cap (a quality flag, kept with
        the job's results and in the memory)."""
        keys = JobKeys(job_id)
        memory = [tm_key(source, fingerprint), keys.capped, tm_capped_key(source, fingerprint)]
        written, finalized = self._record(
            keys=[keys.meta, keys.results, keys.dead, STATS_KEY, *memory, *keys.all()],
            args=[
                slot,
                text,
                int(hit),
                repr(time.time()),
                self.settings.result_ttl,
                self.settings.tm_ttl,
                int(capped),
            ],
        )
        return Written(written == 1, finalized == 1)

    def dead_letter(self, job_id: str, letter: DeadLetter) -> Written:
        """Settle a slot as not translatable; counted once, like `record`."""
        keys = JobKeys(job_id)
        written, finalized = self._dead(
            keys=[keys.meta, keys.results, keys.dead, STATS_KEY, *keys.all()],
            args=[letter.slot, letter.to_json(), repr(time.time()), self.settings.result_ttl],
        )
        return Written(written == 1, finalized == 1)

    def add_error(self, job_id: str, error: dict[str, object]) -> None:
        """Remember an error of a job (the newest `defaults.ERRORS_KEPT`)."""
        key = JobKeys(job_id).errors
        pipe = self.client.pipeline()
        pipe.lpush(key, json.dumps(error, ensure_ascii=False))
        pipe.ltrim(key, 0, defaults.ERRORS_KEPT - 1)
        pipe.expire(key, self.settings.result_ttl)
        pipe.execute()

    def add_orphan(self, record: dict[str, object]) -> None:
        """Record a chunk message set aside: its job is unknown, or the message was refused."""
        pipe = self.client.pipeline()
        pipe.lpush(ORPHANS_KEY, json.dumps(record, ensure_ascii=False))
        pipe.ltrim(ORPHANS_KEY, 0, defaults.ORPHANS_KEPT - 1)
        pipe.execute()

    # -- reading ------------------------------------------------------------------------------

    def info(self, job_id: str) -> JobInfo | None:
        """The job's counters, or None if there is no such job (or it expired).

        Raises `store.keys.BadName` for an id that is not of the allowed form, and
        CorruptRecord when the key holds something that is not a job.
        """
        key = JobKeys(job_id).meta
        try:
            h = self.client.hgetall(key)
            return JobInfo.from_hash(job_id, h) if h else None
        except (redis.ResponseError, KeyError, ValueError) as exc:  # WRONGTYPE, missing field
            if isinstance(exc, redis.ResponseError) and not str(exc).startswith("WRONGTYPE"):
                raise  # Redis refusing the call (a DB index out of range, NOPERM): not the key
            raise CorruptRecord(f"{key} does not hold a job ({exc!r})") from None

    def infos(self, job_ids: list[str]) -> Iterator[JobInfo]:
        """`info` of each of `job_ids` in one round trip, skipping jobs that expired and
        records that are not jobs (`info` names those)."""
        pipe = self.client.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.hgetall(JobKeys(job_id).meta)
        for job_id, h in zip(job_ids, pipe.execute(raise_on_error=False), strict=True):
            if not h or isinstance(h, Exception):
                continue
            try:
                yield JobInfo.from_hash(job_id, h)
            except (KeyError, ValueError):  # a missing or malformed field
                continue

    def job_ids(self) -> list[str]:
        """Ids of the known jobs, oldest first; expired ones are dropped from the index."""
        return self._index(stop=-1)

    def _index(self, stop: int) -> list[str]:
        """The live job ids among the oldest entries of the index (up to `stop`, -1 for all);
        entries whose job expired, or that are no job id at all, are removed from it."""
        ids = self.client.zrange(JOBS_KEY, 0, stop)
        valid = [job_id for job_id in ids if NAME_PATTERN.fullmatch(job_id)]
        pipe = self.client.pipeline()
        for job_id in valid:
            pipe.exists(JobKeys(job_id).meta)
        alive = [job_id for job_id, ok in zip(valid, pipe.execute(), strict=True) if ok]
        gone = set(ids) - set(alive)
        if gone:
            self.client.zrem(JOBS_KEY, *gone)
        return alive

    def document(self, job_id: str, n: int) -> DocumentRecord:
        """Document `n` of a job; MissingRecord when it is not there (expired?), CorruptRecord
        when what is there is not a document record."""
        key = JobKeys(job_id).docs
        raw = self.client.hget(key, str(n))
        if raw is None:
            raise MissingRecord(f"job {job_id} has no document {n} (expired?)")
        return _parsed(DocumentRecord.from_json, raw, f"{key} field {n}")

    def window(self, job_id: str, n: int, w: int) -> WindowRecord:
        """Window `w` of document `n` of a job (its slots); errors as `document`."""
        key = JobKeys(job_id).windows
        raw = self.client.hget(key, f"{n}:{w}")
        if raw is None:
            raise MissingRecord(f"job {job_id} has no window {w} of document {n} (expired?)")
        return _parsed(WindowRecord.from_json, raw, f"{key} field {n}:{w}")

    def layout(self, job_id: str, n: int, w: int) -> str:
        """The stored layout of window `w` of document `n` of a job; MissingRecord when missing."""
        key = JobKeys(job_id).layouts
        layout = self.client.hget(key, f"{n}:{w}")
        if layout is None:
            raise MissingRecord(f"job {job_id} has no layout of window {w} of document {n} (expired?)")
        return _parsed(check_text, layout, f"{key} field {n}:{w}")

    def documents(self, job_id: str) -> list[DocumentRecord]:
        """Every document record of a job, in input order; CorruptRecord naming the field of
        one that is not a document record, or whose field is not a document number."""
        key = JobKeys(job_id).docs
        raw = self.client.hgetall(key)
        for n in raw:
            if not NUMBER_PATTERN.fullmatch(n):
                raise CorruptRecord(f"{key} field {quoted(n)} is not a document number")
        return [_parsed(DocumentRecord.from_json, raw[n], f"{key} field {n}") for n in sorted(raw, key=int)]

    def chunks(self, job_id: str, count: int) -> Iterator[tuple[int, list[list[object]]]]:
        """The job's first `count` stored chunks (number, items) in order, read a batch at a
        time; a chunk that is not stored is skipped."""
        key = JobKeys(job_id).chunks
        for start in range(0, count, defaults.CHUNKS_READ_AT_ONCE):
            numbers = range(start, min(count, start + defaults.CHUNKS_READ_AT_ONCE))
            for n, items in zip(numbers, self.client.hmget(key, [str(n) for n in numbers]), strict=True):
                if items is not None:
                    yield n, load_json(items)

    def stored_chunk(self, job_id: str, chunk: int) -> list[tuple[int, str]] | None:
        """Chunk `chunk` of the job as submit stored it, (slot, sentence) pairs; None if it is
        not stored. CorruptRecord if what is stored is not a list of such pairs."""
        raw = self.client.hget(JobKeys(job_id).chunks, str(chunk))
        if raw is None:
            return None
        try:
            return [(int(slot), str(text)) for slot, text in load_json(raw)]
        except (ValueError, TypeError) as exc:
            raise CorruptRecord(f"chunk {chunk} of job {job_id} is not a list of pairs ({exc!r})") from None

    def settled(self, job_id: str, slots: Sequence[int]) -> list[bool]:
        """For each slot: does it have a result or a dead letter already? (CorruptRecord as
        `slot_states`.)"""
        return [state is not None for state in self.slot_states(job_id, slots)]

    def slot_states(
        self, job_id: str, slots: Sequence[int], sources: Sequence[str] | None = None
    ) -> list[str | DeadLetter | None]:
        """For each slot: its translation, its dead letter, or None while unsettled;
        CorruptRecord naming the field of one that is not what a worker writes. A slot that
        repeats is read once. With `sources`, each slot's sentence (as a window's layout
        holds it), a translation longer than the model can write for it
        (`longest_translation`) is a CorruptRecord too, refused by its length before it is
        read: a window renders one copy of it per segment."""
        if not slots:
            return []
        keys = JobKeys(job_id)
        fields = list(dict.fromkeys(str(slot) for slot in slots))
        if sources is not None:
            self._check_lengths(keys.results, slots, sources)
        results = dict(zip(fields, self.client.hmget(keys.results, fields), strict=True))
        for name, text in results.items():
            if text is not None:
                _parsed(check_text, text, f"{keys.results} field {name}")
        missing = [name for name, text in results.items() if text is None]
        letters = dict(zip(missing, self.client.hmget(keys.dead, missing), strict=True)) if missing else {}
        dead = {
            name: _parsed(DeadLetter.from_json, letter, f"{keys.dead} field {name}")
            for name, letter in letters.items()
            if letter is not None
        }
        return [
            results[str(slot)] if results[str(slot)] is not None else dead.get(str(slot)) for slot in slots
        ]

    def _check_lengths(self, key: str, slots: Sequence[int], sources: Sequence[str]) -> None:
        """CorruptRecord naming the field of `key` (a results hash) that holds a translation
        longer than `longest_translation` of the sentence of a segment that uses it."""
        limits: dict[str, int] = {}
        for slot, source in zip(slots, sources, strict=True):
            limit = longest_translation(source)
            limits[str(slot)] = min(limit, limits.get(str(slot), limit))
        pipe = self.client.pipeline(transaction=False)
        for name in limits:
            pipe.hstrlen(key, name)
        for (name, limit), size in zip(limits.items(), pipe.execute(), strict=True):
            if size > limit:
                raise CorruptRecord(
                    f"{key} field {name} holds a translation of {size} bytes, "
                    f"more than the model can write for its sentence ({limit})"
                )

    def capped(self, job_id: str, slots: Sequence[int]) -> list[bool]:
        """For each slot: did its translation hit the decoder's length cap?

        The marks are read back from Redis, so anything but "1" is a CorruptRecord."""
        if not slots:
            return []
        key = JobKeys(job_id).capped
        marks = self.client.hmget(key, [str(s) for s in slots])
        if any(mark not in (None, "1") for mark in marks):
            raise CorruptRecord(f"{key}: a mark that is not '1'")
        return [mark == "1" for mark in marks]

    def unsettled_chunks(self, job_id: str) -> Iterator[tuple[int, list[list[object]]]]:
        """The job's chunks (as sent) that still have a slot without result or dead letter,
        read a few at a time (`HSCAN`), in no particular order; CorruptRecord at one that is
        not a list of pairs."""
        for n, raw in self.client.hscan_iter(JobKeys(job_id).chunks, count=defaults.CHUNKS_READ_AT_ONCE):
            try:
                items = load_json(raw)
                slots = [int(slot) for slot, _ in items]
                number = int(n)
            except (ValueError, TypeError) as exc:
                raise CorruptRecord(
                    f"chunk {printable(n)} of job {job_id} is not a list of pairs ({exc!r})"
                ) from None
            if not all(self.settled(job_id, slots)):
                yield number, items

    def claim_resend(self, job_id: str, seconds: float) -> bool:
        """True for one caller per `seconds`: the one that may send the job's stalled chunks."""
        return bool(self.client.set(JobKeys(job_id).resent, "1", nx=True, px=int(seconds * 1000)))

    def announce(self, worker: str, queue: str, ttl: float) -> None:
        """Say for `ttl` seconds that `worker` (host:pid:life, `store.leases.current_worker`) is
        alive and consumes `queue`."""
        self.client.set(f"{WORKER_PREFIX}{worker}", queue, px=int(ttl * 1000))

    def serving(self, queue: str) -> int:
        """How many live workers consume `queue`."""
        keys = list(self.client.scan_iter(f"{WORKER_PREFIX}*", count=1000))
        return sum(value == queue for value in (self.client.mget(keys) if keys else []))

    def deliveries(self, job_id: str) -> int:
        """How many times chunks of the job were handed to a worker so far."""
        return sum(int(n) for n in self.client.hvals(JobKeys(job_id).deliveries))

    def dead_letters(self, job_id: str) -> dict[int, DeadLetter]:
        """The job's dead letters by slot."""
        key = JobKeys(job_id).dead
        letters = [
            _parsed(DeadLetter.from_json, v, f"{key} field {slot}")
            for slot, v in self.client.hgetall(key).items()
        ]
        return {letter.slot: letter for letter in letters}

    def errors(self, job_id: str) -> list[dict[str, object]]:
        """The job's recorded errors, newest first, each with its ``error`` and ``worker``;
        CorruptRecord for an entry that is not such a record."""
        key = JobKeys(job_id).errors
        return [
            _parsed(_error_record, raw, f"{key} entry {n}")
            for n, raw in enumerate(self.client.lrange(key, 0, -1))
        ]

    def orphans(self) -> Iterator[dict[str, object]]:
        """The records of chunk messages set aside (`add_orphan`), newest first (entries that
        are not JSON objects left out: this list is only ever read to show and count)."""
        for raw in self.client.lrange(ORPHANS_KEY, 0, -1):
            with contextlib.suppress(ValueError):
                record = load_json(raw)
                if isinstance(record, dict):
                    yield record

    def orphan_count(self) -> int:
        """How many chunk messages were set aside (`orphans`), readable or not."""
        return int(self.client.llen(ORPHANS_KEY))

    def stats(self) -> dict[str, int]:
        """Counters over all jobs: translated, hits, dead (statistics: where the key or a
        counter holds something else, as if none were counted, since the scripts skip them
        then too)."""
        try:
            raw = self.client.hgetall(STATS_KEY)
        except redis.ResponseError:  # not a hash
            return {}
        return {k: int(v) for k, v in raw.items() if is_text(k) and re.fullmatch(r"-?\d{1,18}", v)}


def longest_translation(source: str) -> int:
    """The most UTF-8 bytes the model's translation of `source` can take: four per
    character of the longest translation (`defaults.MAX_TRANSLATION_CHARS_PER_SOURCE_CHAR`).
    A stored one that is longer was not written by a worker."""
    chars = (
        defaults.MAX_TRANSLATION_CHARS_PER_SOURCE_CHAR * len(source) + defaults.MAX_TRANSLATION_EXTRA_CHARS
    )
    return _UTF8_MAX_BYTES * chars


def _time(value: str) -> float:
    """A time of a job's record (seconds since the epoch) parsed from its text; ValueError for
    one that is no time (`is_time`)."""
    seconds = float(value)
    if not is_time(seconds):
        raise ValueError(f"{value!r:.80} is not a time")
    return seconds


def _error_record(raw: str) -> dict[str, object]:
    """An entry of a job's error list, which names its ``error`` and ``worker`` (strings)."""
    data = load_json(raw)
    if not (
        isinstance(data, dict) and isinstance(data.get("error"), str) and isinstance(data.get("worker"), str)
    ):
        raise ValueError("not an error entry (an object with its error and worker)")
    return data


def _parsed(parse: Callable[[str], _Record], raw: str, where: str) -> _Record:
    """``parse(raw)``, or CorruptRecord naming `where` (a record of another version, say)."""
    try:
        return parse(raw)
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptRecord(f"{where} is not a record of this transqueue ({exc!r})") from None


@functools.cache
def process_store(settings: Settings) -> JobStore:
    """This process's job store for `settings` (workers, the scheduler): one patient client
    that rides out Redis restarts."""
    return JobStore.from_settings(settings, patience=defaults.WORKER_PATIENCE)
