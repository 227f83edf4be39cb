"""worker.celery: the Celery settings of the distributed path."""

from __future__ import annotations

import json

from celery import Celery
from celery.app.utils import find_app

from worker.celery import DELIVER_TASK, TRANSLATE_TASK, app, celery_config
from worker.config import Settings
from worker.schedule import SCAN_TASK


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


def test_beat_schedule_comes_from_the_schedule_file(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"inbox": [{"name": "a", "inbox": "i", "outbox": "o",
                                           "schedule": 60}]}), encoding="utf-8")
    config = celery_config(Settings(schedule=str(path)))
    assert config["beat_schedule"]["inbox:a"]["schedule"] == 60.0


def test_celery_dash_a_worker_finds_the_app():
    assert find_app("worker") is app


def test_inbox_tasks_have_their_own_queue_and_workers_consume_both():
    configured = Celery("routes")
    configured.conf.update(celery_config(Settings(queue="chunks", inbox_queue="inbox")))
    assert set(configured.amqp.queues) == {"chunks", "inbox"}  # a worker without -Q: both
    router = configured.amqp.router
    for task, queue in ((SCAN_TASK, "inbox"), (DELIVER_TASK, "inbox"), (TRANSLATE_TASK, "chunks")):
        assert router.route({}, task)["queue"].name == queue
