"""SentencePiece's normalizer as `tokenizers` steps, or the reason it cannot be one.

SentencePiece normalizes in one pass (normalizer.cc, `Normalizer::Normalize`): it rewrites
the text through the precompiled charsmap (longest match first); with
remove_extra_whitespaces it drops leading spaces, collapses runs of spaces and drops the
trailing space symbols (a literal ▁ among them, once spaces are escaped); add_dummy_prefix
puts one space symbol first whenever the input is not empty, even one the charsmap
deletes whole (the trailing strip takes it off again where nothing follows it);
escape_whitespaces writes every space as ▁.

`tokenizers`' Metaspace adds its prefix only where the text does not start with ▁ already,
so it adds the prefix only where the text cannot (opus-mt's nmt_nfkc, whose charsmap maps
▁ to a space, with remove_extra_whitespaces); elsewhere a Prepend normalizer adds it.

The charsmap itself is written as `tokenizers`' Precompiled step, the only component that
holds one; the runtime takes that step out and applies the charsmap as SentencePiece does
(`models.charsmap`: Precompiled rewrites grapheme cluster by grapheme cluster, where
SentencePiece takes the longest match).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from sentencepiece import sentencepiece_model_pb2 as spm_model
from tokenizers import Regex, normalizers, pre_tokenizers

#: Characters a grapheme cluster never extends (Unicode's Control and LF): one put first
#: in the text reaches the charsmap alone.
_ISOLATED = ("\t", "\n")


def charsmap_outputs(charsmap: bytes) -> frozenset[str]:
    """Every replacement a precompiled charsmap holds.

    The charsmap is a Darts double-array trie (its size in bytes, its 32-bit units) and the
    replacements, each ended by NUL; a unit that carries a value has its top bit set, and
    the value is the offset of its replacement.
    """
    (size,) = struct.unpack_from("<I", charsmap)
    units = struct.unpack_from(f"<{size // 4}I", charsmap, 4)
    replacements = charsmap[4 + size :]
    offsets = {unit & 0x7FFFFFFF for unit in units if unit >> 31}
    return frozenset(
        replacements[offset : replacements.index(b"\0", offset)].decode("utf-8") for offset in offsets
    )


def _carrier(charsmap: bytes) -> str | None:
    """An isolated character the charsmap rewrites as one space (None if it rewrites none).

    Put first, before the charsmap, it becomes the dummy prefix of any non-empty input, even
    one the charsmap deletes whole.
    """
    precompiled = normalizers.Precompiled(charsmap)
    return next((char for char in _ISOLATED if precompiled.normalize_str(char) == " "), None)


def _lets_space_symbol_through(charsmap: bytes, verbatim: Sequence[str] = ()) -> bool:
    """Whether a literal ▁ can come out of the charsmap (always, without one, and where a
    user-defined piece holds one: the runtime copies those past the charsmap)."""
    if not charsmap or any("▁" in piece for piece in verbatim):
        return True
    outputs = {normalizers.Precompiled(charsmap).normalize_str("▁"), *charsmap_outputs(charsmap)}
    return any("▁" in output for output in outputs)


def _needs_carrier(spec: spm_model.NormalizerSpec) -> bool:
    """Whether the dummy prefix must be put first, before a charsmap that deletes characters
    (without remove_extra_whitespaces, a text it deletes whole keeps its prefix)."""
    return (
        spec.add_dummy_prefix
        and not spec.remove_extra_whitespaces
        and bool(spec.precompiled_charsmap)
        and "" in charsmap_outputs(spec.precompiled_charsmap)
    )


def problems(spec: spm_model.NormalizerSpec, whitespace_as_suffix: bool) -> list[str]:
    """What in a NormalizerSpec the source tokenizer cannot reproduce exactly (empty when
    nothing).

    `whitespace_as_suffix` is the TrainerSpec's treat_whitespace_as_suffix.
    """
    found = []
    if whitespace_as_suffix and spec.add_dummy_prefix:
        found.append("treat_whitespace_as_suffix=true (its dummy space goes last, which no normalizer does)")
    charsmap = spec.precompiled_charsmap
    if charsmap and spec.remove_extra_whitespaces and any("  " in out for out in charsmap_outputs(charsmap)):
        found.append(
            f"normalizer {spec.name!r} rewrites a character as several spaces in a row, which "
            "remove_extra_whitespaces=true keeps and a rule over the whole text would collapse"
        )
    if _needs_carrier(spec) and _carrier(charsmap) is None:
        found.append(
            f"normalizer {spec.name!r} deletes characters and rewrites no tab or line feed as a "
            "space: with add_dummy_prefix=true and remove_extra_whitespaces=false, SentencePiece "
            "gives a text it deletes whole the dummy prefix, which no normalizer can"
        )
    return found


def pipeline(
    spec: spm_model.NormalizerSpec, verbatim: Sequence[str] = ()
) -> tuple[normalizers.Normalizer | None, pre_tokenizers.PreTokenizer | None]:
    """The normalizer and pre-tokenizer that give the text SentencePiece's unigram model
    segments (spaces written ▁ where escape_whitespaces is set). `verbatim` are the model's
    user-defined pieces, which the runtime copies past the charsmap (`models.charsmap`).

    Exact where `problems(spec, ...)` is empty, with the charsmap applied as the runtime
    applies it (`models.tokenizer`).
    """
    charsmap = spec.precompiled_charsmap
    steps: list[normalizers.Normalizer] = []
    carried = _needs_carrier(spec)
    if carried:
        steps.append(normalizers.Prepend(_carrier(charsmap)))
    if charsmap:
        steps.append(normalizers.Precompiled(charsmap))
    # remove_extra_whitespaces strips leading spaces: the text starts with ▁ only where the
    # charsmap lets one through, and only there would Metaspace skip its prefix. Elsewhere
    # Metaspace keeps adding it, so that opus-mt's source.tokenizer.json stays as it was.
    space_symbol_through = _lets_space_symbol_through(charsmap, verbatim)
    by_metaspace = (
        spec.add_dummy_prefix
        and spec.escape_whitespaces
        and spec.remove_extra_whitespaces
        and not space_symbol_through
    )
    if spec.remove_extra_whitespaces:  # \A and \z: `tokenizers`' ^ and $ match at every line
        trailing = "[ ▁]" if spec.escape_whitespaces and space_symbol_through else " "
        steps.append(normalizers.Replace(Regex(rf"\A +|{trailing}+\z"), ""))
        steps.append(normalizers.Replace(Regex(" {2,}"), " "))
    if spec.add_dummy_prefix and not (by_metaspace or carried):
        # after the strip: a text it empties gets no prefix, as SentencePiece strips its prefix too
        steps.append(normalizers.Prepend(" "))
    normalizer = normalizers.Sequence(steps) if steps else None
    if not spec.escape_whitespaces:
        return normalizer, None
    scheme = "always" if by_metaspace else "never"
    return normalizer, pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=scheme, split=False)
