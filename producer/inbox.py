"""Scheduled corpus jobs: scan an inbox, submit new or changed files, deliver to the outbox.

One run of an entry, under a Redis lock so that runs of one entry never overlap:

1. deliver every earlier run whose job has finished (normally the deliver task, which the
   worker that finished the job sends to the scheduler, or the scheduler's catch-up, below,
   already did);
2. hash every document file of the inbox (found and named in the outbox as
   `transqueue translate INBOX --out OUTBOX` does, less the names in a directory or file
   starting with '.', which writers such as rsync use for files in progress) that has
   settled (below), reading it in pieces; a file whose path and content hash are neither
   delivered already nor in a run still being translated is read again and submitted
   (`producer.jobs.JobBuilder`, a window at a time), all in one job. A file changed
   between the two reads is submitted again at the next run, since its hash then differs
   from the one remembered;
3. record the run.

A file has settled once it has stayed unchanged for the entry's `settle` seconds: its
mtime is at least that old, or, for an mtime ahead of this clock (clock skew, a file
unpacked from an archive), an earlier scan at least that long ago found the same size and
mtime (the last scan's records of files whose mtime is less than `settle` old are kept for
this, `RunStore.settling`, those of files it took too, so that the next scan finds them
settled and does not defer them again).
A file still being written, a slow copy or an upload, is thus left for a later run,
listed as skipped ("deferred: ..."); it never waits on the clock to catch up with its mtime.

A file counts as done (its hash is remembered) once its translation is in the outbox, or
once it failed to parse: the run says why, and so does the entry's record of its invalid
files (`RunStore.read_invalid`) for as long as the file keeps that hash; it is tried again
when its content (or the entry) changes, and its record dropped then (a new one is made if
it fails again). A file that leaves the inbox is forgotten, so the remembered hashes and the
invalid files never outgrow it; an invalid-file record that is not one is dropped (logged)
and its file tried again.
A file that vanishes or cannot be read during the scan is recorded as skipped and tried
again at the next run.

A file whose translation the outbox refused (a directory in the place of its output, a
directory that cannot be written) is not submitted again while it keeps its hash: the entry
records it (`RunStore.read_refused`) with the job that holds its translation, and each scan
looks at its output's place (`_in_the_way`); once nothing is seen in the way it writes the
translation from that job, and marks the file delivered. A job that no longer holds it
(expired, cancelled) has the file submitted again then, and a file that changed is submitted
again at once, as any other.

The lock expires after TRANSQUEUE_INBOX_LOCK_TIMEOUT seconds (so a crashed run does not
block the entry for long); a thread extends it every third of that while the run goes on.
A lock lost anyway is noted in the run's message, never raised.

A deliver task can be lost (the worker killed before it sent it, Redis crashing before it
persisted it), and a delivery gives up when a run, or a crashed run's orphaned lock, holds
the lock. The scheduler's catch-up (`deliver_finished`, sent by beat every
`defaults.INBOX_CATCHUP_INTERVAL_S`) delivers such jobs without waiting for the entry's next
run: it reads the entry's run records and, only if a submitted run's job has ended, takes the
lock without waiting and delivers as a run does (a lock held is left for the next check). A
delivery reads its run under the lock and writes only a run still submitted, so a job is
never delivered twice.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import stat
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import redis
from redis.exceptions import LockError

from producer import defaults
from producer.documents import DocumentError, ReadOptions, format_of
from producer.files import contained, plan_files
from producer.inputs import failure, file_digest, input_digest, open_regular
from producer.jobs import (
    JobBuilder,
    JobGone,
    OriginalMissing,
    Rendered,
    check_targets,
    file_source,
    iter_documents,
    write_document,
)
from producer.schedule import InboxEntry
from store.defaults import MAX_INBOX_LOCK_TIMEOUT_S
from store.errors import is_text, printable
from store.jobstore import CANCELLED, PARTIAL, CorruptRecord, DocumentRecord, JobStore
from store.keys import BadName
from store.runs import (
    DELIVERED,
    FAILED,
    LOST,
    NOTHING_NEW,
    SKIPPED,
    SUBMITTED,
    InboxRun,
    InvalidFile,
    RefusedFile,
)

logger = logging.getLogger(__name__)


class _EntryLock:
    """The lock of an inbox entry, extended by a thread while held (see the module
    docstring). `problems` collects what went wrong with it instead of raising."""

    def __init__(self, store: JobStore, name: str) -> None:
        self.timeout = store.settings.inbox_lock_timeout
        self.lock = store.runs.lock(name, self.timeout)
        self.problems: list[str] = []
        self._stop = threading.Event()
        self._keeper = threading.Thread(target=self._keep, daemon=True, name=f"inbox-lock-{name}")

    def acquire(self, wait: float | None = None) -> bool:
        """Take the lock (waiting up to `wait` seconds, or not at all) and keep it alive."""
        taken = (
            self.lock.acquire(blocking=False)
            if wait is None
            else self.lock.acquire(blocking=True, blocking_timeout=wait)
        )
        if taken:
            self._keeper.start()
        else:
            self._bound_expiry()
        return bool(taken)

    def _bound_expiry(self) -> None:
        """Make a lock held with no expiry, or with one beyond the longest timeout any
        scheduler may have (`defaults.MAX_INBOX_LOCK_TIMEOUT_S`), expire within this one's
        timeout. A run's lock lives its scheduler's timeout from its last extension: one that
        outlives every timeout was not set by a run (a key tampered with, of any type), and
        would block the entry forever where a crashed run's lock blocks it for a timeout. A
        lock within the longest timeout is left alone: another scheduler's live run, with a
        longer timeout than this one, may hold it."""
        ttl = self.lock.redis.pttl(self.lock.name)
        if ttl == -1 or ttl > MAX_INBOX_LOCK_TIMEOUT_S * 1000:
            self.lock.redis.pexpire(self.lock.name, round(self.timeout * 1000))

    def _keep(self) -> None:
        while not self._stop.wait(self.timeout / 3):
            try:
                self.lock.reacquire()
            except (LockError, redis.RedisError) as exc:
                self.problems.append(f"the lock could not be extended ({exc})")
                return

    def note(self, run: InboxRun) -> InboxRun:
        """`run` with the lock's problems so far (or its loss) added to its message."""
        if not self.lock.owned() and not self.problems:
            self.problems.append("the lock expired during the run")
        if not self.problems:
            return run
        return replace(run, message="; ".join([*filter(None, [run.message]), *self.problems]))

    def release(self) -> None:
        """Stop extending and release; a lock that is no longer ours is logged, not raised."""
        self._stop.set()
        if self._keeper.is_alive():
            self._keeper.join()
        try:
            self.lock.release()
        except LockError as exc:
            logger.warning(
                "inbox lock %s: %s (%s)", self.lock.name, exc, "; ".join(self.problems) or "it expired"
            )


