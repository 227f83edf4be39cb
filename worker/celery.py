"""The Celery app (`celery -A worker worker` finds it here), configured from the environment."""

from __future__ import annotations

from typing import Any

from celery import Celery
from kombu import Queue

from worker.config import Settings, env_settings
from worker.schedule import SCAN_TASK, beat_schedule, load_schedule

TRANSLATE_TASK = "transqueue.translate_chunk"
DELIVER_TASK = "transqueue.deliver_inbox_job"


def celery_config(settings: Settings) -> dict[str, Any]:
    """Celery settings for the distributed path; see the comments for the why of each."""
    config: dict[str, Any] = {
        "broker_url": settings.redis_url,
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,  # ride out a Redis restart, however long
        "broker_transport_options": {
            "visibility_timeout": settings.visibility_timeout,
            "unacked_restore_interval": settings.restore_interval,
            "unacked_restore_throttle": 1,
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
        # Inbox tasks have a queue of their own, so that a delivery (or a scan) does not wait
        # behind every queued chunk; a worker consumes every queue declared here by default.
        "task_queues": (Queue(settings.queue), Queue(settings.inbox_queue)),
        "task_routes": {task: {"queue": settings.inbox_queue}
                        for task in (SCAN_TASK, DELIVER_TASK)},
        "worker_pool": settings.pool,
        "worker_concurrency": settings.concurrency,
        "worker_max_memory_per_child": settings.max_memory_per_child,
        # Events for Flower.
        "worker_send_task_events": True,
        "task_send_sent_event": True,
        "timezone": "UTC",
    }
    if settings.schedule:
        config["beat_schedule"] = beat_schedule(load_schedule(settings.schedule))
    return config


app = Celery("transqueue", include=["worker.tasks"])
# Read lazily: importing the app (producers do, to send chunks) never fails on the environment.
app.add_defaults(lambda: celery_config(env_settings()))
