"""Celery workers: translate chunks of sentences and store the results by (job, slot).

The app is `worker.celery.app` (`celery -A worker worker`). Workers import `store` and the
model runtime (`models`), never the producer.
"""
