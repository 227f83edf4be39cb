"""The workers' Celery app (`celery -A worker worker` finds it here): consumes the chunks."""

from __future__ import annotations

from store.queues import make_app

app = make_app(include=["worker.tasks"])
