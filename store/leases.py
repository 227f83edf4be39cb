"""Leases: which chunks are being translated, by whom, and which runs died.

A run of a chunk (`LeaseStore.start`) records an entry in ``tq:running`` (the chunk's
items, the worker, a token) and takes a lease: a key that expires `lease_ttl` seconds
later unless its heartbeat (`held`) renews it. When a worker dies (kill -9, the OOM killer)
or stops (SIGSTOP), its lease expires; a `Sweeper` (in every worker and in the scheduler)
then requeues the chunk at once instead of waiting for Celery's visibility timeout.

The delivery cap counts *strikes*: runs that died mid-chunk (a later run finds their entry
without a lease) or failed with an error. A redelivery after a Redis restart is none. A
chunk run twice (a paused worker that wakes up) changes nothing: results are written once
per slot.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import redis
from kombu.exceptions import OperationalError

from store import connection, defaults, scripts
from store.connection import redis_away
from store.errors import load_json, printable
from store.keys import NAME_PATTERN, NUMBER_PATTERN, RUNNING_KEY, JobKeys
from store.queues import BadQueue, check_chunk_queue, queue_length, send_chunks, send_delivery

if TYPE_CHECKING:
    from store.jobstore import JobInfo, JobStore

logger = logging.getLogger(__name__)


#: This process's life: tells its runs from those of an earlier process with the same host
#: name and pid, such as a worker container restarted after a crash (pid 1 again), whose
#: dead run must count as a strike (`scripts.START_RUN`). Forked children share it and
#: differ by pid.
_LIFE = uuid.uuid4().hex[:8]


def current_worker() -> str:
    """host:pid:life of this process: how runs, errors and presence keys name a worker."""
    return f"{socket.gethostname()}:{os.getpid()}:{_LIFE}"


#: What `LeaseStore.start` found: the job is gone, another live run holds the chunk, or
#: this run now holds it.
GONE, BUSY, STARTED = "gone", "busy", "started"


@dataclass(frozen=True)
class Run:
    """One run of a chunk: `attempt` is 1 + the chunk's strikes so far."""

    job_id: str
    chunk: int
    token: str
    state: str
    attempt: int = 1

    @property
    def field(self) -> str:
        """Its field in ``tq:running``."""
        return f"{self.job_id}:{self.chunk}"


@dataclass(frozen=True)
class LostRun:
    """A run whose lease expired: what is needed to send its chunk again."""

    job_id: str
    chunk: int
    items: list[list[object]]
    worker: str
    queue: str
    job_chunks: int

    def requeued_line(self) -> str:
        """What a sweeper logs once it requeued the chunk: the worker's name as the run entry
        stored it, its control characters escaped (`printable`)."""
        worker = printable(str(self.worker))
        return f"chunk {self.chunk} of job {self.job_id} was lost with worker {worker}: requeued"


