"""The converted source tokenizer against SentencePiece, under every normalizer setting.

One tiny unigram model is trained per normalization rule; its NormalizerSpec is then given
each combination of add_dummy_prefix, remove_extra_whitespaces and escape_whitespaces (the
trainer refuses to train without escape_whitespaces, SentencePiece encodes with it). Random
strings must get SentencePiece's pieces, and the ids those get through vocab.json as
MarianTokenizer maps them, grapheme clusters that `tokenizers`' own Precompiled rewrites
otherwise than SentencePiece included (the runtime applies the charsmap itself,
`models.charsmap`). The last tests show the settings refused (test_export: refused up front).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import sentencepiece as spm
from conftest import train_unigram
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sentencepiece import sentencepiece_model_pb2 as spm_model
from tokenizers import normalizers

from models.builder.marian_dir import build_shared_vocab, spm_pieces, write_tokenizer_files
from models.builder.spm_normalizer import problems
from models.builder.tokenizer_convert import convert, source_tokenizer
from models.builder.tokenizer_convert import problems as source_tokenizer_problems
from models.tokenizer import MarianCodec

RULES = ("nmt_nfkc", "identity", "nfkc", "nmt_nfkc_cf", "nfkc_cf")
FLAGS = ("add_dummy_prefix", "remove_extra_whitespaces", "escape_whitespaces")
SETTINGS = [(rule, *flags) for rule in RULES for flags in itertools.product((True, False), repeat=3)]

#: Pieces of text where normalizers differ: whitespace, ▁, controls, compatibility
#: characters, combining marks, emoji, zero-width characters, case.
PIECES = [
    *" \t\n\r\x00\x01\x1f\x7f\x85\u00a0\u3000\u2028\u200b\u200d\ufeff\u00ad\ufe0f",
    *"abcxyzABCXYZ019.,!?'-",
    *["  ", "   ", "\r\n", "▁", "▁▁", "▁a", " ▁ "],
    *["Ｈｅｌｌｏ", "１２", "ﬁ", "㍻", "½", "ﷺ", "ß", "İ", "Σς", "中文"],
    *["\u0301", "\u0308", "\u0323", "e\u0301", "A\u0308", "\u1100\u1161", "ｶﾞ"],
    *["😀", "👍🏽", "🇨🇳", "the cat", "I like tea."],
]
TEXTS = st.lists(
    st.one_of(st.sampled_from(PIECES), st.characters(exclude_categories=("Cs",), exclude_characters="<")),
    max_size=14,
).map("".join)


class Side:
    """One setting's SentencePiece model, vocab.json and converted codec."""

    def __init__(self, directory: Path, model: bytes, rule: str) -> None:
        directory.mkdir(parents=True)
        self.directory = directory
        spm_path = directory / "model.spm"
        spm_path.write_bytes(model)
        self.vocab = build_shared_vocab(spm_pieces(spm_path), [])
        write_tokenizer_files(directory, spm_path, spm_path, self.vocab, "en", "zh")
        convert(directory, directory)
        self.codec = MarianCodec(
            directory / "source.tokenizer.json", directory / "target.tokenizer.json", 0, self.vocab["<unk>"]
        )
        self.processor = spm.SentencePieceProcessor(model_proto=model)
        proto = spm_model.ModelProto()
        proto.ParseFromString(model)
        charsmap = proto.normalizer_spec.precompiled_charsmap
        self.precompiled = normalizers.Precompiled(charsmap) if charsmap else None
        self.charsmap_only = (
            spm.SentencePieceNormalizer(
                rule_name=rule,
                add_dummy_prefix=False,
                escape_whitespaces=False,
                remove_extra_whitespaces=False,
            )
            if charsmap
            else None
        )

    def expected(self, text: str) -> tuple[list[str], list[int]]:
        """SentencePiece's pieces of `text` and their ids through vocab.json, as MarianTokenizer maps them."""
        pieces = self.processor.encode(text, out_type=str)
        return pieces, [self.vocab.get(piece, self.vocab["<unk>"]) for piece in pieces]


def _name(setting: tuple) -> str:
    """rule-D-R-E, the flags as 1 or 0."""
    rule, *flags = setting
    return "-".join([rule, *(str(int(flag)) for flag in flags)])


