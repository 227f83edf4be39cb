"""Redis clients that ride out a restart: retries by time, never on a refused password.

A worker's client waits out a Redis restart or AOF load (`defaults.WORKER_PATIENCE`); the
commands that watch a job (`status`, `wait`, `fetch`, `jobs`) wait TRANSQUEUE_CLIENT_PATIENCE
seconds and say once that they are waiting; the others give up after a moment. A refused
password is raised at once: no retry fixes it, nor does waiting in a worker that is stopping
(`STOPPING`). `redis_away` tells the errors of a Redis
that is away or takes no writes for now from those of bad records.
"""

from __future__ import annotations

import mmap
import time
from collections.abc import Callable
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

#: Redis errors that mean Redis is away, restarting, failing over or out of memory, not that
#: the job's data is bad (`redis_away`): a worker sends the chunk back to the queue with no
#: strike (`worker.tasks`). Any other Redis error (a key of the wrong type, a script error)
#: means the job's records are bad.
REDIS_AWAY = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.TryAgainError,
    redis.exceptions.MasterDownError,
)

#: Error replies of a Redis that is up but takes no writes for now, which redis-py raises as
#: plain ResponseErrors: a script running past its time limit, a failed snapshot under
#: stop-writes-on-bgsave-error.
_BUSY_REPLIES = ("BUSY ", "MISCONF ")


def redis_away(exc: BaseException) -> bool:
    """Whether `exc` means that Redis is away or takes no writes for now (`REDIS_AWAY`, or a
    BUSY or MISCONF reply), not that the job's records are bad."""
    if isinstance(exc, REDIS_AWAY):
        return True
    return isinstance(exc, redis.ResponseError) and str(exc).startswith(_BUSY_REPLIES)


class StopFlag:
    """A flag that a signal handler may set and that forked processes share: one byte of
    shared memory, set and read without a lock, its waits polling it (`POLL_S`).

    Neither a threading.Event nor a multiprocessing one fits: setting either takes a lock,
    which the interrupted main thread may hold (a signal handler then waits on itself), and
    a multiprocessing Event's set waits for each process that was waiting on it to wake,
    forever for one killed meanwhile (a prefork child past its time limit)."""

    #: Seconds between looks at the flag while waiting.
    POLL_S = 0.05

    def __init__(self) -> None:
        self._byte = mmap.mmap(-1, 1)  # anonymous and MAP_SHARED: a fork shares it

    def is_set(self) -> bool:
        """Whether the flag is set (in this process or one it shares the flag with)."""
        return self._byte[0] == 1

    def set(self) -> None:
        """Set the flag; safe in a signal handler."""
        self._byte[0] = 1

    def clear(self) -> None:
        """Clear the flag."""
        self._byte[0] = 0

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the flag to be set; whether it is."""
        deadline = time.monotonic() + timeout
        while not self.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(self.POLL_S, left))
        return True


#: Set when this worker or scheduler is stopping (`store.queues`, on Celery's
#: worker_shutting_down): its patient clients stop waiting for Redis (a failed call raises
#: at once) and a run is no longer waited on to end (`store.leases`), so that a stop while
#: Redis is away does not wait out the patience. Made at import, before any fork, so a
#: prefork worker's children share it with their parent.
STOPPING = StopFlag()


class PatientRetry(Retry):
    """Retry connection errors with exponential backoff (at most 2 s apart) until `patience`
    seconds have passed since the first failure, or until the worker is stopping
    (`STOPPING`); `on_wait` is told of each failure."""

    def __init__(self, patience: float, on_wait: Callable[[Exception], None] | None = None) -> None:
        super().__init__(ExponentialBackoff(cap=2.0, base=0.1), retries=-1)
        self.patience = patience
        self.on_wait = on_wait

    def call_with_retry(
        self, do: Callable[[], Any], fail: Any, is_retryable: Any = None, with_failure_count: bool = False
    ) -> Any:
        """Run `do`, retrying as the class docstring says (redis-py calls this)."""
        self._backoff.reset()
        failures, deadline = 0, None
        while True:
            try:
                return do()
            except self._supported_errors as error:
                if isinstance(error, redis.AuthenticationError) or (is_retryable and not is_retryable(error)):
                    raise
                failures += 1
                fail(error, failures) if with_failure_count else fail(error)
                now = time.monotonic()
                deadline = deadline or now + self.patience
                if now >= deadline or STOPPING.is_set():
                    raise
                if self.on_wait is not None:
                    self.on_wait(error)
                # the backoff doubles per failure up to its cap: 2**1024 would overflow a float
                wait = self._backoff.compute(min(failures, 32))
                STOPPING.wait(min(wait, max(0.0, deadline - now)))


def connect(url: str, patience: float, on_wait: Callable[[Exception], None] | None = None) -> redis.Redis:
    """A Redis client on `url` with decoded replies that retries for `patience` seconds.

    Replies are decoded as UTF-8 with ``surrogateescape``: bytes that are not UTF-8 (written
    by someone else) never fail a whole read, and a name read back deletes the same bytes.
    What is read as a record is checked to be text (`store.errors.check_text`)."""
    return redis.Redis.from_url(
        url,
        decode_responses=True,
        encoding_errors="surrogateescape",
        retry=PatientRetry(patience, on_wait),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError],
        health_check_interval=30,
    )
