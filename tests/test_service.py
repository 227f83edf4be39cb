"""cli.service: `transqueue worker` runs the Celery pool it is told to run."""

from __future__ import annotations

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