def run_inbox(store: JobStore, entry: InboxEntry) -> InboxRun:
    """One run of an inbox entry (see the module docstring); returns its record."""
    run = InboxRun(
        run_id=f"{time.time_ns() // 1_000_000:013d}-{uuid.uuid4().hex[:4]}",
        inbox=entry.name,
        started=time.time(),
        state=NOTHING_NEW,
    )
    lock = _EntryLock(store, entry.name)
    if not lock.acquire():
        run = replace(
            run, state=SKIPPED, finished=time.time(), message="the previous run still holds the lock"
        )
        store.runs.save(run)
        return run
    try:
        store.runs.replace_corrupt(entry.name)
        _deliver_submitted(store, entry)
        run = lock.note(_submit_new(store, entry, run))
        store.runs.save(run)
        return run
    finally:
        lock.release()


def _submit_new(store: JobStore, entry: InboxEntry, run: InboxRun) -> InboxRun:
    seen = store.runs.seen(entry.name)
    known, corrupt = store.runs.read_invalid(entry.name)
    refused, corrupt_refused = store.runs.read_refused(entry.name)
    for problem in [*corrupt, *corrupt_refused]:
        logger.warning("%s: dropped, its file is tried again", problem)
    pending = {
        (name, digest)
        for r in store.runs.list(entry.name)
        if r.state == SUBMITTED
        for name, digest in r.files.items()
    }
    options = ReadOptions(
        fields=entry.fields,
        reflow=entry.reflow,
        columns=entry.columns,
        protect=(*defaults.PROTECT_PATTERNS, *entry.protect),
    )
    inbox, outbox = Path(entry.inbox), Path(entry.outbox)
    try:
        tasks = plan_files([inbox], outbox, hidden=False, mirrors=False)  # outputs go to the outbox
    except (DocumentError, OSError) as exc:
        return replace(run, state=FAILED, finished=time.time(), message=str(exc))
    named = {str(task.source.relative_to(inbox)): task for task in tasks}
    store.runs.forget_seen(entry.name, [name for name in seen if name not in named])
    # invalid-file records to drop: not records, files gone, and (below) files changed
    dropped = [problem.entry for problem in corrupt] + [name for name in known if name not in named]
    # refused-file records to drop: the same, and files whose translation is gone (below)
    unrefused = [problem.entry for problem in corrupt_refused] + [
        name for name in refused if name not in named
    ]
    written, blocked = {}, {}  # refused files delivered now, and those still refused
    settings = _settings_digest(entry, options)
    job = JobBuilder(store, options)
    earlier, settling, waiting = store.runs.settling(entry.name), {}, []
    files, invalid, skipped = {}, {}, {}
    for name, task in named.items():
        if not is_text(name):
            skipped[printable(name)] = "the file name is not UTF-8"
            continue
        try:
            record, deferred = _settling(task.source.stat(), earlier.get(name), entry.settle)
            if record:
                settling[name] = record
            if deferred:
                skipped[name] = deferred
                waiting.append(name)
                continue
            content = _digest(task.source, options)
        except OSError as exc:  # it vanished (or is unreadable) since the listing
            skipped[name] = exc.strerror or str(exc)
            continue
        except DocumentError as exc:  # not a regular file, or a line over the limit
            skipped[name] = str(exc)
            continue
        digest = f"{content}:{settings}"
        if name in refused:
            if refused[name].digest == digest:
                with contextlib.suppress(JobGone):  # the translation is gone: submitted again
                    kept = _retry_refused(store, entry, name, task.target, refused[name])
                    if kept is None:
                        written[name] = digest
                    else:
                        blocked[name] = kept
                    continue
            unrefused.append(name)
        if name in known:
            if known[name].digest == digest:
                continue  # still invalid as it was found
            dropped.append(name)
        # a bare sha256 is a record from before the settings were part of it: taken as made
        # with the current settings, so an upgrade translates nothing again
        if seen.get(name) in (digest, content) or {(name, digest), (name, content)} & pending:
            continue
        try:
            job.add(file_source(task, outbox))
        except OSError as exc:  # it vanished since it was hashed
            skipped[name] = exc.strerror or str(exc)
            continue
        except DocumentError as exc:
            invalid[name] = str(exc)
            store.runs.mark_invalid(entry.name, {name: InvalidFile(digest, str(exc), time.time())})
            continue
        files[name] = digest
    store.runs.forget_invalid(entry.name, [name for name in dropped if name not in invalid])
    store.runs.keep_settling(entry.name, settling)
    message = _settle_refused(store, entry.name, written, blocked, unrefused)
    if waiting:
        logger.info(
            "inbox %s: %d file(s) deferred until they settle: %s",
            entry.name,
            len(waiting),
            ", ".join(waiting),
        )
    run = replace(run, invalid=invalid, skipped=skipped, message=message, finished=time.time())
    if not files:
        job.discard()
        return run
    # Recorded before its job is queued: a crash in between leaves a run whose job is missing,
    # which the next run finds LOST and submits again, never a job that no run delivers.
    run = replace(run, state=SUBMITTED, files=files, job=job.job_id, finished=None)
    store.runs.save(run)
    job.submit(out=entry.outbox, origin=f"inbox {entry.name}", extra={"inbox": entry.name, "run": run.run_id})
    return run


