"""The Celery wiring both sides share: task names, queues and the app configuration.

Producers send tasks by name (`send_chunks`), workers and the scheduler register them on
apps made by `make_app`, so neither side imports the other's code. The translation
chunks travel on a queue per model, TRANSQUEUE_QUEUE.<model key> (`model_queue`), consumed
by the workers that run exactly that model; the inbox scan, delivery and catch-up tasks on
TRANSQUEUE_INBOX_QUEUE, consumed by the scheduler (`producer.scheduler`), so that a
delivery never waits behind queued chunks.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from celery import Celery, Task, signals
from celery.worker.request import Request
from kombu import Queue

from store import connection
from store.config import Settings, env_settings

logger = logging.getLogger(__name__)

TRANSLATE_TASK = "transqueue.translate_chunk"
DELIVER_TASK = "transqueue.deliver_inbox_job"
SCAN_TASK = "transqueue.scan_inbox"
CATCHUP_TASK = "transqueue.deliver_finished_inbox_jobs"
INBOX_TASKS = (SCAN_TASK, DELIVER_TASK, CATCHUP_TASK)

#: A model key (`model_key`): 12 hex digits.
_MODEL_KEY = re.compile(r"[0-9a-f]{12}")

#: Which queue an app consumes: the translation chunks, or the inbox tasks.
CHUNKS, INBOX = "chunks", "inbox"

#: Message priorities on the Redis broker, 0 first.
PRIORITIES = range(10)

#: (most chunks, priority): a job's chunks get the priority of the first bound its chunk
#: count fits; a larger job gets the lowest priority.
PRIORITY_BY_CHUNKS = ((2, 0), (8, 2), (64, 4), (512, 6))


def job_priority(chunks: int) -> int:
    """The message priority of a job of `chunks` chunks: the smaller the job, the sooner."""
    return next((priority for most, priority in PRIORITY_BY_CHUNKS if chunks <= most), PRIORITIES[-1])


def model_key(settings: Settings) -> str:
    """The key of the model the settings name (TRANSQUEUE_BUNDLE at TRANSQUEUE_PRECISION);
    BundleError when that bundle cannot be read."""
    from models.bundle import default_bundle_dir, read_manifest

    return read_manifest(settings.bundle_dir or default_bundle_dir()).model_key(settings.precision)


def model_queue(settings: Settings, key: str) -> str:
    """The chunk queue of a model: jobs for it wait there for the workers that run it."""
    return f"{settings.queue}.{key}"


class BadQueue(ValueError):
    """A queue name read back from Redis that names no chunk queue; the message quotes it."""


def check_chunk_queue(settings: Settings, queue: str) -> str:
    """`queue` if it is a chunk queue: TRANSQUEUE_QUEUE or a model's (`model_queue`, with a
    model key of 12 hex digits); else BadQueue. Queue names read back from Redis (a job's
    record, a run entry) are checked before chunks are sent to or counted on them: any
    other name could address another key."""
    key = queue.removeprefix(f"{settings.queue}.")
    if queue != settings.queue and (key == queue or not _MODEL_KEY.fullmatch(key)):
        raise BadQueue(f"{queue!r} is not a chunk queue ({settings.queue} or {settings.queue}.<model key>)")
    return queue


def celery_config(settings: Settings, consumes: str = CHUNKS) -> dict[str, Any]:
    """Celery settings for the distributed path; see the comments for the why of each."""
    from models.bundle import BundleError

    if consumes == INBOX:
        consumed = settings.inbox_queue
    else:
        try:
            consumed = model_queue(settings, model_key(settings))
        except BundleError:  # the worker's own check says what is wrong and exits
            consumed = settings.queue
    return {
        "broker_url": settings.redis_url,
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,  # ride out a Redis restart, however long
        "broker_transport_options": {
            "visibility_timeout": settings.visibility_timeout,
            "unacked_restore_interval": settings.restore_interval,
            "unacked_restore_throttle": 1,
            # Fairness: a small job's chunks are sent at a higher priority (0 is the highest
            # on Redis) than a large job's, so they never wait behind it (`job_priority`).
            "priority_steps": list(PRIORITIES),
            "queue_order_strategy": "priority",
        },
        # JSON only: a message can never make a worker unpickle anything.
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "event_serializer": "json",
        # Results live in the job store, not in a Celery result backend.
        "task_ignore_result": True,
        # A chunk is acked only after its results are written; a lost worker's chunk goes back.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "task_default_queue": settings.queue,
        # Each app consumes its own queue; the inbox tasks are routed to theirs by name.
        "task_queues": (Queue(consumed),),
        "task_routes": {task: {"queue": settings.inbox_queue} for task in INBOX_TASKS},
        "worker_pool": settings.pool,
        "worker_concurrency": settings.concurrency,
        "worker_max_memory_per_child": settings.max_memory_per_child,
        # Events for Flower.
        "worker_send_task_events": True,
        "task_send_sent_event": True,
        "timezone": "UTC",
    }


class UntimedRequest(Request):
    """A task request whose ETA (a message's ``eta`` or ``countdown``) is ignored: it runs when
    it arrives. transqueue never sends one; Celery holds a message with one in the worker's
    memory, unacknowledged, until that time (the message is sent again to a worker at each
    visibility timeout meanwhile), so forged messages with a far ETA would grow a worker or
    the scheduler without bound. Run now, each is checked and dropped like any other."""

    @property
    def eta(self) -> None:
        """None, whatever the message says."""
        return None


class OwnTask(Task):
    """The class of every task of transqueue's apps: its requests are `UntimedRequest`s."""

    Request = f"{__name__}:UntimedRequest"


def make_app(
    include: Sequence[str] = (),
    consumes: str = CHUNKS,
    extra: Callable[[Settings], dict[str, Any]] | None = None,
) -> Celery:
    """A Celery app configured from the environment when first used (so that importing it
    never fails on a bad variable), with the task modules `include` and `extra` settings."""
    app = Celery("transqueue", include=list(include), task_cls=OwnTask)

    def config() -> dict[str, Any]:
        settings = env_settings()
        return {**celery_config(settings, consumes), **(extra(settings) if extra else {})}

    app.add_defaults(config)
    return app


#: The remote-control commands that transqueue's workers and scheduler carry out: those that
#: only report (what Flower's pages and `celery inspect` read), `enable_events`, which turns
#: events on, and `heartbeat`, which has a heartbeat event sent at once (Flower asks for both,
#: as the README's security section says). The others (shutdown, pool_restart, add_consumer, revoke,
#: terminate, rate_limit, time_limit, autoscale, objgraph, memdump, ...) would let whoever
#: can write to Redis stop or steer every worker with one broadcast: each is refused, with
#: one log line.
ALLOWED_REMOTE_CONTROL = frozenset(
    {
        "active",
        "active_queues",
        "clock",
        "conf",
        "enable_events",
        "heartbeat",
        "hello",
        "ping",
        "query_task",
        "registered",
        "report",
        "reserved",
        "revoked",
        "scheduled",
        "stats",
    }
)


def _refusal(name: str) -> Callable[..., dict[str, str]]:
    """A control-panel handler that refuses the command `name` (any arguments): one log line,
    and an error for a caller waiting on a reply."""

    def refuse(state: Any, **arguments: Any) -> dict[str, str]:
        logger.warning("refused the remote-control command %s: not one of transqueue's", name)
        return {"error": f"{name} is refused by transqueue"}

    return refuse


@signals.worker_init.connect
def _carry_out_only_reports(**_: Any) -> None:
    """Have every command of Celery's control panel but the `ALLOWED_REMOTE_CONTROL` ones refused,
    before the worker (or the scheduler) starts taking broadcasts."""
    from celery.worker.control import Panel

    for name in set(Panel.data) - ALLOWED_REMOTE_CONTROL:
        Panel.data[name] = _refusal(name)


@signals.worker_shutting_down.connect
def _stop_waiting_on_redis(**_: Any) -> None:
    """A stop (Ctrl-C, SIGTERM) of a worker or the scheduler, whose apps `make_app` makes,
    ends every wait for Redis (`store.connection.STOPPING`): a call to a Redis that is away
    fails at once (a scan or delivery is redone at the next run), and a chunk's run is not
    waited on to end (its lease then expires by itself)."""
    connection.STOPPING.set()


#: The producers' app: it only sends tasks (chunks), by name.
client = make_app()


def send_chunks(
    settings: Settings,
    job_id: str,
    numbered: Iterable[tuple[int, Sequence[object]]],
    job_chunks: int,
    queue: str | None = None,
) -> None:
    """Queue (chunk number, items) pairs of a job of `job_chunks` chunks on `queue` (default:
    the settings' chunk queue), at the job's priority (`job_priority`)."""
    priority = job_priority(job_chunks)
    with client.connection_for_write(settings.redis_url) as connection:
        for n, items in numbered:
            client.send_task(
                TRANSLATE_TASK,
                args=[job_id, n, items],
                connection=connection,
                queue=queue or settings.queue,
                priority=priority,
                # Flower and the logs show this instead of the sentences themselves.
                argsrepr=f"job={job_id} chunk={n} sentences={len(items)}",
            )


def send_delivery(settings: Settings, job_id: str) -> None:
    """Send a finished inbox job to the scheduler, which writes it to its outbox."""
    with client.connection_for_write(settings.redis_url) as connection:
        client.send_task(DELIVER_TASK, args=[job_id], connection=connection, queue=settings.inbox_queue)


def queue_length(settings: Settings, queue: str) -> int:
    """Messages waiting in a Celery queue on the Redis broker."""
    with client.connection_for_read(settings.redis_url) as connection:
        return connection.default_channel.queue_declare(queue=queue).message_count
