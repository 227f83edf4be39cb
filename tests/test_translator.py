import itertools
import json
import shutil

import numpy as np
import pytest

from models.batching import split_points
from models.bundle import BundleError, default_bundle_dir
from models.translator import Translator


@pytest.fixture(scope="module")
def int8(tiny_bundle):
    return Translator(tiny_bundle, threads=1)


def test_pad_logit_is_masked(tiny_bundle):
    fp32 = Translator(tiny_bundle, precision="fp32", threads=1, warmup=False)
    source = fp32.codec.encode("Hello there.")
    first = next(fp32.step_logits(source, [fp32.config.decoder_start_token_id]))
    assert int(first.argmax()) == fp32.config.pad_token_id  # the raw model would emit pad
    generated, _ = fp32.generate(source)
    assert fp32.config.pad_token_id not in generated


def test_results_carry_counts_and_the_length_cap_flag(int8):
    result = int8.translate_one("How are you?")
    assert result.source_tokens == len(int8.codec.pieces("How are you?"))
    # the random model never emits eos: it runs to the cap and says so
    assert result.hit_length_cap
    assert result.target_tokens == int8.max_new_tokens(result.source_tokens + 2)
    assert result.seconds > 0 and result.parts == 1


def test_empty_text_is_not_sent_to_the_model(int8):
    result = int8.translate_one("   ")
    assert (result.text, result.source_tokens, result.target_tokens) == ("", 0, 0)


def test_overlong_sentence_is_split_not_truncated(int8):
    sentence = " ".join(f"word{i}, and more" for i in range(300))
    result = int8.translate_one(sentence)
    pieces = int8.codec.pieces(sentence)
    assert result.source_tokens == len(pieces) > 512
    # the parts are cut where split_points cuts, each within the model's positions
    limit = int8.config.max_positions - len(int8.codec.prefix_ids) - 1
    bounds = [0, *split_points(pieces, limit), len(pieces)]
    parts = ["".join(pieces[a:b]).replace("\u2581", " ").strip() for a, b in itertools.pairwise(bounds)]
    assert [len(int8.codec.pieces(part)) for part in parts] == [b - a for a, b in itertools.pairwise(bounds)]
    assert result.parts == len(parts) >= 2
    # and the translation is every part's, translated one by one, joined: none is dropped
    alone = [int8.translate_one(part) for part in parts]
    assert result.text == "".join(part.text for part in alone)
    assert result.target_tokens == sum(part.target_tokens for part in alone)


def test_same_output_whatever_the_thread_count_or_instance(tiny_bundle, int8):
    sentences = ["Tom asked Mary to help him.", "Where is the train station?", "OK."]
    two_threads = Translator(tiny_bundle, threads=2)
    assert [r.text for r in int8.translate(sentences)] == [r.text for r in two_threads.translate(sentences)]


def test_only_the_decoders_threads_spin_and_outputs_stay_the_same(tiny_bundle, int8):
    from models.translator import SessionOptions

    spinning = Translator(
        tiny_bundle, threads=1, session=SessionOptions(intra_op_threads=2, allow_spinning=True)
    )

    def spins(session) -> str:
        return session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning")

    assert spins(spinning._decoder) == "1" and spins(spinning._encoder) == "0"
    assert spins(int8._decoder) == "0"
    sentences = ["Hello there.", "The station is closed today.", "Why?"]
    assert [r.text for r in spinning.translate(sentences)] == [r.text for r in int8.translate(sentences)]


def test_fingerprint_depends_on_precision(tiny_bundle, int8):
    fp32 = Translator(tiny_bundle, precision="fp32", warmup=False)
    assert fp32.fingerprint != int8.fingerprint
    assert Translator(tiny_bundle, warmup=False).fingerprint == int8.fingerprint


def test_fingerprint_changes_with_the_runtimes_tokenization(tiny_bundle, int8, monkeypatch):
    # the same bundle files tokenized by another revision of the runtime must not reuse the
    # translation memory's entries (their ids, and so their outputs, may differ)
    import models.defaults

    monkeypatch.setattr(models.defaults, "TOKENIZATION", "another revision")
    assert Translator(tiny_bundle, warmup=False).fingerprint != int8.fingerprint


