"""The worker's Celery task: translate a chunk of a job (and its process's set-up signals)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import redis
from celery import concurrency, signals
from celery.concurrency.prefork import TaskPool as ForkPool
from celery.exceptions import Reject

from store import connection
from store.config import env_settings
from store.connection import redis_away
from store.defaults import BUSY_REDIS_MAX_PAUSE_S, BUSY_REDIS_PAUSE_S, ORPHAN_REASON_CHARS
from store.jobstore import CANCELLED, CorruptRecord, DeadLetter, JobInfo, JobStore, process_store
from store.keys import quoted, shortened
from store.leases import BUSY, GONE, Run, Sweeper, current_worker, held
from store.queues import TRANSLATE_TASK, model_key, model_queue, send_delivery
from worker import runtime
from worker.celery import app
from worker.chunks import process_chunk
from worker.messages import BadMessage, ChunkMessage, check_ranges, check_stored, parse_arguments

logger = logging.getLogger(__name__)


@signals.worker_init.connect
def _load_the_model(sender: Any = None, **_: Any) -> None:
    """Fail fast: a worker whose bundle cannot be loaded exits before it takes any chunk.

    The solo and threads pools translate in this process: the Translator is loaded here,
    and hashes the bundle's files while it creates its sessions. The prefork pool's
    children load their own after the fork (`_load_after_fork`); the files are hashed once,
    here in the parent.
    """
    from models.bundle import BundleError

    settings = env_settings()
    try:
        if _forks(sender):
            warnings = runtime.check_bundle(settings)
        else:
            warnings = runtime.loaded_bundle_warnings(settings)
    except BundleError as error:
        raise SystemExit(f"Error: cannot load the model: {runtime.explained(error)}") from None
    for warning in warnings:  # however the worker was started (transqueue worker, celery -A worker)
        logger.warning("%s", warning)


def _forks(worker: Any) -> bool:
    """Whether `worker` (a WorkController, its pool not yet made) runs a prefork pool."""
    pool = concurrency.get_implementation(getattr(worker, "pool_cls", None) or "prefork")
    return issubclass(pool, ForkPool)


@signals.worker_process_init.connect
def _load_after_fork(**_: Any) -> None:
    """Prefork children: sessions are created here, after the fork (for the solo pool,
    which sends this signal too, the Translator is already loaded)."""
    runtime.load_translator(env_settings())


@signals.worker_ready.connect
def _start_sweeper(**_: Any) -> None:
    """Requeue the chunks of dead workers within seconds (`store.leases`)."""
    settings = env_settings()
    serving = model_queue(settings, model_key(settings))
    Sweeper(process_store(settings), serving=serving).start()


@app.task(name=TRANSLATE_TASK, shared=False)
def translate_chunk(*args: object, **kwargs: object) -> None:
    """Settle every (slot, sentence) pair of a chunk of a job; see `worker.chunks`.

    The arguments are a job id, a chunk number and its items; the task takes any, so that
    a message of another shape is refused as a bad message rather than by Celery.

    A message that is not a valid chunk of its job (`worker.messages`), or whose job's
    records cannot be read (a key of the wrong type, a script error), is dropped at once.
    The run holds a lease on the chunk while it translates (`store.leases`): if this worker
    dies, a sweeper requeues the chunk within seconds. A bug sends the chunk back to the
    queue; past the delivery cap (counted in strikes: runs that died or raised, not Redis
    outages) its remaining sentences are dead-lettered with the error instead, so no chunk
    loops forever. A chunk is never acknowledged with sentences unsettled: if Redis goes
    away, it goes back to the queue.
    """
    settings = env_settings()
    store = process_store(settings)
    try:
        message = parse_arguments(args, kwargs)
    except BadMessage as exc:
        _drop(store, args, exc)
        return
    job_id, chunk, pairs = message.job_id, message.chunk, message.pairs
    try:
        info = _checked(store, message)
        run = _started(store, message, info, settings.queue)
    except (BadMessage, CorruptRecord, redis.RedisError) as exc:
        if redis_away(exc):  # the job store cannot be used now: try again later
            raise _requeued(f"chunk {chunk} of job {job_id}: {exc!r}", exc) from exc
        _drop(store, args, exc)  # the job's records are bad: retrying could only fail again
        return
    REFUSALS.reset()  # Redis took the run's first writes
    if info is not None and info.state == CANCELLED:
        return
    if info is None or run is None or run.state == GONE:  # the job is gone (or expired just now)
        _set_aside(store, job_id, chunk, len(pairs))
        return
    if run.state == BUSY:  # a live run has it (this is a duplicate); the sweeper watches it
        logger.info("chunk %s of job %s is being translated by a live run: skipped", chunk, job_id)
        return
    with held(store.leases, run, settings.lease_ttl / 5):
        try:
            translator = runtime.load_translator(settings)
            finalized = process_chunk(
                store, translator, job_id, chunk, pairs, run.attempt, settings.max_deliveries
            ).finalized
        except Exception as exc:
            if redis_away(exc):  # not the chunk's fault: no strike
                raise _requeued(f"chunk {chunk} of job {job_id}: {exc!r}", exc) from exc
            finalized = _settle_failure(store, settings.max_deliveries, job_id, chunk, pairs, exc)
    if finalized and info.extra.get("inbox"):  # the scheduler writes it to its outbox
        send_delivery(settings, job_id)


class RefusalPause:
    """The pause before a chunk goes back to the queue because Redis answered that it takes
    no writes for now: `BUSY_REDIS_PAUSE_S`, doubled for each such chunk in a row, up to
    `BUSY_REDIS_MAX_PAUSE_S`, so that a Redis that stays busy or full is not asked again
    every second for each waiting message; `reset` once a chunk's run starts."""

    def __init__(self) -> None:
        self.in_a_row = 0

    def next(self) -> float:
        """Seconds to wait before this refusal's chunk goes back; counts the refusal."""
        pause = min(BUSY_REDIS_PAUSE_S * 2 ** min(self.in_a_row, 32), BUSY_REDIS_MAX_PAUSE_S)
        self.in_a_row += 1
        return pause

    def reset(self) -> None:
        """Redis took a run's writes: the next refusal pauses `BUSY_REDIS_PAUSE_S` again."""
        self.in_a_row = 0