def _settling(status: os.stat_result, earlier: str | None, settle: float) -> tuple[str | None, str | None]:
    """The record of the file of `status` to keep for the next scan (`earlier` is the last
    scan's, if any), and why it is deferred (None once it has settled; see the module
    docstring). The record is kept while the mtime is less than `settle` old, ahead of this
    clock say, even once the file has settled, so that the next scan finds it settled too
    instead of deferring it anew. Anything but a regular file is never deferred: the read
    refuses it, as ever."""
    if not stat.S_ISREG(status.st_mode):
        return None, None
    now, limit = time.time_ns(), round(settle * 1e9)
    age = now - status.st_mtime_ns
    if age >= limit:
        return None, None
    shape = f"{status.st_size}:{status.st_mtime_ns}:"
    since = now
    if earlier and earlier.startswith(shape):  # unchanged since the last scan
        with contextlib.suppress(ValueError):  # a record garbled in Redis counts as none
            since = min(now, int(earlier.removeprefix(shape)))
    record = f"{shape}{since}"
    if now - since >= limit:
        return record, None
    if age >= 0:
        why = f"changed {age / 1e9:.1f} s ago; taken once unchanged for {settle:g} s"
    else:
        why = f"its mtime is {-age / 1e9:,.1f} s ahead of this clock; taken once unchanged for {settle:g} s"
    return record, f"deferred: {why}"