def test_corrupt_or_incompatible_bundles_are_refused(tiny_bundle, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_bundle, broken)
    for name in ("decoder.int8.onnx", "decoder.int8.onnx.data"):  # the graph, its weights
        original = (tiny_bundle / name).read_bytes()
        data = bytearray(original)
        data[len(data) // 2] ^= 0xFF
        (broken / name).write_bytes(bytes(data))
        # a corrupt graph is reported as corrupt, not as whatever ONNX Runtime makes of it
        with pytest.raises(BundleError, match=f"{name}: sha256 does not match"):
            Translator(broken)
        (broken / name).write_bytes(original)

    manifest = json.loads((tiny_bundle / "bundle.json").read_text())
    manifest["format_version"] = 99
    future = tmp_path / "future"
    shutil.copytree(tiny_bundle, future)
    (future / "bundle.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="format version 99 is not supported"):
        Translator(future)

    with pytest.raises(BundleError, match="transqueue export Helsinki-NLP/opus-mt-en-zh"):
        Translator(tmp_path)
    with pytest.raises(BundleError, match="missing: no such directory"):
        Translator(tmp_path / "missing")
    with pytest.raises(BundleError, match="bundle.json: not a directory"):  # a file, not a typo
        Translator(future / "bundle.json")


@pytest.mark.parametrize("role", ["source", "target", "codec"])
def test_a_truncated_tokenizer_file_is_reported_as_corrupt(tiny_bundle, tmp_path, role):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_bundle, broken)
    name = json.loads((tiny_bundle / "bundle.json").read_text())["tokenizer"][role]
    (broken / name).write_bytes((tiny_bundle / name).read_bytes()[:1000])
    with pytest.raises(BundleError, match=f"{name}: sha256 does not match"):
        Translator(broken)


def test_a_bundle_without_a_saved_codec_translates_alike(tiny_bundle, tmp_path):
    """Bundles exported before the codec was saved build it from the tokenizer files."""
    older = tmp_path / "older"
    shutil.copytree(tiny_bundle, older)
    manifest = json.loads((older / "bundle.json").read_text())
    codec_file = manifest["tokenizer"].pop("codec")
    del manifest["files"][codec_file]
    (older / codec_file).unlink()
    (older / "bundle.json").write_text(json.dumps(manifest))
    sentences = ["I think you're right.", "Where is the station? It is far.", "ＡＢＣ ＜/s＞ x"]
    saved, built = Translator(tiny_bundle, warmup=False), Translator(older, warmup=False)
    assert saved.manifest.codec_file() is not None and built.manifest.codec_file() is None
    for sentence in sentences:
        assert saved.codec.encode(sentence).tolist() == built.codec.encode(sentence).tolist()
    texts = [[result.text for result in each.translate(sentences)] for each in (saved, built)]
    assert texts[0] == texts[1]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda m: m["tokenizer"].update(source="/etc/passwd"),
            "tokenizer source .* not one of the bundle's files",
        ),
        (
            lambda m: m["graphs"]["decoder"].update(int8="../x/decoder.int8.onnx"),
            "int8 decoder .* not one of",
        ),
        (
            lambda m: m["files"].update({"../x.onnx": {"sha256": "0" * 64}}),
            "not a plain name inside the bundle",
        ),
        (lambda m: m.pop("files"), "it needs files, graphs and tokenizer tables"),
        (lambda m: m["files"][next(iter(m["files"]))].pop("sha256"), "has no sha256"),
    ],
)
def test_a_manifest_names_no_file_outside_its_bundle_nor_one_unchecked(
    tiny_bundle, tmp_path, change, message
):
    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_bundle, bundle)
    manifest = json.loads((bundle / "bundle.json").read_text())
    change(manifest)
    (bundle / "bundle.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match=message):
        Translator(bundle)


def test_a_precision_the_bundle_lacks_is_named_with_the_setting_that_chooses_it():
    """The demo bundle ships int8 only; a worker has no --precision option, so the message
    names the variable too."""
    with pytest.raises(
        BundleError, match=r"choose precision int8 \(--precision of translate, or TRANSQUEUE_PRECISION\)"
    ):
        Translator(default_bundle_dir(), precision="fp32", warmup=False)


def test_decoding_is_greedy_argmax_over_unbanned_logits(tiny_bundle):
    fp32 = Translator(tiny_bundle, precision="fp32", threads=1, warmup=False)
    source = fp32.codec.encode("I think you're right.")
    generated, _ = fp32.generate(source)
    tokens = [fp32.config.decoder_start_token_id, *generated[:-1]]
    for logits, chosen in zip(fp32.step_logits(source, tokens), generated, strict=True):
        logits[list(fp32.config.bad_words_ids)] = -np.inf
        assert int(logits.argmax()) == chosen