#: This process's refusals in a row (each pool process has its own).
REFUSALS = RefusalPause()


def _requeued(reason: str, exc: BaseException) -> Reject:
    """The Reject that sends a chunk back to the queue because Redis is away (`redis_away`).
    A Redis that answered at once (busy, out of memory) is given a pause first
    (`RefusalPause`), so that the message does not go round the queue in a tight loop; a
    connection lost has already been waited for by the patient store."""
    if isinstance(exc, redis.ResponseError):
        connection.STOPPING.wait(REFUSALS.next())
    return Reject(reason, requeue=True)


def _checked(store: JobStore, message: ChunkMessage) -> JobInfo | None:
    """The job of `message`, once the message is found to fit it (`worker.messages`); None
    if there is no such job. BadMessage, CorruptRecord or a Redis error otherwise."""
    info = store.info(message.job_id)
    if info is not None:
        check_ranges(message, info)
        check_stored(message, store.stored_chunk(message.job_id, message.chunk))
    return info


def _started(store: JobStore, message: ChunkMessage, info: JobInfo | None, queue: str) -> Run | None:
    """A run of the message's chunk (`store.leases`), taken from its job's queue (default:
    `queue`); None if the job is gone or cancelled."""
    if info is None or info.state == CANCELLED:
        return None
    worker = current_worker()
    return store.leases.start(message.job_id, message.chunk, message.pairs, worker, info.queue or queue)


def _set_aside(store: JobStore, job_id: str, chunk: int, sentences: int) -> None:
    """Record a chunk whose job does not exist (any more) in the orphan list."""
    store.add_orphan(
        {
            "job": job_id,
            "chunk": chunk,
            "sentences": sentences,
            "reason": "no such job (expired, or never created)",
            "at": time.time(),
        }
    )


def _drop(store: JobStore, args: Sequence[object], exc: Exception) -> None:
    """Drop a message (of arguments `args`) that is not a valid chunk of a job: one log line,
    one orphan record, both of bounded size whatever the message holds."""
    job_id, chunk = (*args, None, None)[:2]  # what the message names, if anything
    reason = shortened(str(exc), ORPHAN_REASON_CHARS)
    logger.warning("dropped a %s message: %s", TRANSLATE_TASK, reason)
    try:
        store.add_orphan(
            {
                "job": quoted(job_id),
                "chunk": quoted(chunk, 20),
                "reason": f"refused: {reason}",
                "at": time.time(),
            }
        )
    except redis.RedisError as lost:
        logger.warning("the dropped message could not be recorded: %r", lost)


def _settle_failure(
    store: JobStore,
    max_deliveries: int,
    job_id: str,
    chunk: int,
    pairs: list[tuple[int, str]],
    exc: Exception,
) -> bool:
    """Record a chunk's failure (a strike, shown in `transqueue status`): requeue it
    (Reject) below the cap, else dead-letter its sentences; whether that finalized the job.

    If Redis is away, the chunk goes back to the queue. If the job's records refuse the
    failure (a Redis error other than Redis being away: corrupt keys), the chunk is dropped,
    logged and recorded as an orphan, since retrying could only fail again."""
    try:
        strikes = store.leases.strike(job_id, chunk)
        store.add_error(
            job_id,
            {
                "at": time.time(),
                "chunk": chunk,
                "deliveries": strikes,
                "error": repr(exc),
                "worker": current_worker(),
            },
        )
        if strikes < max_deliveries:
            raise Reject(f"chunk {chunk} of job {job_id} failed: {exc!r}", requeue=True) from exc
        written = [
            store.dead_letter(
                job_id,
                DeadLetter(
                    slot=slot, text=text, reason=repr(exc), chunk=chunk, deliveries=strikes, at=time.time()
                ),
            )
            for slot, text in pairs
        ]
        return any(write.finalized for write in written)
    except redis.RedisError as refused:
        if redis_away(refused):
            raise _requeued(
                f"chunk {chunk} of job {job_id} failed ({exc!r}) and the failure "
                f"could not be recorded ({refused!r})",
                refused,
            ) from refused
        logger.error(
            "chunk %s of job %s failed (%r) and its job refused the failure: %r", chunk, job_id, exc, refused
        )
        _drop(
            store,
            (job_id, chunk),
            RuntimeError(f"its job's records refused the failure {exc!r}: {refused!r}"),
        )
        return False
