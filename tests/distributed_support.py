"""Real processes for the distributed tests: a redis-server, `celery -A worker worker`s and
the scheduler.

All run in their own process group, so that a test can kill -9 a whole worker (parent
and pool children), and the fixtures always kill what they started. Test modules load the
fixtures with ``pytest_plugins = ["distributed_support"]``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent
REDIS_SERVER = os.environ.get("TRANSQUEUE_TEST_REDIS_SERVER", "redis-server")
STARTUP_TIMEOUT = 120.0


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(
    condition: Callable[[], bool],
    what: str,
    timeout: float = STARTUP_TIMEOUT,
    interval: float = 0.1,
    detail: Callable[[], str] = lambda: "",
) -> None:
    """Poll `condition` until true; fail naming `what` (with `detail`) if it never is."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}\n{detail()}")
        time.sleep(interval)


def _kill_group(process: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
    process.wait(timeout=30)


class RedisServer:
    """A redis-server with AOF persistence in its own directory, on a free port (with a
    password when given one)."""

    def __init__(self, directory: Path, password: str = "") -> None:
        self.directory = directory
        self.port = free_port()
        self.password = password
        self.url_without_password = f"redis://127.0.0.1:{self.port}/0"
        self.url = f"redis://:{password}@127.0.0.1:{self.port}/0" if password else self.url_without_password
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        """Start (or restart, loading the AOF) and wait until it answers."""
        self.directory.mkdir(parents=True, exist_ok=True)
        log = open(self.directory / "redis.log", "ab")  # noqa: SIM115 - closed by the child
        self.process = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.directory),
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
                "--daemonize",
                "no",
                *(["--requirepass", self.password] if self.password else []),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        client = self.client()
        try:
            wait_for(
                lambda: self._answers(client),
                "redis-server to start",
                detail=lambda: (self.directory / "redis.log").read_text(errors="replace"),
            )
        except BaseException:  # never leave a server that did not start running
            self.kill()
            raise

    @staticmethod
    def _answers(client: redis.Redis) -> bool:
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False

    def kill(self) -> None:
        """kill -9 the server."""
        if self.process is not None:
            _kill_group(self.process)

    def client(self) -> redis.Redis:
        """A plain client (decoded replies)."""
        return redis.Redis.from_url(self.url, decode_responses=True)


CELERY_WORKER = (sys.executable, "-m", "celery", "-A", "worker", "worker")
TRANSQUEUE_WORKER = (sys.executable, "-c", "from cli import main; main()", "worker")
# The scheduler's beat stays off: the tests send its ticks themselves.
TRANSQUEUE_SCHEDULER = (sys.executable, "-c", "from cli import main; main()", "scheduler", "--no-beat")


class Worker:
    """A worker (`celery -A worker worker`, or `transqueue worker`), by default with one pool
    process, in its own process group, logging to a file."""

    def __init__(
        self,
        name: str,
        env: Mapping[str, str],
        log_dir: Path,
        command: tuple[str, ...] = CELERY_WORKER,
        options: tuple[str, ...] = ("--concurrency=1",),
    ) -> None:
        self.name = name
        self.log = log_dir / f"{name}.log"
        self.env = {**os.environ, **env}
        self.args = [
            *command,
            *options,
            "--loglevel=info",
            f"--hostname={name}@%h",
            "--without-gossip",
            "--without-mingle",
        ]
        self.process: subprocess.Popen | None = None

    def start(self, wait: bool = True) -> Worker:
        """Start the worker; with `wait`, until it reports ready."""
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self.args,
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if wait:
            try:
                wait_for(self.ready, f"worker {self.name} to be ready", detail=self.log_text)
            except BaseException:  # never leave a worker that did not get ready running
                self.kill()
                raise
        return self

    def ready(self) -> bool:
        """True once the worker logged that it is ready (fails if it died)."""
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(f"worker {self.name} exited\n{self.log_text()}")
        return " ready." in self.log_text()

    def log_text(self) -> str:
        """Everything the worker logged so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        """kill -9 the worker and its pool children."""
        if self.process is not None:
            _kill_group(self.process)

    def stop(self) -> None:
        """Warm shutdown, then kill -9 whatever is left."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
            _kill_group(self.process)


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    """A redis-server of the test module's own (AOF on), killed at the end."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.kill()