class LeaseStore:
    """Starts, renews and ends runs of chunks, and finds those whose worker was lost."""

    def __init__(self, client: redis.Redis, lease_ttl: float, result_ttl: int) -> None:
        self.client = client
        self.lease_ms = int(lease_ttl * 1000)
        self.result_ttl = result_ttl
        self._start = client.register_script(scripts.START_RUN)
        self._renew = client.register_script(scripts.RENEW_LEASE)
        self._finish = client.register_script(scripts.FINISH_RUN)
        self._claim = client.register_script(scripts.CLAIM_LOST)

    def start(self, job_id: str, chunk: int, items: list[tuple[int, str]], worker: str, queue: str) -> Run:
        """Start a run of a chunk by `worker` (`current_worker`), which took it from `queue`, taking
        its lease."""
        keys, token = JobKeys(job_id), uuid.uuid4().hex
        entry = json.dumps(
            {"token": token, "worker": worker, "queue": queue, "items": items, "at": time.time()},
            ensure_ascii=False,
        )
        state, strikes = self._start(
            keys=[keys.meta, RUNNING_KEY, keys.lease(chunk), keys.deliveries, keys.strikes],
            args=[f"{job_id}:{chunk}", token, entry, self.lease_ms, self.result_ttl, chunk, worker],
        )
        name = {0: GONE, -1: BUSY}.get(int(state), STARTED)
        return Run(job_id, chunk, token, name, attempt=int(strikes) + 1)

    def renew(self, run: Run) -> bool:
        """Extend the run's lease; False once the run is no longer the chunk's current run."""
        keys = [RUNNING_KEY, JobKeys(run.job_id).lease(run.chunk)]
        return bool(self._renew(keys=keys, args=[run.field, run.token, self.lease_ms]))

    def finish(self, run: Run) -> None:
        """End the run: its entry and lease go (if they are still its own)."""
        self._finish(keys=[RUNNING_KEY, JobKeys(run.job_id).lease(run.chunk)], args=[run.field, run.token])

    def strike(self, job_id: str, chunk: int) -> int:
        """Count a failed run of a chunk; returns the chunk's strikes."""
        key = JobKeys(job_id).strikes
        pipe = self.client.pipeline()
        pipe.hincrby(key, str(chunk), 1)
        pipe.expire(key, self.result_ttl)
        return int(pipe.execute()[0])

    def unleased(self) -> list[str]:
        """Fields of ``tq:running`` whose lease is gone (their run died, or just ended).
        Fields that name no chunk of a job (corrupt, or written by someone else) are dropped.
        A lease with no expiry was set by no run (a run's lease always has one): it is made
        to expire within this process's lease TTL, so that it holds its chunk no longer than
        a dead run's lease would. (A long expiry is left as it is: workers of another model
        may run with a longer TRANSQUEUE_LEASE_TTL.)"""
        runs = {field: _chunk_of(field) for field in self.client.hkeys(RUNNING_KEY)}
        junk = [field for field, run in runs.items() if run is None]
        if junk:
            logger.warning("dropped %d corrupt entries of %s: %r", len(junk), RUNNING_KEY, junk[:5])
            self.client.hdel(RUNNING_KEY, *junk)
        fields = [(field, JobKeys(run[0]).lease(run[1])) for field, run in runs.items() if run is not None]
        pipe = self.client.pipeline()
        for _, lease in fields:
            pipe.pttl(lease)
        ttls = pipe.execute()
        endless = [lease for (_, lease), ttl in zip(fields, ttls, strict=True) if ttl == -1]
        if endless:
            for lease in endless:
                pipe.pexpire(lease, self.lease_ms)
            pipe.execute()
        return [field for (field, _), ttl in zip(fields, ttls, strict=True) if ttl == -2]

    def running_jobs(self) -> set[str]:
        """Jobs that may have a chunk being translated: an entry in ``tq:running`` with a live
        lease, or one whose run was lost but not yet claimed. A run a sweeper claimed (its
        chunk was requeued) is not running: should the requeued copy be lost too (a Redis
        crash), the job's stall watch sends the chunk again."""
        unleased = self.unleased()
        entries = self.client.hmget(RUNNING_KEY, unleased) if unleased else []
        claimed = {field for field, entry in zip(unleased, entries, strict=True) if _claimed(entry)}
        return {field.rpartition(":")[0] for field in self.client.hkeys(RUNNING_KEY) if field not in claimed}

    def claim_lost(self, field: str) -> LostRun | None:
        """Claim a run whose lease expired, once among all sweepers; None if there is none.
        A corrupt entry is dropped (None): the job's stall watch sends its unsettled chunks."""
        run = _chunk_of(field)
        if run is None:
            return None
        job_id, chunk = run
        keys = JobKeys(job_id)
        claimed = self._claim(keys=[RUNNING_KEY, keys.lease(chunk), keys.meta], args=[field])
        if claimed is None:
            return None
        if len(claimed) == 1:  # the script dropped it
            logger.warning("dropped the corrupt run entry %s of %s: not JSON", field, RUNNING_KEY)
            return None
        entry, job_chunks = claimed
        try:
            data = load_json(entry)
            return LostRun(job_id, chunk, data["items"], data["worker"], data["queue"], int(job_chunks))
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("dropped the corrupt run entry %s of %s: %r", field, RUNNING_KEY, exc)
            self.client.hdel(RUNNING_KEY, field)
            return None


def _claimed(entry: str | None) -> bool:
    """Whether a run entry is marked as claimed by a sweeper (`scripts.CLAIM_LOST`)."""
    try:
        run = load_json(entry) if entry is not None else None
    except ValueError:  # a corrupt entry: the sweeper drops it
        return False
    return isinstance(run, dict) and run.get("requeued") is True


def _chunk_of(field: str) -> tuple[str, int] | None:
    """(job id, chunk) of a ``tq:running`` field ``JOB:CHUNK``; None if it names none."""
    job_id, _, chunk = field.rpartition(":")
    if not NAME_PATTERN.fullmatch(job_id) or not NUMBER_PATTERN.fullmatch(chunk):
        return None
    return job_id, int(chunk)