@pytest.fixture(scope="module")
def side(tmp_path_factory):
    """side((rule, *flags)) → the Side of that setting (built once)."""
    trained: dict[str, bytes] = {}
    built: dict[tuple, Side] = {}

    def get(setting: tuple) -> Side:
        if setting not in built:
            rule, *flags = setting
            if rule not in trained:
                trained[rule] = train_unigram(normalization_rule_name=rule)
            proto = spm_model.ModelProto()
            proto.ParseFromString(trained[rule])
            for name, value in zip(FLAGS, flags, strict=True):
                setattr(proto.normalizer_spec, name, value)
            directory = tmp_path_factory.mktemp("spm") / _name(setting)
            built[setting] = Side(directory, proto.SerializeToString(), rule)
        return built[setting]

    return get


@pytest.mark.parametrize("setting", SETTINGS, ids=_name)
@settings(max_examples=60, deadline=None)
@given(text=TEXTS)
@example(text="")
@example(text="▁starts with the space symbol")
@example(text="ends with it ▁ ▁")
@example(text="  leading, inner   and trailing spaces  ")
@example(text="\t\n tab and line feed \r\n")
@example(text="\x01\x02")
@example(text=" ▁ ")
@example(text="Ａ\u0301 e\u0323\u0302 ｶﾞ \u1100\u1161 a\r\nb")  # clusters Precompiled rewrites otherwise
def test_converted_tokenizer_gives_sentencepieces_ids(side, setting, text):
    this = side(setting)
    assert this.codec.pieces_and_ids(text) == this.expected(text)


@pytest.mark.parametrize("text", ["Ａ\u0301", "e\u0323\u0302", "ｶﾞ", "\u1100\u1161", "a\r\nb"])
def test_grapheme_clusters_that_tokenizers_precompiled_rewrites_otherwise_get_sentencepieces_ids(side, text):
    this = side(("nmt_nfkc", True, False, True))
    assert this.precompiled.normalize_str(text) != this.charsmap_only.normalize(text)  # tokenizers alone
    assert this.codec.pieces_and_ids(text) == this.expected(text)


def _with_rules(tmp_path: Path, rules: str, **normalizer_spec) -> Path:
    """A unigram model whose charsmap is `rules` (SentencePiece's TSV), spec fields set."""
    tsv = tmp_path / "rules.tsv"
    tsv.write_text(rules)
    proto = spm_model.ModelProto()
    proto.ParseFromString(train_unigram(normalization_rule_tsv=str(tsv)))
    for name, value in normalizer_spec.items():
        setattr(proto.normalizer_spec, name, value)
    path = tmp_path / "source.spm"
    path.write_bytes(proto.SerializeToString())
    return path


@pytest.mark.parametrize(
    ("rules", "spec", "message"),
    [
        ("2100\t20 20\n", {}, "rewrites a character as several spaces in a row"),
        (
            "7F\t\n",
            {"remove_extra_whitespaces": False},
            "deletes characters and rewrites no tab or line feed",
        ),
    ],
)
def test_charsmaps_no_normalizer_reproduces_are_refused(tmp_path, rules, spec, message):
    path = _with_rules(tmp_path, rules, **spec)
    proto = spm_model.ModelProto()
    proto.ParseFromString(path.read_bytes())
    assert len(problems(proto.normalizer_spec, False)) == 1
    with pytest.raises(ValueError, match=message):
        source_tokenizer(path)


def test_a_charsmap_that_deletes_gets_its_prefix_from_a_tab_it_rewrites_as_a_space(tmp_path):
    path = _with_rules(tmp_path, "7F\t\n9\t20\n", remove_extra_whitespaces=False)
    processor = spm.SentencePieceProcessor(model_file=str(path))
    tokenizer = source_tokenizer(path)
    for text in ("\x7f", "\x7f\x7fa", "\ta\x7f", " \x7f "):
        assert tokenizer.encode(text).tokens == processor.encode(text, out_type=str), text


#: User-defined pieces: one the nmt_nfkc charsmap would rewrite (full-width), one with a
#: combining accent, one inside common words, and Marian-like tags.
USER_DEFINED = ["ｘｙ", "e\u0301t", "th", "<sep>", ">>cmn_Hans<<"]
USER_TEXTS = st.lists(
    st.one_of(
        st.sampled_from([*USER_DEFINED, "ｘ", "ｙ", "e\u0301", "the cat", " ", "  ", "Ａ\u0301"]),
        st.characters(),
    ),
    max_size=12,
).map(lambda parts: "".join(c for c in "".join(parts) if not 0xD800 <= ord(c) < 0xE000 and c != "<"))