def _retry_refused(
    store: JobStore, entry: InboxEntry, name: str, target: Path, record: RefusedFile
) -> RefusedFile | None:
    """Write the translation of inbox file `name` that the outbox refused at `target` (`record`:
    the file is unchanged since) unless something is seen in the way: None once written, else
    `record` saying why not now. JobGone when nothing is in the way but the job no longer
    holds the translation (`_write_translation`)."""
    try:
        error = _in_the_way(target)
        if error is None:
            _write_translation(store, entry, record.job, name, target)
            return None
    except OSError as exc:  # the outbox refused it again
        error = exc
    return replace(record, error=failure(target.relative_to(entry.outbox), error))


def _in_the_way(target: Path) -> OSError | None:
    """What is seen, without writing, to keep an output from being written at `target`: a
    directory in its place, something other than a directory in the place of one of its
    directories, or a directory that cannot be written; None when nothing is (a write may
    still fail, on a full disk say)."""
    if target.is_dir():
        return IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    existing = next(path for path in target.parents if os.path.lexists(path))
    if not existing.is_dir():
        reason = f"{os.strerror(errno.ENOTDIR)} ({existing} exists and is not a directory)"
        return NotADirectoryError(errno.ENOTDIR, reason)
    if not os.access(existing, os.W_OK | os.X_OK):
        return PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    return None


def _write_translation(store: JobStore, entry: InboxEntry, job_id: str, name: str, target: Path) -> None:
    """Write the translation of inbox file `name` that job `job_id` holds to `target`.
    JobGone when the job does not hold it (any more): expired, cancelled, not a finished job
    of the entry that has the file, records of it that are not what this transqueue writes
    (a job id, a record, a layout or a translation tampered with, results gone), or a
    Parquet original that changed."""
    try:
        info = store.info(job_id)
        if info is None or not info.finished or info.state == CANCELLED:
            raise JobGone(f"job {job_id} is gone or not finished")
        if info.extra.get("inbox") != entry.name:
            raise JobGone(f"job {job_id} is not a job of inbox {entry.name}")
        for rendered in iter_documents(store, job_id, follow=False, poll_interval=0):
            if _inbox_name(Path(entry.inbox), rendered.record) == name:
                _write(rendered, entry, name, target)
                return
    except (CorruptRecord, BadName, DocumentError) as exc:
        raise JobGone(str(exc)) from None
    raise JobGone(f"job {job_id} holds no translation of {name}")


def _settle_refused(
    store: JobStore, inbox: str, written: dict[str, str], blocked: dict[str, RefusedFile], dropped: list[str]
) -> str:
    """Record what a scan found of the files whose output the outbox refused: `written` (name
    -> digest) delivered now, `blocked` still refused, `dropped` records to forget (files
    changed or gone, records that are not records). Logs those still refused; returns the
    run's message about those written."""
    store.runs.mark_seen(inbox, written)
    store.runs.mark_refused(inbox, blocked)
    store.runs.forget_refused(inbox, [*dropped, *written])
    if blocked:
        logger.warning(
            "inbox %s: %d file(s) not delivered, the outbox refuses them (not translated again "
            "while unchanged): %s",
            inbox,
            len(blocked),
            "; ".join(record.error for record in blocked.values()),
        )
    return "; ".join(f"{name}: delivered, the outbox refused it before" for name in written)


