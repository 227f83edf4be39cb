"""cli.service: `transqueue worker` runs the Celery pool it is told to run."""

from __future__ import annotations

import json

import pytest
from distributed_support import TRANSQUEUE_WORKER, Worker

pytest_plugins = ["distributed_support"]


@pytest.mark.parametrize(("pool", "banner"), [("prefork", "prefork"), ("threads", "thread")])
def test_the_pool_flag_wins_over_the_configured_pool(redis_server, tmp_path, pool, banner):
    """TRANSQUEUE_POOL says solo; Celery would keep it for a --pool=prefork flag (its own
    default) unless `transqueue worker` configures the pool it was given."""
    env = {"TRANSQUEUE_REDIS_URL": redis_server.url, "TRANSQUEUE_POOL": "solo"}
    worker = Worker(f"{pool}-flag", env, tmp_path, TRANSQUEUE_WORKER, (f"--pool={pool}", "--concurrency=2"))
    try:
        worker.start()
        assert f"concurrency: 2 ({banner})" in worker.log_text()
    finally:
        worker.stop()


@pytest.mark.parametrize("command", ["worker", "scheduler"])
def test_a_bad_bundle_is_not_fixed_by_an_option_the_command_lacks(tmp_path, monkeypatch, command):
    # worker and scheduler take their bundle from TRANSQUEUE_BUNDLE alone: no --model advice
    from click.testing import CliRunner

    from cli import main

    path = tmp_path / "s.json"
    path.write_text(json.dumps({"inbox": [{"name": "a", "inbox": "i", "outbox": "o", "schedule": 5}]}))
    monkeypatch.setenv("TRANSQUEUE_SCHEDULE", str(path))
    monkeypatch.setenv("TRANSQUEUE_BUNDLE", str(tmp_path))
    result = CliRunner().invoke(main, [command])
    assert result.exit_code == 1 and "not a transqueue model bundle" in result.output
    assert "--model" not in result.output and "Traceback" not in result.output
