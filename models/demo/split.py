"""The demo model's clean dev/test split: no exact or near-duplicate overlap with training.

Tatoeba is full of near-duplicates ("Tom is here." / "Tom's here!" / "tom is here"), and
one sentence often has several translations, so a random held-out set shares most of its
sentences with the training data. The split here is built in three steps:

1. Hold out the same English sentences as the original dev split (`held_out`, seeded):
   the first English sentences of a seeded shuffle, with all their translations, until
   `held_out_pairs` pairs are held. Everything else is the training split, so the
   training data is the same as before and a model trained on it never saw a held pair.
2. Drop every held pair whose normalised English or normalised Chinese (case-folded,
   NFKC, without punctuation, symbols or whitespace) occurs in the training split.
3. Link the remaining pairs that share a normalised side and give these groups
   alternately to test and dev, so dev and test do not overlap either.
"""

from __future__ import annotations

import random
import unicodedata
from dataclasses import dataclass

Pair = tuple[str, str]

#: Seed of the shuffle that picks the held-out English sentences (the original dev split's).
SEED = 20261130
#: Pairs held out before cleaning: about 1,000, the original dev split exactly.
HELD_OUT_PAIRS = 1000
#: Unicode category initials removed by `normalise`: punctuation, separators, symbols.
DROPPED_CATEGORIES = frozenset("PZS")


@dataclass(frozen=True)
class Split:
    """Training pairs and the clean dev and test pairs held out from them."""

    train: list[Pair]
    dev: list[Pair]
    test: list[Pair]
    dropped: int


def normalise(text: str) -> str:
    """Case-folded NFKC text without punctuation, symbols or whitespace."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(
        char
        for char in folded
        if unicodedata.category(char)[0] not in DROPPED_CATEGORIES and not char.isspace()
    )


def held_out(pairs: list[Pair], held_out_pairs: int = HELD_OUT_PAIRS) -> tuple[list[Pair], list[Pair]]:
    """Split into (train, held): all pairs of seeded-random English sentences go to held."""
    english = sorted({en for en, _ in pairs})
    random.Random(SEED).shuffle(english)
    by_english: dict[str, list[Pair]] = {}
    for pair in pairs:
        by_english.setdefault(pair[0], []).append(pair)
    held: list[Pair] = []
    chosen: set[str] = set()
    for sentence in english:
        if len(held) >= held_out_pairs:
            break
        held.extend(by_english[sentence])
        chosen.add(sentence)
    return [pair for pair in pairs if pair[0] not in chosen], held


def _groups(pairs: list[Pair]) -> list[list[Pair]]:
    """Pairs linked by a shared normalised side, in order of first appearance."""
    parent = list(range(len(pairs)))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    first_seen: dict[tuple[int, str], int] = {}
    for index, (en, zh) in enumerate(pairs):
        for key in ((0, normalise(en)), (1, normalise(zh))):
            other = first_seen.setdefault(key, index)
            parent[root(index)] = root(other)
    groups: dict[int, list[Pair]] = {}
    for index, pair in enumerate(pairs):
        groups.setdefault(root(index), []).append(pair)
    return list(groups.values())


def clean_split(pairs: list[Pair], held_out_pairs: int = HELD_OUT_PAIRS) -> Split:
    """Training pairs plus dev and test pairs that share no normalised side with training."""
    train, held = held_out(pairs, held_out_pairs)
    seen_en = {normalise(en) for en, _ in train}
    seen_zh = {normalise(zh) for _, zh in train}
    clean = [(en, zh) for en, zh in held if normalise(en) not in seen_en and normalise(zh) not in seen_zh]
    dev: list[Pair] = []
    test: list[Pair] = []
    for number, group in enumerate(_groups(clean)):
        (test if number % 2 == 0 else dev).extend(group)
    return Split(train=train, dev=dev, test=test, dropped=len(held) - len(clean))
