"""Celery workers of the distributed path; the app is `worker.celery.app` (`celery -A worker`)."""
