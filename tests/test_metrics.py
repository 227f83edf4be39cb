"""worker.metrics: job-level Prometheus metrics read from a real redis-server."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from store.config import Settings
from store.jobstore import JobStore, NewJob
from store.queues import send_chunks
from worker.metrics import JobMetrics

pytest_plugins = ["distributed_support"]


def test_job_metrics_and_queue_length(redis_server):
    redis_server.client().flushdb()
    settings = Settings(redis_url=redis_server.url, queue="metrics-test")
    store = JobStore.from_settings(settings)
    store.create(
        NewJob(
            job_id="j1",
            documents=1,
            segments=4,
            total=4,
            chunks=1,
            out="",
            origin="files",
        )
    )
    store.record("j1", 0, "a", "A", fingerprint="f", hit=False)
    store.record("j1", 1, "b", "B", fingerprint="f", hit=True)
    send_chunks(settings, "j1", enumerate([[], [], []]), 3)  # no worker consumes this queue
    registry = CollectorRegistry()
    registry.register(JobMetrics(store))
    text = generate_latest(registry).decode()
    for line in (
        'transqueue_job_sentences_done{job_id="j1"} 2.0',
        'transqueue_job_sentences_total{job_id="j1"} 4.0',
        'transqueue_job_cache_hits{job_id="j1"} 1.0',
        'transqueue_job_cache_hit_ratio{job_id="j1"} 0.5',
        'transqueue_job_dead_letters{job_id="j1"} 0.0',
        'transqueue_jobs{state="running"} 1.0',
        'transqueue_queue_length{queue="metrics-test"} 3.0',
        "transqueue_sentences_translated_total 1.0",
        "transqueue_cache_hits_total 1.0",
        "transqueue_cache_hit_ratio 0.5",
    ):
        assert line in text, text


def test_one_unreadable_job_record_fails_no_scrape(redis_server):
    redis_server.client().flushdb()
    store = JobStore.from_settings(Settings(redis_url=redis_server.url, queue="metrics-test"))
    store.create(NewJob(job_id="good", documents=1, segments=1, total=1, chunks=1, out="", origin="files"))
    store.client.zadd("tq:jobs", {"bad": 0})
    store.client.hset("tq:job:bad", "state", "running")  # no other field: not a job
    registry = CollectorRegistry()
    registry.register(JobMetrics(store))
    text = generate_latest(registry).decode()
    assert 'transqueue_job_sentences_total{job_id="good"} 1.0' in text and 'job_id="bad"' not in text


def test_a_job_finished_over_an_hour_ago_keeps_only_its_state_count(redis_server):
    import time

    from store.defaults import METRICS_FINISHED_WINDOW_S

    redis_server.client().flushdb()
    store = JobStore.from_settings(Settings(redis_url=redis_server.url, queue="metrics-test"))
    for job_id in ("old", "recent"):
        store.create(NewJob(job_id=job_id, documents=1, segments=1, total=1, chunks=1, out="", origin="f"))
        store.record(job_id, 0, "a", "A", fingerprint="f", hit=False)  # finishes the job
    ended = time.time() - METRICS_FINISHED_WINDOW_S - 60
    store.client.hset("tq:job:old", "finished_at", str(ended))
    registry = CollectorRegistry()
    registry.register(JobMetrics(store))
    text = generate_latest(registry).decode()
    assert 'transqueue_job_sentences_done{job_id="recent"} 1.0' in text
    assert 'job_id="old"' not in text and 'transqueue_jobs{state="done"} 2.0' in text


def test_a_job_naming_another_key_as_its_queue_fails_no_scrape(redis_server):
    redis_server.client().flushdb()
    settings = Settings(redis_url=redis_server.url, queue="metrics-test")
    store = JobStore.from_settings(settings)
    store.client.hset("tq:stats", "translated", 1)
    store.client.set("metrics-test.ffffffffffff", "not a list")
    for job_id, queue in (
        ("good", "metrics-test.0123456789ab"),
        ("other", "tq:stats"),
        ("bad", "metrics-test.ffffffffffff"),
    ):
        store.create(NewJob(job_id, 1, 1, 1, 1, "", "files", queue=queue))
    send_chunks(settings, "good", enumerate([[]]), 1, queue="metrics-test.0123456789ab")
    registry = CollectorRegistry()
    registry.register(JobMetrics(store))
    text = generate_latest(registry).decode()
    assert 'transqueue_queue_length{queue="metrics-test.0123456789ab"} 1.0' in text, text
    assert "tq:stats" not in text and "ffffffffffff" not in text
    assert all(
        f'transqueue_job_sentences_total{{job_id="{job}"}} 1.0' in text for job in ("good", "other", "bad")
    )


def test_a_scrape_while_redis_is_down_says_so_in_one_gauge(redis_server, caplog):
    """It was an HTTP 500 with a traceback logged at every scrape until Redis came back."""
    redis_server.client().flushdb()
    store = JobStore.from_settings(Settings(redis_url=redis_server.url, queue="metrics-test"))
    registry = CollectorRegistry()
    registry.register(JobMetrics(store))
    assert "transqueue_redis_up 1.0" in generate_latest(registry).decode()
    down = JobStore.from_settings(Settings(redis_url="redis://127.0.0.1:1/0", queue="metrics-test"))
    registry = CollectorRegistry()
    registry.register(JobMetrics(down))
    text = generate_latest(registry).decode()
    assert "transqueue_redis_up 0.0" in text and "transqueue_jobs" not in text, text
    assert [record.message[:45] for record in caplog.records] == [
        "scrape without metrics: Redis did not answer "
    ]