@pytest.fixture(scope="module", params=["nmt_nfkc", "identity"])
def user_side(request, tmp_path_factory):
    """A model with user-defined pieces and five normal pieces marked unused."""
    model = train_unigram(normalization_rule_name=request.param, user_defined_symbols=USER_DEFINED)
    proto = spm_model.ModelProto()
    proto.ParseFromString(model)
    normal = [
        p for p in proto.pieces if p.type == 1 and len(p.piece) > 2 and not {"th", "ｘ", "ｙ"} & set(p.piece)
    ]
    for piece in normal[:5]:
        piece.type = 5  # UNUSED: SentencePiece never segments into it
    side = Side(tmp_path_factory.mktemp("user") / request.param, proto.SerializeToString(), request.param)
    side.unused = [piece.piece.replace("▁", " ") for piece in normal[:5]]
    return side


@settings(max_examples=300, deadline=None)
@given(text=USER_TEXTS)
@example(text="ｘｙ and e\u0301t, the <sep> >>cmn_Hans<< with")
def test_user_defined_pieces_win_and_unused_pieces_never_come_out_as_in_sentencepiece(user_side, text):
    assert user_side.codec.pieces_and_ids(text) == user_side.expected(text)


def test_text_of_unused_pieces_is_segmented_into_others_as_in_sentencepiece(user_side):
    for text in user_side.unused:
        assert user_side.codec.pieces_and_ids(text) == user_side.expected(text), text


#: User-defined pieces that hold ▁, which the runtime copies past nmt_nfkc's charsmap (that
#: maps ▁ to a space) as SentencePiece does.
SPACE_SYMBOL_PIECES = ["▁foo", "xy▁", "▁"]


@pytest.fixture(scope="module")
def space_symbol_side(tmp_path_factory):
    """side(flags) → the Side of an nmt_nfkc model with `SPACE_SYMBOL_PIECES`, flags set."""
    model = train_unigram(user_defined_symbols=SPACE_SYMBOL_PIECES)
    built: dict[tuple, Side] = {}

    def get(flags: tuple) -> Side:
        if flags not in built:
            proto = spm_model.ModelProto()
            proto.ParseFromString(model)
            for name, value in zip(FLAGS, flags, strict=True):
                setattr(proto.normalizer_spec, name, value)
            directory = tmp_path_factory.mktemp("space") / "-".join(str(int(f)) for f in flags)
            built[flags] = Side(directory, proto.SerializeToString(), "nmt_nfkc")
        return built[flags]

    return get


@pytest.mark.parametrize("flags", list(itertools.product((True, False), repeat=3)))
@settings(max_examples=40, deadline=None)
@given(
    text=st.lists(
        st.sampled_from([*SPACE_SYMBOL_PIECES, "foo", "x", "y", "q", " ", "  ", "ｘ"]), max_size=8
    ).map("".join)
)
@example(text="▁foo bar")  # the text starts with a user-defined piece that starts with ▁
@example(text="▁")
@example(text="qxy▁")  # the trailing ▁ goes, as remove_extra_whitespaces strips it
def test_user_defined_pieces_holding_the_space_symbol_get_sentencepieces_ids(space_symbol_side, flags, text):
    this = space_symbol_side(flags)
    assert this.codec.pieces_and_ids(text) == this.expected(text)


@pytest.mark.parametrize(
    ("pieces", "spec", "message"),
    [
        (["a  b"], {}, "two spaces in a row"),
        (["x "], {"escape_whitespaces": False}, "holding spaces with escape_whitespaces=false"),
    ],
)
def test_user_defined_pieces_with_spaces_no_normalizer_reproduces_are_refused(
    tmp_path, pieces, spec, message
):
    model = train_unigram(user_defined_symbols=pieces)
    proto = spm_model.ModelProto()
    proto.ParseFromString(model)
    for name, value in spec.items():
        setattr(proto.normalizer_spec, name, value)
    path = tmp_path / "source.spm"
    path.write_bytes(proto.SerializeToString())
    processor = spm.SentencePieceProcessor(model_file=str(path))
    text = "xa  b x x"
    assert source_tokenizer_problems(path) and processor.encode(
        text, out_type=str
    )  # a model SentencePiece loads
    with pytest.raises(ValueError, match=message):
        source_tokenizer(path)
