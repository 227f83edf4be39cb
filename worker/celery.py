"""The workers' Celery app (`celery -A worker worker` finds it here): consumes the chunks."""

from __future__ import annotations

from store.queues import make_app
from worker.malloc import tune_malloc

tune_malloc()  # at import, before the worker starts any thread (worker.malloc)
app = make_app(include=["worker.tasks"])
