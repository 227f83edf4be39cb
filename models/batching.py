"""Which rows are decoded together: sentences split into parts, grouped by padded length.

A row is one part of one sentence (a sentence longer than the model's positions is cut
into parts, `split_points`). Every row is padded, masked, to its own *padded length*: its
length rounded up to a multiple of `pad_to` (`padded_length`), which depends on the row
alone, never on its neighbours. Rows of a batch share their padded length, and a batch
holds at most `max_batch` rows. (The encoder needs no padding: the Translator encodes a
batch's rows of each exact length apart.) Because every op of the encoder and decoder (fp32, or int8
with the "row" scheme) computes each row from that row alone, and a row's padding is its
own, a sentence's output is the same whichever batch it lands in; tests/test_batching.py
checks it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

#: The punctuation after which an over-long sentence is preferably cut.
CUT_AFTER = ".;:,!?)]"


@dataclass(frozen=True)
class Row:
    """Part `part` of sentence `sentence` (its index in the window), as model ids."""

    sentence: int
    part: int
    ids: np.ndarray


@dataclass(frozen=True)
class Batch:
    """Rows of one padded length, decoded together."""

    rows: list[Row] = field(default_factory=list)


def padded_length(length: int, pad_to: int, limit: int) -> int:
    """`length` rounded up to a multiple of `pad_to`, at most `limit` (the model's positions)."""
    return min(-(-length // pad_to) * pad_to, max(length, limit))


def padding_mask(lengths: Sequence[int], length: int) -> np.ndarray:
    """The [rows, length] int64 attention mask of rows of `lengths` right-padded to `length`."""
    return (np.arange(length) < np.asarray(lengths)[:, None]).astype(np.int64)


def split_points(pieces: Sequence[str], limit: int) -> list[int]:
    """Cut positions that split `pieces` into runs of at most `limit` pieces.

    A cut goes after sentence or clause punctuation if there is one in the last half of
    the run, else before a word start (a piece beginning with ▁), else anywhere.
    """
    cuts, start = [], 0
    while len(pieces) - start > limit:
        window = range(start + limit, start + limit // 2, -1)
        cut = next((i for i in window if pieces[i - 1].rstrip()[-1:] in CUT_AFTER), None)
        if cut is None:
            cut = next((i for i in window if pieces[i].startswith("▁")), start + limit)
        cuts.append(cut)
        start = cut
    return cuts


def group(rows: Sequence[Row], max_batch: int, padded: Callable[[int], int]) -> list[Batch]:
    """Rows grouped by `padded(len(ids))` into batches of at most `max_batch`, shortest first.

    Within a padded length, rows of nearby exact lengths (and so, mostly, of nearby output
    lengths) share a batch, so that fewer decoder steps run with only a few rows left.
    """
    buckets: dict[int, list[Batch]] = {}
    order: list[Batch] = []
    for row in sorted(rows, key=lambda row: len(row.ids)):
        batches = buckets.setdefault(padded(len(row.ids)), [])
        if not batches or len(batches[-1].rows) == max_batch:
            batches.append(Batch())
            order.append(batches[-1])
        batches[-1].rows.append(row)
    return order
