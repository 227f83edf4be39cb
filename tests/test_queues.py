"""store.queues: the Celery settings of the distributed path, and which app consumes what."""

from __future__ import annotations

import json

import pytest
from celery.app.utils import find_app

from producer import scheduler
from producer.schedule import CATCHUP_ENTRY
from store.config import Settings
from store.queues import (
    CATCHUP_TASK,
    DELIVER_TASK,
    INBOX,
    SCAN_TASK,
    TRANSLATE_TASK,
    BadQueue,
    celery_config,
    check_chunk_queue,
    make_app,
    model_key,
    model_queue,
)
from worker.celery import app


def test_json_only_late_acks_prefetch_one():
    config = celery_config(Settings(visibility_timeout=1234, restore_interval=2))
    assert config["accept_content"] == ["json"]
    assert config["task_serializer"] == config["result_serializer"] == "json"
    assert config["task_acks_late"] and config["task_reject_on_worker_lost"]
    assert config["worker_prefetch_multiplier"] == 1
    assert config["broker_transport_options"]["visibility_timeout"] == 1234
    assert config["broker_transport_options"]["unacked_restore_interval"] == 2
    assert config["task_ignore_result"]
    assert "beat_schedule" not in config


def test_the_scheduler_beat_schedule_comes_from_the_schedule_file(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps({"inbox": [{"name": "a", "inbox": "i", "outbox": "o", "schedule": 60}]}), encoding="utf-8"
    )
    config = scheduler.beat_config(Settings(schedule=str(path)))
    assert config["beat_schedule"]["inbox:a"]["schedule"] == 60.0
    assert config["beat_schedule"][CATCHUP_ENTRY]["task"] == CATCHUP_TASK
    assert scheduler.beat_config(Settings()) == {}


def test_celery_dash_a_worker_finds_the_app():
    assert find_app("worker") is app
    assert find_app("producer.scheduler") is scheduler.app


def test_workers_consume_chunks_and_the_scheduler_the_inbox_tasks(monkeypatch):
    monkeypatch.setenv("TRANSQUEUE_QUEUE", "chunks")
    monkeypatch.setenv("TRANSQUEUE_INBOX_QUEUE", "inbox")
    monkeypatch.setattr("store.queues.env_settings", lambda: Settings.from_env())
    workers, inbox = make_app(), make_app(consumes=INBOX)
    key = model_key(Settings())  # the demo model, at int8
    assert set(workers.amqp.queues) == {f"chunks.{key}"}  # a worker consumes its model's queue
    assert set(inbox.amqp.queues) == {"inbox"}
    for task, queue in (
        (SCAN_TASK, "inbox"),
        (DELIVER_TASK, "inbox"),
        (CATCHUP_TASK, "inbox"),
        (TRANSLATE_TASK, "chunks"),
    ):
        assert workers.amqp.router.route({}, task)["queue"].name == queue


def test_workers_register_only_the_chunk_task_and_the_scheduler_only_inbox_tasks():
    import worker.tasks  # noqa: F401  (what `celery -A worker worker` imports: conf.include)

    assert app.conf.include == ["worker.tasks"]
    assert TRANSLATE_TASK in app.tasks and SCAN_TASK not in app.tasks
    assert {SCAN_TASK, DELIVER_TASK, CATCHUP_TASK} <= set(scheduler.app.tasks)
    assert TRANSLATE_TASK not in scheduler.app.tasks and CATCHUP_TASK not in app.tasks


def test_a_model_key_names_the_files_and_the_precision(tiny_bundle):
    demo, tiny_fp32 = (
        model_key(Settings()),
        model_key(Settings(bundle=str(tiny_bundle), precision="fp32")),
    )
    assert len(demo) == 12 and demo != tiny_fp32
    assert model_key(Settings(bundle=str(tiny_bundle))) not in (demo, tiny_fp32)


@pytest.mark.parametrize("revision", ["DECODING", "TOKENIZATION"])
def test_a_model_key_names_the_runtimes_revisions(tiny_bundle, monkeypatch, revision):
    # workers of a release that would translate the same files differently never share a
    # job's queue (they would dead-letter each other's chunks, or mix two translations)
    import models.defaults

    before = model_key(Settings(bundle=str(tiny_bundle)))
    monkeypatch.setattr(models.defaults, revision, "another revision")
    assert model_key(Settings(bundle=str(tiny_bundle))) != before


def test_only_the_chunk_queues_pass_the_queue_check():
    settings = Settings(queue="tq-chunks")
    for queue in ("tq-chunks", model_queue(settings, "0123456789ab")):
        assert check_chunk_queue(settings, queue) == queue
    for queue in (
        "tq:stats",
        "tq:orphans",
        "tq-chunks.abc",
        "tq-chunks.0123456789ab.x",
        "tq-chunks.",
        "tq-chunksx",
    ):
        with pytest.raises(BadQueue, match="is not a chunk queue"):
            check_chunk_queue(settings, queue)
