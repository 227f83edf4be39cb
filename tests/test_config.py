"""store.config: settings from TRANSQUEUE_* variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import defaults
from store.config import ConfigError, Settings


def test_defaults_come_from_worker_defaults():
    settings = Settings.from_env({})
    assert settings.redis_url == defaults.REDIS_URL
    assert settings.chunk_size == defaults.CHUNK_SIZE and settings.max_batch == defaults.MAX_BATCH
    assert settings.pool == defaults.POOL and settings.threads == defaults.THREADS
    assert settings.bundle_dir is None


def test_variables_override_with_their_types():
    settings = Settings.from_env(
        {
            "TRANSQUEUE_REDIS_URL": "redis://:pw@redis:6379/1",
            "TRANSQUEUE_CHUNK_SIZE": "8",
            "TRANSQUEUE_MAX_BATCH": "16",
            "TRANSQUEUE_POLL_INTERVAL": "0.2",
            "TRANSQUEUE_BUNDLE": "/models/opus",
            "TRANSQUEUE_POOL": "solo",
            "TRANSQUEUE_THREADS": " ",
        }
    )
    assert settings.redis_url == "redis://:pw@redis:6379/1"
    assert settings.chunk_size == 8 and settings.poll_interval == 0.2 and settings.max_batch == 16
    assert settings.bundle_dir == Path("/models/opus") and settings.pool == "solo"
    assert settings.threads == defaults.THREADS  # blank keeps the default


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("TRANSQUEUE_CHUNK_SIZE", "many", "TRANSQUEUE_CHUNK_SIZE='many': expected int"),
        ("TRANSQUEUE_CHUNK_SIZE", "0", "TRANSQUEUE_CHUNK_SIZE=0: must be 1 to 4096"),
        ("TRANSQUEUE_MAX_BATCH", "0", "TRANSQUEUE_MAX_BATCH=0: must be 1 to 1024"),
        ("TRANSQUEUE_MAX_DELIVERIES", "1", "TRANSQUEUE_MAX_DELIVERIES=1: must be at least 2"),
        ("TRANSQUEUE_MAX_DELIVERIES", "0", "TRANSQUEUE_MAX_DELIVERIES=0: must be at least 2"),
        # counts a typo made absurd: messages, memory, processes or threads without end
        (
            "TRANSQUEUE_THREADS",
            "99999999999999999999",
            "TRANSQUEUE_THREADS=99999999999999999999: must be 1 to 1024$",
        ),
        ("TRANSQUEUE_THREADS", "1025", "TRANSQUEUE_THREADS=1025: must be 1 to 1024$"),
        (
            "TRANSQUEUE_CONCURRENCY",
            "99999999999999999999",
            "TRANSQUEUE_CONCURRENCY=99999999999999999999: must be 1 to 1024$",
        ),
        (
            "TRANSQUEUE_CHUNK_SIZE",
            "99999999999999999999",
            "TRANSQUEUE_CHUNK_SIZE=99999999999999999999: must be 1 to 4096$",
        ),
        (
            "TRANSQUEUE_MAX_BATCH",
            "99999999999999999999",
            "TRANSQUEUE_MAX_BATCH=99999999999999999999: must be 1 to 1024$",
        ),
        (
            "TRANSQUEUE_MAX_DELIVERIES",
            "99999999999999999999",
            "MAX_DELIVERIES=99999999999999999999: must be 2 to 100$",
        ),
        ("TRANSQUEUE_LEASE_TTL", "nan", "TRANSQUEUE_LEASE_TTL=nan: must be 1 to"),
        ("TRANSQUEUE_LEASE_TTL", "inf", "TRANSQUEUE_LEASE_TTL=inf: must be 1 to"),
        ("TRANSQUEUE_LEASE_TTL", "0", "TRANSQUEUE_LEASE_TTL=0.0: must be 1 to"),
        # beyond Redis's expiry range, or a lease that never runs out: refused, never a
        # job whose chunks are dropped and requeued forever
        ("TRANSQUEUE_LEASE_TTL", "1e30", "TRANSQUEUE_LEASE_TTL=1e\\+30: must be 1 to 316224000"),
        ("TRANSQUEUE_RESULT_TTL", "99999999999999999999", "RESULT_TTL=99999999999999999999: must be 1 to"),
        ("TRANSQUEUE_TM_TTL", "99999999999999999999", "TRANSQUEUE_TM_TTL=99999999999999999999: must be"),
        ("TRANSQUEUE_VISIBILITY_TIMEOUT", "0", "TRANSQUEUE_VISIBILITY_TIMEOUT=0: must be 1 to"),
        ("TRANSQUEUE_RESTORE_INTERVAL", "316224001", "TRANSQUEUE_RESTORE_INTERVAL=316224001: must be"),
        ("TRANSQUEUE_MAX_MEMORY_PER_CHILD", "-1", "TRANSQUEUE_MAX_MEMORY_PER_CHILD=-1: must be at least 0"),
        ("TRANSQUEUE_POLL_INTERVAL", "-1", "TRANSQUEUE_POLL_INTERVAL=-1.0: must be 0.01 to 3600"),
        ("TRANSQUEUE_CLIENT_PATIENCE", "nan", "TRANSQUEUE_CLIENT_PATIENCE=nan: must be 0.0 to 86400"),
        ("TRANSQUEUE_INBOX_LOCK_TIMEOUT", "0", "TRANSQUEUE_INBOX_LOCK_TIMEOUT=0: must be 1 to"),
        ("TRANSQUEUE_METRICS_PORT", "99999", "TRANSQUEUE_METRICS_PORT=99999: must be 1 to 65535"),
        ("TRANSQUEUE_REDIS_URL", "notaurl", "TRANSQUEUE_REDIS_URL='notaurl': expected redis://"),
        (
            "TRANSQUEUE_REDIS_URL",
            "amqp://u:pw@x",
            "TRANSQUEUE_REDIS_URL='amqp://u:\\*\\*\\*@x': expected redis://",
        ),
        (
            "TRANSQUEUE_REDIS_URL",
            "unix:///tmp/r.sock",
            "unix:///tmp/r.sock': expected redis://HOST:PORT/DB",
        ),
        (
            "TRANSQUEUE_REDIS_URL",
            "redis://:pw@localhost:99999/0",
            "TRANSQUEUE_REDIS_URL='redis://:\\*\\*\\*@localhost:99999/0': expected redis://HOST:PORT/DB",
        ),
        ("TRANSQUEUE_REDIS_URL", "redis://localhost:port/0", "PORT 1 to 65535 and DB a number"),
        ("TRANSQUEUE_REDIS_URL", "redis://localhost:6379/abc", "PORT 1 to 65535 and DB a number"),
        ("TRANSQUEUE_REDIS_URL", "redis://localhost:6379/1/", "PORT 1 to 65535 and DB a number"),
        ("TRANSQUEUE_POOL", "gevent", "TRANSQUEUE_POOL='gevent': expected one of"),
        ("TRANSQUEUE_PRECISION", "fp16", "TRANSQUEUE_PRECISION='fp16'"),
        ("TRANSQUEUE_TEST_POISON", "boom", "TRANSQUEUE_TEST_POISON='boom'"),
    ],
)
def test_bad_values_name_the_variable(name, value, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        Settings.from_env({name: value})


def test_the_largest_counts_are_taken():
    settings = Settings.from_env(
        {
            "TRANSQUEUE_THREADS": "1024",
            "TRANSQUEUE_CONCURRENCY": "1024",
            "TRANSQUEUE_CHUNK_SIZE": "4096",
            "TRANSQUEUE_MAX_BATCH": "1024",
            "TRANSQUEUE_MAX_DELIVERIES": "100",
        }
    )
    assert (settings.threads, settings.concurrency, settings.chunk_size) == (1024, 1024, 4096)
    assert (settings.max_batch, settings.max_deliveries) == (1024, 100)


def test_no_memory_limit_per_child_is_zero_as_in_celery():
    """billiard replaces a prefork child over its memory limit only when the limit is over 0."""
    assert Settings.from_env({"TRANSQUEUE_MAX_MEMORY_PER_CHILD": "0"}).max_memory_per_child == 0


def test_every_setting_is_in_the_readme_settings_table():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    table = readme.split("### Settings (environment", 1)[1].split("\n## ", 1)[0]
    documented = {
        field for field in Settings.__dataclass_fields__ if f"`TRANSQUEUE_{field.upper()}`" in table
    }
    assert set(Settings.__dataclass_fields__) - documented == {"test_poison"}  # a test hook


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TRANSQUEUE_MAX_LINE_BYTES", "1MB"),
        ("TRANSQUEUE_MAX_FILE_BYTES", "-5"),
        ("TRANSQUEUE_MAX_BLOCK_BYTES", "0"),
        ("TRANSQUEUE_PYSBD_TIMEOUT", "abc"),
        ("TRANSQUEUE_PYSBD_TIMEOUT", "-1"),
        ("TRANSQUEUE_PYSBD_TIMEOUT", "1e30"),  # was a traceback from select() at the first paragraph
    ],
)
def test_a_bad_input_limit_stops_every_command_with_one_line(name, value):
    import os
    import subprocess
    import sys

    env = {**os.environ, name: value}
    done = subprocess.run(
        [sys.executable, "-c", "from cli import main; main()", "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]  # one line, no traceback
    assert done.stderr.startswith(f"Error: {name}={value!r}: expected")
