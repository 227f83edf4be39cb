"""pysbd in a helper process, so that a call that runs away can really be stopped.

pysbd is pure-Python regex work; some inputs make its regexes backtrack for minutes or hours
(pysbd issues #76, #79). A thread cannot be stopped and SIGALRM only works on the main thread,
so pysbd runs in one long-lived child process (``python -m producer.pysbd_process``) that
answers one JSON line per paragraph. The parent waits for each answer at most a timeout; on
timeout the child is killed and a fresh one is started on the next call. A round trip costs
well under a millisecond; starting the child costs one interpreter start, once.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import subprocess
import sys
import threading
from pathlib import Path

from producer import defaults

Span = tuple[int, int]
_READY = "ready"
log = logging.getLogger(__name__)


def serve() -> None:
    """Child loop: read JSON texts from stdin, answer pysbd's spans (or null on error, or when
    a sentence pysbd returns is not the text at its span: pysbd rewrote something)."""
    import pysbd

    segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)
    print(json.dumps(_READY), flush=True)
    for line in sys.stdin:
        try:
            text = json.loads(line)
            pieces = segmenter.segment(text)
            spans = (
                [(s.start, s.end) for s in pieces]
                if all(text[s.start : s.end] == s.sent for s in pieces)
                else None
            )
        except Exception:  # noqa: BLE001 - any pysbd failure means "use the fallback"
            spans = None
        print(json.dumps(spans), flush=True)


class PysbdProcess:
    """A pysbd child process answering one paragraph at a time, with a timeout per call."""

    def __init__(self, timeout_s: float = defaults.PYSBD_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._child: subprocess.Popen[str] | None = None
        self._broken = False  # the child could not be started: do not retry on every call

    def spans(self, text: str) -> list[Span] | None:
        """pysbd's (start, end) spans for ``text``; None if pysbd failed or ran out of time."""
        with self._lock:
            child = self._running_child()
            if child is None:
                return None
            try:
                child.stdin.write(json.dumps(text) + "\n")
                child.stdin.flush()
                answer = self._read(child, self.timeout_s)
            except OSError:
                answer = None
            if answer is None:
                log.warning("pysbd gave no answer within %.1fs; using the fallback", self.timeout_s)
                self._stop()
                return None
            spans = json.loads(answer)
            return None if spans is None else [(start, end) for start, end in spans]

    def close(self) -> None:
        """Stop the child process (a later call starts a new one)."""
        with self._lock:
            self._stop()

    def _running_child(self) -> subprocess.Popen[str] | None:
        if self._child is not None and self._child.poll() is None:
            return self._child
        self._stop()
        if self._broken:
            return None
        child = subprocess.Popen(
            [sys.executable, "-m", "producer.pysbd_process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            start_new_session=True,  # Ctrl-C in the terminal is the parent's business
            env=_child_environment(),
            cwd=_PACKAGE_ROOT,  # `-m` puts the working directory first on sys.path: never the user's
        )
        self._child = child
        if self._read(child, defaults.PYSBD_STARTUP_TIMEOUT_S) != json.dumps(_READY):
            log.warning("the pysbd helper process did not start; using the fallback splitter")
            self._broken = True
            self._stop()
            return None
        return child

    @staticmethod
    def _read(child: subprocess.Popen[str], timeout_s: float) -> str | None:
        """One answer line from the child, or None if none comes within ``timeout_s``."""
        ready, _, _ = select.select([child.stdout], [], [], timeout_s)
        line = child.stdout.readline() if ready else ""
        return line.rstrip("\n") or None

    def _stop(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        child.kill()
        child.wait()
        child.stdin.close()
        child.stdout.close()


#: The directory holding the `producer` package: the helper's working directory and first
#: import path, so that a `pysbd.py` or `select.py` in the user's directory is never imported.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])


def _child_environment() -> dict[str, str]:
    """The parent's environment, with this package importable even when not installed."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{_PACKAGE_ROOT}{os.pathsep}{path}" if path else _PACKAGE_ROOT}


_shared: PysbdProcess | None = None


def shared() -> PysbdProcess:
    """The process-wide pysbd helper, started on first use and stopped at exit."""
    global _shared
    if _shared is None:
        _shared = PysbdProcess()
        atexit.register(_shared.close)
    return _shared


if __name__ == "__main__":
    serve()
