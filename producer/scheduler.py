"""The scheduler: the producer-side Celery app that runs scheduled inbox jobs.

It consumes the inbox queue (TRANSQUEUE_INBOX_QUEUE) and, with beat, sends one scan task
per entry of the TRANSQUEUE_SCHEDULE file. Scans read, segment and submit documents, and
deliveries render and write them: producer work, done next to the inbox and outbox
directories, so translation workers never touch a file system or import the producer.
Run it with `transqueue scheduler` (or `celery -A producer.scheduler worker -B`).
"""

from __future__ import annotations

from typing import Any

from producer.inbox import deliver_job, run_inbox
from producer.schedule import InboxEntry, beat_schedule, load_schedule
from store.config import Settings, env_settings
from store.jobstore import process_store
from store.queues import DELIVER_TASK, INBOX, SCAN_TASK, make_app


def beat_config(settings: Settings) -> dict[str, Any]:
    """Celery settings for beat: one scan per entry of the schedule file, if there is one."""
    if not settings.schedule:
        return {}
    return {"beat_schedule": beat_schedule(load_schedule(settings.schedule))}


app = make_app(consumes=INBOX, extra=beat_config)


@app.task(name=DELIVER_TASK, shared=False)
def deliver_inbox_job(job_id: str) -> None:
    """Write a finished inbox job's outputs to its outbox and record the run."""
    deliver_job(process_store(env_settings()), job_id)


@app.task(name=SCAN_TASK, shared=False)
def scan_inbox(entry: dict[str, Any]) -> None:
    """One scheduled run of an inbox entry (beat sends the entry itself)."""
    run_inbox(process_store(env_settings()), InboxEntry.from_dict(entry))
