"""Settings of the distributed path, read from ``TRANSQUEUE_*`` environment variables."""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from models.defaults import PRECISIONS
from store import defaults

#: The Celery pools a worker may run (TRANSQUEUE_POOL).
POOLS = ("prefork", "solo", "threads")
POISON_MODES = ("raise", "exit", "sleep")


class ConfigError(ValueError):
    """An environment variable holds a value transqueue cannot use; the message names it."""


@dataclass(frozen=True)
class Settings:
    """Everything a worker, a producer command or the scheduler needs; defaults in
    `store.defaults`."""

    redis_url: str = defaults.REDIS_URL
    bundle: str = defaults.BUNDLE
    precision: str = defaults.PRECISION
    threads: int = defaults.THREADS
    pool: str = defaults.POOL
    concurrency: int = defaults.CONCURRENCY
    queue: str = defaults.QUEUE
    inbox_queue: str = defaults.INBOX_QUEUE
    chunk_size: int = defaults.CHUNK_SIZE
    max_batch: int = defaults.MAX_BATCH
    max_deliveries: int = defaults.MAX_DELIVERIES
    visibility_timeout: int = defaults.VISIBILITY_TIMEOUT
    lease_ttl: float = defaults.LEASE_TTL
    restore_interval: int = defaults.RESTORE_INTERVAL
    result_ttl: int = defaults.RESULT_TTL
    tm_ttl: int = defaults.TM_TTL
    max_memory_per_child: int = defaults.MAX_MEMORY_PER_CHILD
    schedule: str = defaults.SCHEDULE
    inbox_lock_timeout: int = defaults.INBOX_LOCK_TIMEOUT
    poll_interval: float = defaults.POLL_INTERVAL
    client_patience: float = defaults.CLIENT_PATIENCE
    metrics_port: int = defaults.METRICS_PORT
    test_poison: str = defaults.TEST_POISON

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read every field from ``TRANSQUEUE_<FIELD>``; unset or empty keeps the default."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        for field in fields(cls):
            name = defaults.ENV_PREFIX + field.name.upper()
            raw = env.get(name, "").strip()
            if not raw:
                continue
            kind = type(field.default)
            try:
                values[field.name] = kind(raw)
            except ValueError:
                raise ConfigError(f"{name}={raw!r}: expected {kind.__name__}") from None
        settings = cls(**values)
        settings.check()
        return settings

    def check(self) -> None:
        """Raise ConfigError for values outside their allowed range."""
        _one_of("POOL", self.pool, POOLS)
        _one_of("PRECISION", self.precision, PRECISIONS)
        value = self.max_memory_per_child
        if not (math.isfinite(value) and value >= 0):  # nan and inf compare false
            raise ConfigError(
                f"{defaults.ENV_PREFIX}MAX_MEMORY_PER_CHILD={value!r}: must be at least 0 (0: no limit)"
            )
        if self.max_deliveries < defaults.MIN_MAX_DELIVERIES:
            raise ConfigError(
                f"{defaults.ENV_PREFIX}MAX_DELIVERIES={self.max_deliveries!r}: must be at least "
                f"{defaults.MIN_MAX_DELIVERIES} (a chunk's first delivery is one batch, whose death "
                "does not say which sentence killed it)"
            )
        durations = ("visibility_timeout", "lease_ttl", "restore_interval", "result_ttl", "tm_ttl")
        for name, low, high in (
            ("threads", 1, defaults.MAX_THREADS),
            ("concurrency", 1, defaults.MAX_CONCURRENCY),
            ("chunk_size", 1, defaults.MAX_CHUNK_SIZE),
            ("max_batch", 1, defaults.MAX_MAX_BATCH),
            ("max_deliveries", defaults.MIN_MAX_DELIVERIES, defaults.MAX_MAX_DELIVERIES),
            *((name, 1, defaults.MAX_DURATION_S) for name in durations),
            ("poll_interval", 0.01, 3600.0),
            ("client_patience", 0.0, 86400.0),
            ("inbox_lock_timeout", 1, defaults.MAX_INBOX_LOCK_TIMEOUT_S),
            ("metrics_port", 1, 65535),
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and low <= value <= high):
                raise ConfigError(f"{defaults.ENV_PREFIX}{name.upper()}={value!r}: must be {low} to {high}")
        if not _redis_url_ok(self.redis_url):
            raise ConfigError(
                f"{defaults.ENV_PREFIX}REDIS_URL={redacted(self.redis_url)!r}: expected "
                "redis://HOST:PORT/DB (or rediss:// for TLS), PORT 1 to 65535 and DB a number"
            )
        for spec in filter(None, self.test_poison.split(",")):
            mode, _, text = spec.partition(":")
            if mode not in POISON_MODES or not text:
                raise ConfigError(
                    f"{defaults.ENV_PREFIX}TEST_POISON={self.test_poison!r}: expected "
                    f"'MODE:TEXT' items, comma-separated, MODE one of {', '.join(POISON_MODES)}"
                )

    @property
    def bundle_dir(self) -> Path | None:
        """The bundle directory, or None for the bundled demo model."""
        return Path(self.bundle) if self.bundle else None


def redacted(url: str) -> str:
    """`url` with its password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def _redis_url_ok(url: str) -> bool:
    """Whether `url` is a redis:// or rediss:// URL (Celery's broker takes no other) whose
    port, if any, is 1 to 65535 and whose path, if any, is a database number: redis-py
    would fail on another port with a traceback, and silently use database 0 for a path
    that is not a number."""
    parts = urlsplit(url)
    try:
        port = parts.port  # ValueError: not a number, or over 65535
    except ValueError:
        return False
    return (
        parts.scheme in ("redis", "rediss")
        and url.startswith(f"{parts.scheme}://")
        and port != 0
        and re.fullmatch(r"[0-9]*", parts.path.lstrip("/")) is not None
    )


@functools.cache
def env_settings() -> Settings:
    """The settings of this process's environment, read once (workers, beat)."""
    return Settings.from_env()


def _one_of(suffix: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{defaults.ENV_PREFIX}{suffix}={value!r}: expected one of {', '.join(allowed)}")
