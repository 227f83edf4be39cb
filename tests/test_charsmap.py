"""models.charsmap against SentencePiece's own normalizer, on opus-mt's nmt_nfkc charsmap
(the demo bundle's source tokenizer keeps it); every other rule and setting is checked
through the whole source tokenizer in test_tokenizer_normalizers."""

from __future__ import annotations

import base64
import json
import struct

import pytest
import sentencepiece as spm
from conftest import train_unigram
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sentencepiece import sentencepiece_model_pb2 as spm_model
from tokenizers import normalizers

from models.bundle import default_bundle_dir
from models.charsmap import Charsmap


@pytest.fixture(scope="module")
def nmt_nfkc() -> bytes:
    source = json.loads((default_bundle_dir() / "source.tokenizer.json").read_text(encoding="utf-8"))
    (precompiled,) = [s for s in source["normalizer"]["normalizers"] if s["type"] == "Precompiled"]
    return base64.b64decode(precompiled["precompiled_charsmap"])


REFERENCE = spm.SentencePieceNormalizer(
    rule_name="nmt_nfkc", add_dummy_prefix=False, escape_whitespaces=False, remove_extra_whitespaces=False
)

#: Clusters `tokenizers`' Precompiled rewrites otherwise than SentencePiece's longest match.
CLUSTERS = ["Ａ\u0301", "e\u0323\u0302", "ｶﾞ", "\u1100\u1161", "a\r\nb", "A\u030a\u0301"]


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(
        st.one_of(
            st.sampled_from([*CLUSTERS, "ﬁ", "½", "㍻", "\t", "\u3000", "\u200b", " "]), st.characters()
        ),
        max_size=20,
    ).map("".join)
)
@example(text="")
@example(text="Plain English, nothing to rewrite.")
def test_text_is_rewritten_as_sentencepiece_rewrites_it(nmt_nfkc, text):
    if any(0xD800 <= ord(c) < 0xE000 for c in text):
        text = "".join(c for c in text if not 0xD800 <= ord(c) < 0xE000)  # no UTF-8 for these
    assert Charsmap(nmt_nfkc).normalize(text) == REFERENCE.normalize(text)


@pytest.mark.parametrize("text", CLUSTERS)
def test_grapheme_clusters_get_sentencepieces_longest_match_not_tokenizers_rewrite(nmt_nfkc, text):
    ours, precompiled = (
        Charsmap(nmt_nfkc).normalize(text),
        normalizers.Precompiled(nmt_nfkc).normalize_str(text),
    )
    assert ours == REFERENCE.normalize(text) != precompiled


def test_a_truncated_charsmap_is_refused(nmt_nfkc):
    with pytest.raises(ValueError, match="not a precompiled charsmap"):
        Charsmap(nmt_nfkc[:1000])


#: Custom rules (SentencePiece's TSV): keys of ASCII letters then a combining accent or
#: more ASCII, one longer than 16 bytes, keys that are prefixes of others, a deletion.
CUSTOM_RULES = (
    "61 62 301\t78\n"
    "61 62 63 64 65 66 67 68 69 6A 6B 6C 6D 6E 6F 70 71 72 73 74\t5A\n"
    "63\t64\n63 64 65\t20\nE9 62\t63\n301 301\t\n7A 7A 7A\t79\n"
)


@pytest.fixture(scope="module")
def custom(tmp_path_factory):
    """(charsmap, SentencePiece's normalizer) of a model trained with `CUSTOM_RULES`."""
    tsv = tmp_path_factory.mktemp("rules") / "rules.tsv"
    tsv.write_text(CUSTOM_RULES)
    model = train_unigram(normalization_rule_tsv=str(tsv))
    proto = spm_model.ModelProto()
    proto.ParseFromString(model)
    reference = spm.SentencePieceNormalizer(
        rule_tsv=str(tsv), add_dummy_prefix=False, escape_whitespaces=False, remove_extra_whitespaces=False
    )
    return proto.normalizer_spec.precompiled_charsmap, reference


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(
            [*"abcdefghijklmnopqrstuvwxyz", "é", "\u0301", " ", "ab\u0301", "abcdefghijklmnopqrst"]
        ),
        max_size=14,
    ).map("".join)
)
@example(text="ab\u0301")  # a key of two ASCII letters and an accent
@example(text="abcdefghijklmnopqrst")  # a key of 20 ASCII letters
def test_custom_rules_with_ascii_keys_are_applied_as_sentencepiece_applies_them(custom, text):
    charsmap, reference = custom
    assert Charsmap(charsmap).normalize(text) == reference.normalize(text)


@pytest.mark.parametrize("damage", ["short", "no NUL", "not UTF-8"])
def test_a_damaged_charsmap_is_refused_when_it_is_loaded_not_when_text_meets_it(nmt_nfkc, damage):
    (size,) = struct.unpack_from("<I", nmt_nfkc)
    trie, replacements = nmt_nfkc[: 4 + size], nmt_nfkc[4 + size :]
    damaged = {
        "short": nmt_nfkc[:3],
        "no NUL": trie + replacements.replace(b"\0", b"x"),
        "not UTF-8": trie + replacements.replace(b"\0", b"\xff\0"),
    }[damage]
    with pytest.raises(ValueError, match="not a precompiled charsmap"):
        Charsmap(damaged)