@contextlib.contextmanager
def held(leases: LeaseStore, run: Run, interval: float) -> Iterator[None]:
    """Keep `run`'s lease alive every `interval` seconds while the block runs, then end it."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(interval):
            try:
                if not leases.renew(run):
                    return  # another run took the chunk over (this one was presumed lost)
            except redis.RedisError as exc:  # Redis restarting: try again at the next beat
                logger.warning("lease of chunk %s of job %s not renewed: %r", run.chunk, run.job_id, exc)

    heart = threading.Thread(target=beat, daemon=True, name=f"lease-{run.field}")
    heart.start()
    try:
        yield
    finally:
        stop.set()
        heart.join()
        _end(leases, run)


def _end(leases: LeaseStore, run: Run) -> None:
    """End `run`. While Redis is away (`store.connection.redis_away`) the run is ended once
    it is back, for up to `defaults.END_RUN_PATIENCE` seconds, before the chunk can go back
    to the queue (which needs Redis too): a run entry left behind would count as a death,
    a strike, when the chunk runs again. Past that, once the worker is shutting down
    (`store.connection.STOPPING`), or on any other error (a refused password among them), the lease
    expires by itself and the sweeper watches it."""
    deadline = time.monotonic() + defaults.END_RUN_PATIENCE
    while True:
        try:
            leases.finish(run)
            return
        except redis.RedisError as exc:
            # between tries, a short pause: the client has waited already if it lost Redis
            if (
                not redis_away(exc)
                or isinstance(exc, redis.AuthenticationError)
                or time.monotonic() >= deadline
                or connection.STOPPING.wait(defaults.BUSY_REDIS_PAUSE_S)
            ):
                logger.warning("run of chunk %s of job %s not ended: %r", run.chunk, run.job_id, exc)
                return


class Sweeper:
    """Requeues the chunks of lost runs: a lease missing for `grace` seconds (so that live
    workers can re-create leases a Redis restart lost) is claimed and its chunk sent again,
    at its job's priority, on the queue it was taken from. It also watches for stalled jobs
    (`stalls`): chunks lost with a Redis crash before any worker started them, and jobs
    whose every slot is settled that nothing finalized."""

    def __init__(self, store: JobStore, grace: float = defaults.LEASE_GRACE, serving: str = "") -> None:
        self.store = store
        self.serving = serving  # a worker's queue, announced at each sweep (`JobStore.serving`)
        self.leases = store.leases
        self.settings = store.settings
        self.grace = grace
        self._missing_since: dict[str, float] = {}
        self._progress: dict[str, tuple[tuple[int, int], float]] = {}
        self._corrupt: set[str] = set()  # jobs the stall watch skipped at its last pass (logged)
        self._unsent: dict[str, LostRun] = {}  # runs it claimed but failed to requeue, by field

    def requeue(self, lost: LostRun) -> None:
        """Send a lost run's chunk again, on the queue it was taken from; BadQueue (nothing
        sent: the job's stall watch sends it) if its entry names no chunk queue."""
        queue = check_chunk_queue(self.settings, lost.queue)
        send_chunks(self.settings, lost.job_id, [(lost.chunk, lost.items)], lost.job_chunks, queue)

    def sweep(self, now: float | None = None) -> list[LostRun]:
        """One pass; returns the runs it requeued."""
        now = time.monotonic() if now is None else now
        unleased = self.leases.unleased()
        self._missing_since = {f: self._missing_since.get(f, now) for f in unleased}
        due = [field for field, since in self._missing_since.items() if now - since >= self.grace]
        self._unsent = {field: lost for field, lost in self._unsent.items() if field in self._missing_since}
        return [lost for lost in map(self._requeue_lost, due) if lost is not None]

    def _requeue_lost(self, field: str) -> LostRun | None:
        """Claim the run of a ``tq:running`` field if it was lost (or take the one this
        sweeper claimed but failed to send), and requeue its chunk; None if it was not lost,
        or if it fails (logged): one bad entry never stops the pass."""
        try:
            if self._served_elsewhere(field):
                return None
            lost = self._unsent.pop(field, None) or self.leases.claim_lost(field)
            if lost is not None:
                self._requeue_claimed(field, lost)
            return lost
        # a corrupt record, a wrong type, BUSY, MISCONF (kombu's OperationalError while sending)
        except (ValueError, redis.ResponseError, OperationalError) as exc:
            logger.warning("lost run %s of %s not requeued: %s", field, RUNNING_KEY, exc)
            return None

    def _requeue_claimed(self, field: str, lost: LostRun) -> None:
        """Requeue the chunk of a run this sweeper claimed. If Redis does not take it (busy
        with a script, taking no writes, away), it is kept and sent at the next sweep while
        the run stays lost: no other sweeper can claim it again, and the stall watch would
        send it only `STALL_AFTER` later. A BadQueue is not kept: no sweep could send it,
        and the stall watch sends the job's unsettled chunks on the job's own queue."""
        try:
            self.requeue(lost)
        except (redis.RedisError, OperationalError):
            self._unsent[field] = lost
            raise

    def _served_elsewhere(self, field: str) -> bool:
        """Whether the run of a ``tq:running`` field was taken from a queue that is not one of
        this deployment's chunk queues but that live workers consume (another deployment on
        the same Redis, `JobStore.serving`): their sweeper requeues it, where this one could
        only claim it and send nothing. A corrupt entry is this sweeper's to drop."""
        entry = self.store.client.hget(RUNNING_KEY, field)
        try:
            queue = load_json(entry)["queue"] if entry is not None else None
        except (ValueError, KeyError, TypeError):
            return False
        if not isinstance(queue, str):
            return False
        try:
            check_chunk_queue(self.settings, queue)
        except BadQueue:
            return self.store.serving(queue) > 0
        return False

    def stalls(self, now: float | None = None, after: float = defaults.STALL_AFTER) -> list[str]:
        """Send again the unsettled chunks of every job that made no progress for `after`
        seconds while nothing of it runs and its queue is empty; returns those jobs' ids.
        A job whose records are corrupt is skipped, logged once, and the others watched; one
        that Redis answers busy for (a script running long) is skipped until the next pass."""
        now = time.monotonic() if now is None else now
        running = self.leases.running_jobs()
        resent, watched, corrupt = [], {}, set()
        for job_id in self.store.job_ids():
            try:
                if self._resend_if_stalled(job_id, now, after, running, watched):
                    resent.append(job_id)
            except (ValueError, redis.ResponseError) as exc:  # CorruptRecord, a wrong type, BUSY
                self._skip(job_id, exc, corrupt)
        self._progress, self._corrupt = watched, corrupt
        return resent

    def _skip(self, job_id: str, exc: ValueError | redis.ResponseError, corrupt: set[str]) -> None:
        """Log why the stall watch skips `job_id` this pass: Redis busy or taking no writes
        for now (`redis_away`: BUSY, MISCONF, ...), or its records corrupt (noted in
        `corrupt`, logged only when they were not at the last pass)."""
        if redis_away(exc):
            logger.warning(
                "stall watch skips job %s until its next pass: Redis is busy or takes no writes for now: %s",
                job_id,
                exc,
            )
            return
        corrupt.add(job_id)
        if job_id not in self._corrupt:
            logger.warning("stall watch skips job %s while its records are corrupt: %s", job_id, exc)

    def _resend_if_stalled(
        self,
        job_id: str,
        now: float,
        after: float,
        running: set[str],
        watched: dict[str, tuple[tuple[int, int], float]],
    ) -> bool:
        """Note the job's progress in `watched`; send its unsettled chunks again (True) if it
        stalled."""
        info = self.store.info(job_id)
        if info is None or info.finished or info.state == "cancelled":
            return False
        if info.settled >= info.total:
            self._finish(info)
            return False
        mark = (info.settled, self.store.deliveries(job_id))
        last_mark, since = self._progress.get(job_id, (mark, now))
        watched[job_id] = (mark, since if last_mark == mark else now)
        queue = check_chunk_queue(self.settings, info.queue or self.settings.queue)
        if (
            now - watched[job_id][1] < after
            or job_id in running
            or queue_length(self.settings, queue)
            or not self.store.claim_resend(job_id, after)
        ):
            return False
        send_chunks(self.settings, job_id, self.store.unsettled_chunks(job_id), info.chunks, queue)
        watched[job_id] = (mark, now)
        return True

    def _finish(self, info: JobInfo) -> None:
        """Finalize a job with every slot settled that nothing finalized (a write that failed
        part way, `store.scripts`), and send an inbox job for delivery as its last write would."""
        if self.store.try_finalize(info.job_id):
            logger.warning("job %s had every slot settled but was not finished: finalized", info.job_id)
            if info.extra.get("inbox"):
                send_delivery(self.settings, info.job_id)

    def run_forever(self, interval: float = defaults.SWEEP_INTERVAL) -> None:
        """Sweep every `interval` seconds, riding out Redis errors (for a daemon thread)."""
        while True:
            try:
                if self.serving:
                    self.store.announce(current_worker(), self.serving, interval * defaults.PRESENCE_SWEEPS)
                for lost in self.sweep():
                    logger.warning("%s", lost.requeued_line())
                for job_id in self.stalls():
                    logger.warning(
                        "job %s stalled with nothing queued: its unsettled chunks were sent again", job_id
                    )
            except (redis.RedisError, ValueError) as exc:  # ValueError: a corrupt record
                logger.warning("lease sweep failed: %r", exc)
            except Exception:  # the sweeper must outlive any bug or record: log it, sweep again
                logger.exception("lease sweep failed")
            time.sleep(interval)

    def start(self, interval: float = defaults.SWEEP_INTERVAL) -> threading.Thread:
        """Run `run_forever` in a daemon thread."""
        thread = threading.Thread(
            target=self.run_forever, args=(interval,), daemon=True, name="lease-sweeper"
        )
        thread.start()
        return thread
