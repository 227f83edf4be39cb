"""The scheduler: the producer-side Celery app that runs scheduled inbox jobs.

It consumes the inbox queue (TRANSQUEUE_INBOX_QUEUE) and, with beat, sends one scan task
per entry of the TRANSQUEUE_SCHEDULE file, and a catch-up task every
`producer.defaults.INBOX_CATCHUP_INTERVAL_S` that delivers finished jobs whose deliver
task was lost.
Scans read, segment and submit documents, and deliveries render and write them: producer
work, done next to the inbox and outbox directories, so translation workers never touch a
file system or import the producer. Run it with `transqueue scheduler` (or
`celery -A producer.scheduler worker --beat`).

Task messages are untrusted input (anyone who can write to Redis can send one): they
carry no paths. A scan names an inbox, a delivery a job, a catch-up nothing; directories
come only from this process's own schedule file, and a message naming anything else is
dropped with one log line.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import signal
import sys
from typing import Any

from celery import signals

from producer.inbox import deliver_finished, deliver_job, run_inbox
from producer.schedule import InboxEntry, beat_schedule, load_schedule
from store.config import Settings, env_settings
from store.jobstore import CorruptRecord, process_store
from store.keys import BadName, check_name
from store.leases import Sweeper
from store.queues import CATCHUP_TASK, DELIVER_TASK, INBOX, SCAN_TASK, make_app

logger = logging.getLogger(__name__)


@functools.cache
def schedule_of(path: str) -> tuple[InboxEntry, ...]:
    """The entries of the schedule file at `path`, read once a process: beat and the scans
    it sends use the same ones (an edit takes effect when the scheduler restarts)."""
    return load_schedule(path)


def beat_config(settings: Settings) -> dict[str, Any]:
    """Celery settings for beat: one scan per entry of the schedule file, if there is one,
    and the catch-up of their deliveries."""
    if not settings.schedule:
        return {}
    return {"beat_schedule": beat_schedule(schedule_of(settings.schedule))}


app = make_app(consumes=INBOX, extra=beat_config)


#: prctl(2) option: the signal a process gets when the thread that forked it exits.
PR_SET_PDEATHSIG = 1


@signals.beat_embedded_init.connect
def _end_with_the_scheduler(**_: Any) -> None:
    """Make the embedded beat process (`--beat`: a child of the scheduler) end with it.

    A scheduler killed outright (SIGKILL, the OOM killer) would otherwise leave its beat
    running, orphaned: it goes on sending every scan, and each restart of the scheduler adds
    one more beat. On Linux the kernel sends SIGTERM to beat when its parent dies; a parent
    already gone by now (beat's parent is no longer the process that started it) ends beat
    at once.
    """
    if not sys.platform.startswith("linux"):
        return
    from billiard.process import current_process

    parent = getattr(current_process(), "_parent_pid", None) or os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        logger.warning("beat will outlive a killed scheduler: prctl failed (errno %d)", ctypes.get_errno())
    elif os.getppid() != parent:
        os._exit(0)  # the scheduler died before the signal was asked for


@signals.worker_ready.connect
def _start_sweeper(**_: Any) -> None:
    """Requeue the chunks of dead workers too (`store.leases`): beat's side of the watch."""
    settings = env_settings()
    Sweeper(process_store(settings)).start()


def configured_inboxes() -> dict[str, InboxEntry]:
    """This process's inbox entries by name (from TRANSQUEUE_SCHEDULE; none without it)."""
    settings = env_settings()
    return {e.name: e for e in schedule_of(settings.schedule)} if settings.schedule else {}


def _only_argument(task: str, args: tuple[object, ...], kwargs: dict[str, object]) -> tuple[bool, object]:
    """(True, the argument) of a message of `task` that has exactly one positional argument,
    as transqueue sends them; else (False, None), the message dropped with one log line."""
    if len(args) == 1 and not kwargs:
        return True, args[0]
    logger.warning("dropped a %s message: it takes one argument, not %s", task, f"{[*args, *kwargs]!r:.80}")
    return False, None


@app.task(name=DELIVER_TASK, shared=False)
def deliver_inbox_job(*args: object, **kwargs: object) -> None:
    """Write a finished inbox job's outputs to its configured outbox and record the run. The
    argument is the job id; the task accepts any, so that a message of another shape is
    dropped with one log line rather than failed by Celery."""
    ok, job_id = _only_argument(DELIVER_TASK, args, kwargs)
    if not ok:
        return
    try:
        deliver_job(process_store(env_settings()), check_name(job_id), configured_inboxes())
    except (BadName, CorruptRecord) as exc:
        logger.warning("dropped a %s message: %s", DELIVER_TASK, exc)


@app.task(name=SCAN_TASK, shared=False)
def scan_inbox(*args: object, **kwargs: object) -> None:
    """One scheduled run of the configured inbox entry whose name is the argument (beat sends
    it); a message of another shape is dropped as `deliver_inbox_job` drops one."""
    ok, name = _only_argument(SCAN_TASK, args, kwargs)
    if not ok:
        return
    entry = configured_inboxes().get(name) if isinstance(name, str) else None
    if entry is None:
        logger.warning(
            "dropped a %s message: %s is not an inbox of this scheduler's schedule",
            SCAN_TASK,
            f"{name!r:.80}",
        )
        return
    run_inbox(process_store(env_settings()), entry)


@app.task(name=CATCHUP_TASK, shared=False)
def deliver_finished_inbox_jobs(*args: object, **kwargs: object) -> None:
    """Deliver the finished jobs of every configured inbox entry whose deliver task never came
    (`producer.inbox.deliver_finished`). It takes no arguments; it accepts any, so that a
    message with some is dropped with one log line rather than failed by Celery."""
    if args or kwargs:
        logger.warning(
            "dropped a %s message: it takes no arguments, not %s",
            CATCHUP_TASK,
            f"{[*args, *kwargs]!r:.80}",
        )
        return
    store = process_store(env_settings())
    for entry in configured_inboxes().values():
        try:
            deliver_finished(store, entry)
        except Exception:  # one entry's failure must not hold back the others' deliveries
            logger.exception("inbox %s: the deliveries' catch-up failed", entry.name)
