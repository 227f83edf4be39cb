"""What the producer and the workers need of a translator, as one Protocol.

`models.translator.Translator` is the implementation; tests and hooks (the worker's
poison hook) provide others. This module imports nothing heavy, so code that only needs
the type never loads ONNX Runtime.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol


class Translation(Protocol):
    """One translated sentence (`models.translator.TranslationResult` has more)."""

    text: str
    hit_length_cap: bool


class SentenceTranslator(Protocol):
    """Translates sentences in order; equal sentences and settings give equal output."""

    #: Identifies the model files and decoding settings (keys the translation memory).
    fingerprint: str

    def translate(self, sentences: Iterable[str]) -> Iterator[Translation]:
        """The translation of each sentence, in order, as soon as it is ready."""

    def translate_one(self, sentence: str) -> Translation:
        """The translation of one sentence."""