def _settings_digest(entry: InboxEntry, options: ReadOptions) -> str:
    """A short hash of what a file's output depends on besides its bytes: the entry's
    fields, columns, reflow, protected patterns (TRANSQUEUE_PROTECT's included) and outbox.
    It is part of every digest recorded, so that a file is submitted again when any of them
    changes: an invalid file once its entry is fixed, every file for a new outbox."""
    settings = {
        "fields": list(options.fields),
        "columns": [str(column) for column in options.columns],
        "reflow": options.reflow,
        "protect": list(options.protect),
        "outbox": entry.outbox,
    }
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def _digest(path: Path, options: ReadOptions) -> str:
    """The sha256 of an inbox file: of its bytes as submit reads them (decompressed, within the
    line limit); of a Parquet file as it is."""
    try:
        fmt = format_of(path)
    except DocumentError:
        fmt = ""  # refused when it is added, as any file of an unknown format
    if fmt == "parquet":
        with open_regular(path) as handle:
            return file_digest(handle)[1]
    return input_digest(path, options.limits)


def deliver_job(store: JobStore, job_id: str, entries: Mapping[str, InboxEntry]) -> None:
    """Deliver the inbox run of a finished job (the task the finishing worker sends).

    The job names its inbox; the outbox comes from `entries`, this scheduler's own
    configuration, never from the job: a job naming an inbox that is not configured here
    is not delivered (one log line).
    """
    info = store.info(job_id)
    if info is None or "inbox" not in info.extra:
        return
    entry = entries.get(info.extra["inbox"])
    if entry is None:
        logger.warning(
            "job %s names inbox %r, which is not in this scheduler's schedule: not delivered",
            job_id,
            info.extra["inbox"],
        )
        return
    lock = _EntryLock(store, entry.name)
    if not lock.acquire(wait=5):
        return  # a run, delivery or catch-up of the entry holds it: the catch-up delivers it later
    try:
        run = store.runs.get(entry.name, info.extra.get("run", ""))
        if run is not None:
            _deliver(store, run, entry)
    finally:
        lock.release()


def deliver_finished(store: JobStore, entry: InboxEntry) -> None:
    """The catch-up of an entry (see the module docstring): deliver its submitted runs whose
    job has ended, unless a run or delivery of the entry holds its lock. With none, it only
    reads the entry's run records and the jobs of those still submitted."""
    runs, _ = store.runs.read(entry.name)  # a record that is not a run is the scan's to report
    if not _ended(store, [run.job for run in runs if run.state == SUBMITTED]):
        return
    lock = _EntryLock(store, entry.name)
    if not lock.acquire():
        return  # a run or delivery of the entry is going on, or a crashed run's lock: the next check
    try:
        _deliver_submitted(store, entry)
    finally:
        lock.release()


def _ended(store: JobStore, jobs: list[str]) -> bool:
    """Whether any of `jobs` (those of submitted runs) has ended for `_write_outputs`:
    finished, cancelled, expired, or not a job (a record or an id tampered with)."""
    if not jobs:
        return False
    try:
        infos = {info.job_id: info for info in store.infos(jobs)}
    except BadName:
        return True
    return any(job not in infos or infos[job].finished or infos[job].state == CANCELLED for job in jobs)


def _deliver_submitted(store: JobStore, entry: InboxEntry) -> None:
    """`_deliver` every submitted run of the entry, as recorded now (the caller holds the
    entry's lock: a run another delivery wrote meanwhile reads as delivered, and is skipped)."""
    for run in store.runs.list(entry.name):
        if run.state == SUBMITTED:
            _deliver(store, run, entry)


def _deliver(store: JobStore, run: InboxRun, entry: InboxEntry) -> None:
    """`_write_outputs`, a failure recorded as the run's (a document that cannot be rendered, a
    record missing or corrupt, a job id that names no job or another run's job, a job gone
    during the delivery, an outbox error): no later run of the inbox is blocked by it, and
    the run's files are submitted again."""
    try:
        _write_outputs(store, run, entry)
    except (DocumentError, CorruptRecord, BadName, JobGone, OSError) as exc:
        store.runs.save(replace(run, state=FAILED, finished=time.time(), message=str(exc)))


