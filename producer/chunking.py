"""How a job's distinct sentences are cut into chunks for the workers.

A worker decodes a chunk as batches of rows of one exact source length
(`models.batching`), so a chunk of sentences of equal token length decodes in a few full
batches, and one of mixed lengths in many small ones. Within each window of
`defaults.CHUNK_SORT_WINDOW` sentences the sentences are therefore ordered by their
source token length before the window is cut into chunks; windows keep the job in input
order, so the first documents still finish first. Slots never change: only which
sentences travel together.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import Tokenizer

from models.bundle import BundleError, default_bundle_dir, read_manifest
from producer import defaults
from store.config import Settings

Pair = tuple[int, str]


def source_lengths(settings: Settings, sentences: Sequence[str]) -> list[int]:
    """Source token counts of `sentences` with the tokenizer of the settings' bundle, or
    their character counts when that bundle cannot be read here."""
    try:
        manifest = read_manifest(settings.bundle_dir or default_bundle_dir())
        tokenizer = Tokenizer.from_file(str(manifest.tokenizer_file("source")))
    except (BundleError, OSError, ValueError, KeyError):
        return [len(sentence) for sentence in sentences]
    lengths: list[int] = []
    for start in range(0, len(sentences), defaults.LENGTH_BATCH):  # Encodings are big: a batch at a time
        batch = list(sentences[start : start + defaults.LENGTH_BATCH])
        lengths += [len(e.tokens) for e in tokenizer.encode_batch(batch, add_special_tokens=False)]
    return lengths


def chunk_sentences(sentences: Sequence[str], lengths: Sequence[int], size: int) -> list[list[Pair]]:
    """(slot, sentence) chunks of at most `size`, by length within each window (see above)."""
    window = defaults.CHUNK_SORT_WINDOW
    ordered: list[Pair] = []
    for start in range(0, len(sentences), window):
        slots = sorted(range(start, min(start + window, len(sentences))), key=lambda s: (lengths[s], s))
        ordered.extend((slot, sentences[slot]) for slot in slots)
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]
