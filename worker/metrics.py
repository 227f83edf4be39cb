"""Prometheus metrics of the distributed path, read from Redis at each scrape.

Per job (label ``job_id``: ``job`` is the label Prometheus gives every target), for jobs
not finished or finished within the last `METRICS_FINISHED_WINDOW_S`: sentences done and
total, cache hits and their ratio, dead letters. Overall: chunks waiting in each job's
(model's) queue and in the inbox queue, sentences translated, cache hits and dead letters
over all jobs, and jobs by state; and whether Redis answered the scrape
(``transqueue_redis_up``): while it does not, that gauge (0) is all a scrape returns, and
the exporter logs one line a scrape, not a traceback.
Served by `transqueue metrics --port`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter
from collections.abc import Iterator

import redis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from store.defaults import METRICS_FINISHED_WINDOW_S
from store.jobstore import JobStore
from store.queues import BadQueue, check_chunk_queue, queue_length

logger = logging.getLogger(__name__)


class JobMetrics(Collector):
    """A prometheus_client collector over the job store."""

    def __init__(self, store: JobStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        """Yield the metrics described in the module docstring, all read before the first is
        yielded: a scrape that loses Redis part way returns ``transqueue_redis_up`` 0 alone,
        never some of the others."""
        up = GaugeMetricFamily("transqueue_redis_up", "1 if Redis answered this scrape, else 0")
        try:
            metrics = list(self._read())
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            logger.warning("scrape without metrics: Redis did not answer (%s)", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from metrics

    def _read(self) -> Iterator[Metric]:
        job = ["job_id"]
        done = GaugeMetricFamily(
            "transqueue_job_sentences_done", "Distinct sentences of the job translated", labels=job
        )
        total = GaugeMetricFamily(
            "transqueue_job_sentences_total", "Distinct sentences of the job", labels=job
        )
        hits = GaugeMetricFamily(
            "transqueue_job_cache_hits", "Sentences of the job taken from the translation memory", labels=job
        )
        ratio = GaugeMetricFamily(
            "transqueue_job_cache_hit_ratio", "Cache hits / sentences done, for the job", labels=job
        )
        dead = GaugeMetricFamily(
            "transqueue_job_dead_letters", "Sentences of the job in dead letters", labels=job
        )
        states: Counter[str] = Counter()
        queues = {self.store.settings.inbox_queue}
        recent = time.time() - METRICS_FINISHED_WINDOW_S
        # one round trip for every job; a record that is not a job is skipped (`transqueue
        # jobs` names it): one bad record fails no scrape
        for info in self.store.infos(self.store.job_ids()):
            states[info.state] += 1
            if info.queue:
                with contextlib.suppress(BadQueue):  # only chunk queues are measured, no other key
                    queues.add(check_chunk_queue(self.store.settings, info.queue))
            if info.finished_at is not None and info.finished_at < recent:
                continue
            job_id = info.job_id
            done.add_metric([job_id], info.done)
            total.add_metric([job_id], info.total)
            hits.add_metric([job_id], info.hits)
            ratio.add_metric([job_id], info.hits / info.done if info.done else 0.0)
            dead.add_metric([job_id], info.dead)
        yield from (done, total, hits, ratio, dead)

        jobs = GaugeMetricFamily("transqueue_jobs", "Known jobs by state", labels=["state"])
        for state, count in sorted(states.items()):
            jobs.add_metric([state], count)
        yield jobs

        settings = self.store.settings
        queued = GaugeMetricFamily("transqueue_queue_length", "Chunks waiting for a worker", labels=["queue"])
        for queue in sorted(queues):  # the inbox queue and every known job's model queue
            try:
                queued.add_metric([queue], queue_length(settings, queue))
            except redis.ResponseError:  # its key holds something else (a stored record, tampered)
                continue
        yield queued

        stats = self.store.stats()
        translated, cached = stats.get("translated", 0), stats.get("hits", 0)
        yield CounterMetricFamily(
            "transqueue_sentences_translated", "Sentences translated by the model", value=translated
        )
        yield CounterMetricFamily(
            "transqueue_cache_hits", "Sentences taken from the translation memory", value=cached
        )
        yield CounterMetricFamily("transqueue_dead_letters", "Sentences given up", value=stats.get("dead", 0))
        overall = GaugeMetricFamily(
            "transqueue_cache_hit_ratio", "Cache hits / all sentences settled by the workers"
        )
        overall.add_metric([], cached / (cached + translated) if cached + translated else 0.0)
        yield overall