def _write_outputs(store: JobStore, run: InboxRun, entry: InboxEntry) -> None:
    """Write a submitted run's outputs into the entry's outbox if its job finished, and
    record the outcome; a stored target that would land outside the outbox fails the run,
    writing nothing. A Parquet document is written from its file in the entry's inbox, which
    must be unchanged since the scan; if it is not, that document is not delivered (the run
    says so) and its file is submitted again at the next run."""
    outbox = Path(entry.outbox)
    if run.state != SUBMITTED:
        return
    info = store.info(run.job)
    if info is None or info.state == CANCELLED:
        why = "its job expired" if info is None else "its job was cancelled"
        store.runs.save(
            replace(run, state=LOST, finished=time.time(), message=f"{why}; its files are submitted again")
        )
        return
    if not info.finished:
        return
    if (info.extra.get("inbox"), info.extra.get("run")) != (entry.name, run.run_id):
        raise CorruptRecord(f"job {run.job} is not the job of run {run.run_id} of inbox {entry.name}")
    try:
        check_targets(store.documents(run.job), outbox)
    except DocumentError as exc:
        store.runs.save(replace(run, state=FAILED, finished=time.time(), message=str(exc)))
        return
    delivered, problems, refused = dict(run.files), [], {}
    if info.state == PARTIAL:
        problems.append(f"{info.dead} sentences left untranslated (dead letters of job {run.job})")
    superseded = {  # files that a later run submitted again (they changed): its output wins
        name
        for later in store.runs.list(entry.name)
        if later.run_id > run.run_id and later.state in (SUBMITTED, DELIVERED)
        for name in later.files
    }
    for rendered in iter_documents(store, run.job, follow=False, poll_interval=0):
        record = rendered.record
        name = _inbox_name(Path(entry.inbox), record)
        if name in superseded:
            problems.append(f"{name}: not delivered, a later run submitted it again")
            delivered.pop(name, None)
            continue
        try:
            _write(rendered, entry, name, contained(outbox, record.target))
        except DocumentError as exc:  # the original changed, or the job's records are not
            # what was stored (a layout, a window's results gone): a new job reads it again
            why = str(exc) if isinstance(exc, OriginalMissing) else failure(record.target, exc)
            problems.append(f"{why} (not delivered; submitted again at the next run)")
            delivered.pop(name or "", None)
        except OSError as exc:  # the outbox refused it: the others go on
            why = failure(record.target, exc)
            if name is None or name not in delivered:  # none of the run's files (tampered with)
                problems.append(f"{why} (not delivered)")
                continue
            refused[name] = RefusedFile(delivered.pop(name), why, time.time(), run.job)
            problems.append(f"{why} (not delivered; written by a later run once the outbox takes it)")
    store.runs.mark_seen(run.inbox, delivered)
    store.runs.mark_refused(run.inbox, refused)
    message = "; ".join([run.message, *problems] if run.message else problems)  # the scan's kept
    store.runs.save(
        replace(
            run,
            state=DELIVERED,
            delivered=len(delivered),
            dead=info.dead,
            finished=time.time(),
            message=message,
        )
    )


def _write(rendered: Rendered, entry: InboxEntry, name: str | None, target: Path) -> None:
    """Write a document of a job of the entry to `target` (`write_document`); a Parquet one
    from its file `name` in the inbox, which must be unchanged since the scan."""
    originals = [Path(entry.inbox) / name] if rendered.record.fmt == "parquet" and name else []
    write_document(rendered, target, originals)


def _inbox_name(inbox: Path, record: DocumentRecord) -> str | None:
    """The name, relative to `inbox`, of the file a document of an inbox job was read from
    (as the run's files name it), or None if the recorded name is not one of the inbox (the
    record comes from Redis: a name with '..' is none). Symbolic links in the inbox are
    followed, as the scan follows them."""
    try:
        name = Path(record.name).relative_to(os.path.abspath(inbox))
    except ValueError:
        return None
    return None if ".." in name.parts else str(name)
