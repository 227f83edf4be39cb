"""Per-process state of a worker: one Translator and one job-store connection.

The Translator (its ONNX Runtime sessions) is created once per process, after the fork:
prefork and solo pools load it on `worker_process_init`, the threads pool (one shared
Translator) when the worker is ready. It is warmed up before the first task.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from worker.config import Settings
from worker.jobstore import JobStore


class TranslationLike(Protocol):
    """What the worker uses of models.translator.TranslationResult."""

    text: str


class TranslatorLike(Protocol):
    """What the worker uses of models.translator.Translator."""

    fingerprint: str

    def translate(self, sentences: Iterable[str]) -> Iterator[TranslationLike]:
        """Translations in order."""

    def translate_one(self, sentence: str) -> TranslationLike:
        """One translation."""


class PoisonError(RuntimeError):
    """Raised by the TRANSQUEUE_TEST_POISON hook."""


class PoisonedTranslator:
    """Test hook, on only when TRANSQUEUE_TEST_POISON is set: fails on marked sentences.

    "raise:TEXT" raises PoisonError for a sentence containing TEXT; "exit:TEXT" ends the
    process as a crash would (the chunk is redelivered until the delivery cap).
    """

    def __init__(self, inner: TranslatorLike, spec: str) -> None:
        self.inner = inner
        self.mode, _, self.marker = spec.partition(":")
        self.fingerprint = inner.fingerprint

    def _check(self, sentence: str) -> None:
        if self.marker in sentence:
            if self.mode == "exit":
                os._exit(70)
            raise PoisonError(f"test poison in {sentence!r}")

    def translate(self, sentences: Iterable[str]) -> Iterator[TranslationLike]:
        """Fail on the whole batch if any sentence is marked, else translate."""
        sentences = list(sentences)
        for sentence in sentences:
            self._check(sentence)
        return self.inner.translate(sentences)

    def translate_one(self, sentence: str) -> TranslationLike:
        """Fail on a marked sentence, else translate."""
        self._check(sentence)
        return self.inner.translate_one(sentence)


_lock = threading.Lock()
_state: dict[str, Any] = {}


def load_translator(settings: Settings) -> TranslatorLike:
    """Create this process's Translator once, warm it up, and return it."""
    with _lock:
        if "translator" not in _state:
            from models.translator import Translator

            translator: TranslatorLike = Translator(
                settings.bundle_dir, precision=settings.precision, threads=settings.threads
            )
            if settings.test_poison:
                translator = PoisonedTranslator(translator, settings.test_poison)
            _state["translator"] = translator
        return _state["translator"]


def job_store(settings: Settings) -> JobStore:
    """This process's job store (a patient client that rides out Redis restarts)."""
    with _lock:
        if "store" not in _state:
            _state["store"] = JobStore.from_settings(settings, patient=True)
        return _state["store"]
