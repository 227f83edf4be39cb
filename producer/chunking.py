"""How a job's distinct sentences are cut into chunks for the workers.

A worker decodes a chunk as batches of rows of one padded source length (a multiple of
8 ids, `models.batching`), so a chunk of sentences of similar token length decodes in a
few full batches, and one of mixed lengths in many small ones. Within each window of
`defaults.CHUNK_SORT_WINDOW` sentences the sentences are therefore ordered by their
source token length before the window is cut into chunks; windows keep the job in input
order, so the first documents still finish first. Slots never change: only which
sentences travel together.

A `Chunker` takes the sentences as submit finds them and hands back each chunk as soon as
it is full, so that a job is never held whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tokenizers import Tokenizer

from models.bundle import default_bundle_dir, read_manifest
from producer import defaults
from store.config import Settings

Pair = tuple[int, str]
Lengths = Callable[[Sequence[str]], list[int]]


def source_lengths(settings: Settings) -> Lengths:
    """What gives the source token counts of sentences with the tokenizer of the settings'
    bundle, or their character counts when that bundle cannot be read here."""
    try:
        manifest = read_manifest(settings.bundle_dir or default_bundle_dir())
        tokenizer = Tokenizer.from_file(str(manifest.tokenizer_file("source")))
    except Exception:  # BundleError, or the bare Exception of tokenizers: a missing or malformed file
        return character_lengths

    def token_lengths(sentences: Sequence[str]) -> list[int]:
        encodings = tokenizer.encode_batch(list(sentences), add_special_tokens=False)
        return [len(encoding.tokens) for encoding in encodings]

    return token_lengths


def character_lengths(sentences: Sequence[str]) -> list[int]:
    """The length of each sentence in characters (for a model whose tokenizer is not here)."""
    return [len(sentence) for sentence in sentences]


@dataclass(frozen=True)
class ChunkerState:
    """Where a `Chunker` stands, to go back to (`Chunker.restore`)."""

    pending: tuple[Pair, ...]
    ordered: tuple[Pair, ...]
    chunks: int


class Chunker:
    """Cuts a job's distinct sentences, added in slot order, into chunks of at most `size`,
    by length within each window (see the module docstring)."""

    def __init__(self, lengths: Lengths, size: int) -> None:
        self.lengths = lengths
        self.size = size
        self.pending: list[Pair] = []  # the current window, not ordered yet
        self.ordered: list[Pair] = []  # ordered, fewer than `size`: the start of the next chunk
        self.chunks = 0  # chunks handed out so far

    def add(self, slot: int, sentence: str) -> list[list[Pair]]:
        """Add the next sentence; the chunks it completes (usually none)."""
        self.pending.append((slot, sentence))
        if len(self.pending) < defaults.CHUNK_SORT_WINDOW:
            return []
        return self._cut(last=False)

    def finish(self) -> list[list[Pair]]:
        """The remaining chunks, the last one possibly short."""
        return self._cut(last=True)

    def state(self) -> ChunkerState:
        """Where the chunker stands now."""
        return ChunkerState(tuple(self.pending), tuple(self.ordered), self.chunks)

    def restore(self, state: ChunkerState) -> None:
        """Go back to `state`: the sentences added since are forgotten, and the chunks
        handed out since (numbered from ``state.chunks``) are to be thrown away."""
        self.pending, self.ordered, self.chunks = list(state.pending), list(state.ordered), state.chunks

    def _cut(self, last: bool) -> list[list[Pair]]:
        lengths = self.lengths([sentence for _, sentence in self.pending])
        order = sorted(range(len(self.pending)), key=lambda i: (lengths[i], self.pending[i][0]))
        self.ordered += [self.pending[i] for i in order]
        self.pending = []
        full = len(self.ordered) if last else len(self.ordered) - len(self.ordered) % self.size
        chunks = [self.ordered[i : i + self.size] for i in range(0, full, self.size)]
        del self.ordered[:full]
        self.chunks += len(chunks)
        return chunks
