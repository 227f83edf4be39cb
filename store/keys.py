"""Every Redis key transqueue builds, in one place (Celery's own queue keys aside).

All keys start with `store.defaults.KEY_PREFIX` ("tq"):

- ``tq:job:<id>`` and ``tq:job:<id>:<part>``: one job (`JobKeys`);
- ``tq:jobs`` (sorted set of job ids by creation time), ``tq:stats`` (counters over all
  jobs), ``tq:orphans`` (chunks that arrived for no known job), ``tq:running`` (the chunks
  being translated: ``<job>:<chunk>`` -> run JSON, see `store.leases`);
- ``tq:tm:<sha256>``: one translation-memory entry (`tm_key`), and ``tq:tm:<sha256>:capped``
  while that translation is one that hit the decoder's length cap (`tm_capped_key`);
- ``tq:inbox:<name>:runs|seen|invalid|refused|settling|lock``: one scheduled inbox entry (`InboxKeys`).

Job ids and inbox names reach Redis from task messages and the command line, so both are
checked here before they become part of a key (`check_name`): a name such as
``<job>:docs`` would otherwise address another key.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass

from store.defaults import KEY_PREFIX, QUOTED_CHARS

#: What a job id or an inbox name may be: 1 to 64 letters, digits, '_' or '-' (never ':',
#: so a name can address no other key). Submit makes job ids of 12 hex digits.
NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")

#: A number stored as a key or hash field (a chunk in ``tq:running``, a document in a job's
#: docs hash): ASCII digits only, and few enough for `int` (``str.isdigit`` also takes '²'
#: or 5,000 digits, which `int` refuses).
NUMBER_PATTERN = re.compile(r"[0-9]{1,18}")

JOBS_KEY = f"{KEY_PREFIX}:jobs"
#: Prefix of the presence keys of live workers: ``tq:worker:<host:pid:life>`` -> the queue it consumes.
WORKER_PREFIX = f"{KEY_PREFIX}:worker:"
RUNNING_KEY = f"{KEY_PREFIX}:running"
STATS_KEY = f"{KEY_PREFIX}:stats"
ORPHANS_KEY = f"{KEY_PREFIX}:orphans"


class BadName(ValueError):
    """A job id or inbox name that is not of the allowed form; the message quotes it."""


def check_name(value: object, what: str = "job id") -> str:
    """`value` if it is a str matching `NAME_PATTERN`, else BadName naming `what`."""
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise BadName(f"{what} {quoted(value)} is not valid (1 to 64 letters, digits, '_' or '-')")
    return value


def shortened(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters, the last one an ellipsis, when it is longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quoted(value: object, limit: int = QUOTED_CHARS) -> str:
    """The repr of `value` for an error message, `shortened` to `limit` characters: a value
    from a task message or from Redis is untrusted and may be megabytes long."""
    return shortened(repr(value), limit)


def new_job_id() -> str:
    """A fresh job id: 12 hex digits."""
    return uuid.uuid4().hex[:12]


def tm_key(sentence: str, fingerprint: str) -> str:
    """Redis key of the translation memory entry of `sentence` under a model fingerprint.

    The sentence is hashed exactly as it is, like `transqueue translate` remembers it within
    a run: two spellings that a tokenizer would normalize alike are still two entries, so a
    memory hit never depends on the tokenizer and both paths produce the same output.
    """
    digest = hashlib.sha256(f"{fingerprint}\0{sentence}".encode()).hexdigest()
    return f"{KEY_PREFIX}:tm:{digest}"


def tm_capped_key(sentence: str, fingerprint: str) -> str:
    """The key marking the memory's translation of `sentence` as one that hit the length cap."""
    return f"{tm_key(sentence, fingerprint)}:capped"


@dataclass(frozen=True)
class JobKeys:
    """The Redis keys of one job; BadName for an id that is not of the allowed form."""

    job_id: str

    def __post_init__(self) -> None:
        check_name(self.job_id)

    @property
    def meta(self) -> str:
        """Hash of the job's counters and settings."""
        return f"{KEY_PREFIX}:job:{self.job_id}"

    def _sub(self, name: str) -> str:
        return f"{self.meta}:{name}"

    @property
    def docs(self) -> str:
        """Hash: document number -> DocumentRecord JSON."""
        return self._sub("docs")

    @property
    def windows(self) -> str:
        """Hash: ``<document>:<window>`` -> WindowRecord JSON (the window's slots)."""
        return self._sub("windows")

    @property
    def layouts(self) -> str:
        """Hash: ``<document>:<window>`` -> the window's segments and layout, as submitted."""
        return self._sub("layouts")

    @property
    def results(self) -> str:
        """Hash: slot -> translated text."""
        return self._sub("results")

    @property
    def capped(self) -> str:
        """Hash: slot -> "1" for each translation that hit the decoder's length cap."""
        return self._sub("capped")

    @property
    def dead(self) -> str:
        """Hash: slot -> DeadLetter JSON."""
        return self._sub("dead")

    @property
    def deliveries(self) -> str:
        """Hash: chunk number -> times the chunk was delivered to a worker."""
        return self._sub("deliveries")

    @property
    def chunks(self) -> str:
        """Hash: chunk number -> its [slot, sentence] items JSON, as sent."""
        return self._sub("chunks")

    @property
    def resent(self) -> str:
        """String with a TTL: held while a sweeper sends the job's stalled chunks again."""
        return self._sub("resent")

    @property
    def strikes(self) -> str:
        """Hash: chunk number -> runs of the chunk that died or failed (the delivery cap)."""
        return self._sub("strikes")

    @property
    def errors(self) -> str:
        """List of job error JSON, newest first."""
        return self._sub("errors")

    def lease(self, chunk: int) -> str:
        """String with a TTL: the token of the run translating `chunk`, while it is alive."""
        return self._sub(f"lease:{chunk}")

    def all(self) -> tuple[str, ...]:
        """Every key of the job (leases aside: they expire on their own)."""
        return (
            self.meta,
            self.docs,
            self.windows,
            self.layouts,
            self.results,
            self.capped,
            self.dead,
            self.deliveries,
            self.chunks,
            self.strikes,
            self.errors,
        )


@dataclass(frozen=True)
class InboxKeys:
    """The Redis keys of one scheduled inbox entry; BadName for a name not of the allowed
    form."""

    name: str

    def __post_init__(self) -> None:
        check_name(self.name, "inbox name")

    def _sub(self, what: str) -> str:
        return f"{KEY_PREFIX}:inbox:{self.name}:{what}"

    @property
    def runs(self) -> str:
        """Hash: run id -> InboxRun JSON."""
        return self._sub("runs")

    @property
    def seen(self) -> str:
        """Hash: file name (relative to the inbox) -> sha256 of the content delivered."""
        return self._sub("seen")

    @property
    def invalid(self) -> str:
        """Hash: file name -> InvalidFile JSON (`store.runs`) of each file of the inbox that
        failed to parse, as it is now."""
        return self._sub("invalid")

    @property
    def refused(self) -> str:
        """Hash: file name -> RefusedFile JSON (`store.runs`) of each file of the inbox whose
        translation the outbox refused, as it is now."""
        return self._sub("refused")

    @property
    def settling(self) -> str:
        """Hash: file name -> "size:mtime_ns:since_ns" of each file the last scan left to
        settle (`producer.inbox`)."""
        return self._sub("settling")

    @property
    def lock(self) -> str:
        """The lock that keeps runs of the entry from overlapping."""
        return self._sub("lock")
