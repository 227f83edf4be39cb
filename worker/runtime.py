"""Per-process state of a worker: one Translator, loaded once.

The Translator (its ONNX Runtime sessions) is created once per process, after any fork:
the solo and threads pools (one Translator, shared by the threads) load it in the
worker's own process on `worker_init`, the prefork pool's children on
`worker_process_init`. It is warmed up before the first task.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from models.protocol import SentenceTranslator, Translation
from store import defaults
from store.config import Settings

if TYPE_CHECKING:
    from models.bundle import Manifest


class PoisonError(RuntimeError):
    """Raised by the TRANSQUEUE_TEST_POISON hook."""


class PoisonedTranslator:
    """Test hook, on only when TRANSQUEUE_TEST_POISON is set: misbehaves on marked sentences.

    "raise:TEXT" raises PoisonError for a sentence containing TEXT; "exit:TEXT" ends the
    process as a crash would (the chunk is redelivered until the delivery cap);
    "sleep:TEXT" holds the sentence for `defaults.POISON_SLEEP` seconds.
    """

    def __init__(self, inner: SentenceTranslator, spec: str) -> None:
        self.inner = inner
        self.poisons = [item.partition(":")[::2] for item in spec.split(",") if item]
        self.fingerprint = inner.fingerprint

    def _check(self, sentence: str) -> None:
        for mode, marker in self.poisons:
            if marker not in sentence:
                continue
            if mode == "exit":
                os._exit(70)
            if mode == "sleep":
                time.sleep(defaults.POISON_SLEEP)
            else:
                raise PoisonError(f"test poison in {sentence!r}")

    def translate(self, sentences: Iterable[str]) -> Iterator[Translation]:
        """Fail on the whole batch if any sentence is marked, else translate."""
        sentences = list(sentences)
        for sentence in sentences:
            self._check(sentence)
        return self.inner.translate(sentences)

    def translate_one(self, sentence: str) -> Translation:
        """Fail on a marked sentence, else translate."""
        self._check(sentence)
        return self.inner.translate_one(sentence)


_lock = threading.Lock()
_state: dict[str, Any] = {}


def load_translator(settings: Settings) -> SentenceTranslator:
    """Create this process's Translator once, warm it up, and return it."""
    with _lock:
        if "translator" not in _state:
            from models.translator import BatchOptions, Translator

            translator = Translator(
                settings.bundle_dir,
                precision=settings.precision,
                threads=settings.threads,
                batching=BatchOptions(max_batch=settings.max_batch),
                verify=_state.get("checked") != (settings.bundle_dir, settings.precision),
            )
            _state["manifest"] = translator.manifest  # for the warnings (`loaded_bundle_warnings`)
            _state["translator"] = (
                PoisonedTranslator(translator, settings.test_poison) if settings.test_poison else translator
            )
        return _state["translator"]


def preload_translator(settings: Settings) -> None:
    """Start creating this process's Translator in a background thread, so that it loads
    while Celery starts up (ONNX Runtime releases the GIL); `load_translator` waits for it.
    Only for a worker that does not fork after this. A failure is left for the next
    `load_translator` call, which tries again and raises it."""

    def load() -> None:
        try:
            load_translator(settings)
        except Exception:  # raised again by the next load_translator call
            pass

    threading.Thread(target=load, name="translator-preload", daemon=True).start()


#: What to do about a bundle a worker cannot load.
FIX_BUNDLE = (
    "set TRANSQUEUE_BUNDLE to a bundle made by `transqueue export` (or leave it empty for the "
    "bundled demo model), and TRANSQUEUE_PRECISION to a precision it ships"
)


def explained(error: Exception) -> str:
    """The message of `error` (a BundleError), followed by how to fix it."""
    return f"{error}\n  to fix it: {FIX_BUNDLE}"


def check_bundle(settings: Settings, hashes: bool = True) -> list[str]:
    """Raise BundleError unless the settings' bundle can be loaded:
    its manifest, the graphs of the settings' precision, and (with `hashes`) the sha256 of
    every file a Translator at that precision loads. This process (and its forks) then
    load the Translator without hashing the same files again. Returns warnings about a
    bundle that loads but falls short (a line each)."""
    from models.bundle import default_bundle_dir, read_manifest, verify_files

    manifest = read_manifest(settings.bundle_dir or default_bundle_dir())
    verify_files(manifest, manifest.files_for(settings.precision), hashes=hashes)
    if hashes:
        _state["checked"] = (settings.bundle_dir, settings.precision)
    return bundle_warnings(manifest, settings.precision)


def loaded_bundle_warnings(settings: Settings) -> list[str]:
    """Load this process's Translator (`load_translator`) and return the warnings about its
    bundle (`bundle_warnings`), from the manifest it was loaded with (read once)."""
    load_translator(settings)
    return bundle_warnings(_state["manifest"], settings.precision)


def bundle_warnings(manifest: Manifest, precision: str) -> list[str]:
    """Warnings about a bundle that loads at `precision` but falls short (a line each)."""
    if manifest.cpu_independent(precision):
        return []
    return [
        f"{manifest.directory}: its {precision} outputs may differ in rare sentences "
        "between workers on CPUs with and without AVX-512 (a bundle exported before 2026-12-02, "
        "or with the tensor int8 scheme); export it again for the same output on every worker"
    ]
