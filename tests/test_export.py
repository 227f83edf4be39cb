import json
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner
from conftest import TINY_CORPUS, build_tiny_marian, export_tiny

from cli import main
from models.builder.export import duplicated_initializers, size_report
from models.builder.hub import SourceError, resolve
from models.builder.quantize import QuantizeOptions
from models.builder.validate import ValidateOptions, ValidationError, validate
from models.bundle import EXTERNAL_DATA, Manifest, decoder_precisions, read_manifest, sha256_file


def test_manifest_records_config_files_versions_and_validation(tiny_bundle, tiny_marian_dir):
    manifest = read_manifest(tiny_bundle)
    data = manifest.data
    vocab = json.loads((tiny_marian_dir / "vocab.json").read_text())
    config = manifest.config
    assert config.pad_token_id == vocab["<pad>"] == len(vocab) - 1
    assert config.decoder_start_token_id == config.pad_token_id
    assert config.eos_token_id == 0 and config.unk_token_id == 1
    assert config.pad_token_id in config.bad_words_ids
    assert config.target_lang_token == ">>cmn_Hans<<"
    assert config.target_lang_token_id == vocab[">>cmn_Hans<<"]
    assert config.max_positions == 512
    assert set(manifest.precisions) == {"int8", "fp32"}
    assert data["graphs"]["opset"] >= 17
    assert data["quantization"]["per_channel"] is True
    assert {"torch", "transformers", "onnx", "onnxruntime"} <= set(data["versions"])
    for name, info in manifest.files.items():
        assert sha256_file(tiny_bundle / name) == info["sha256"]
    validation = data["validation"]
    assert validation["fp32"]["sentences"] >= 50
    assert validation["fp32"]["greedy_identical"] == validation["fp32"]["sentences"]
    assert validation["fp32"]["max_abs_diff"] <= 1e-3
    assert validation["tokenizer"]["source_strings"] > 400
    assert 0.0 <= validation["int8"]["exact_match"] <= 1.0


def test_graphs_have_dynamic_axes_no_encoder_in_decoder_and_no_duplicates(tiny_bundle):
    encoder = onnx.load(tiny_bundle / "encoder.onnx")
    assert encoder.opset_import[0].version >= 17
    dims = encoder.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in dims] == ["batch", "src"]
    for name in ("decoder.onnx", "decoder.int8.onnx"):
        decoder = onnx.load(tiny_bundle / name)
        inputs = [i.name for i in decoder.graph.input]
        assert "input_ids" in inputs and "cross_key.0" in inputs and "past_key.0" in inputs
        assert not any("encoder" in init.name for init in decoder.graph.initializer)
        assert duplicated_initializers(tiny_bundle / name, min_elements=1) == []
    int8 = onnx.load(tiny_bundle / "decoder.int8.onnx")
    ops = {node.op_type for node in int8.graph.node}
    assert "DynamicQuantizeLinear" not in ops  # the row scheme:
    assert "MatMulIntegerToFloat" in ops and "MatMulInteger" not in ops  # the lm_head's too
    initializers = {init.name: init for init in int8.graph.initializer}
    assert "embed_tokens.int8" in initializers and "embed_tokens.int8_t" not in initializers
    weights = [n.input[1] for n in int8.graph.node if n.op_type == "MatMul" and n.input[1] in initializers]
    assert weights == []  # every constant-weight MatMul is integer
    assert read_manifest(tiny_bundle).data["quantization"]["scheme"] == "row"


def test_decoder_step_reads_every_key_as_it_is(tiny_bundle):
    # scores are key · query: a query · keyᵀ product makes ONNX Runtime pack a transposed
    # copy of every key at every step
    decoder = onnx.load(tiny_bundle / "decoder.onnx")
    layers = sum(1 for i in decoder.graph.input if i.name.startswith("cross_key."))
    keys = {f"{kind}_key.{layer}" for kind in ("present", "cross") for layer in range(layers)}
    readers = [node for node in decoder.graph.node if keys & set(node.input)]
    assert len(readers) == 2 * layers
    assert all(node.op_type == "MatMul" and node.input[0] in keys for node in readers)


def test_tensor_scheme_export_is_decoded_one_row_at_a_time(tiny_marian_dir, tmp_path):
    from models.translator import Translator

    bundle = export_tiny(tiny_marian_dir, tmp_path / "bundle", quantize=QuantizeOptions(scheme="tensor"))
    int8 = onnx.load(bundle / "decoder.int8.onnx")
    assert "DynamicQuantizeLinear" in {node.op_type for node in int8.graph.node}
    assert Translator(bundle, warmup=False).max_batch == 1
    assert Translator(bundle, precision="fp32", warmup=False).max_batch > 1


def test_graphs_keep_their_weights_beside_them(tiny_bundle):
    manifest = read_manifest(tiny_bundle)
    for precision in ("int8", "fp32"):
        used = manifest.files_for(precision)
        for role in ("encoder", "decoder"):
            graph = manifest.graph(role, precision)
            weights = graph.name + EXTERNAL_DATA
            assert weights in used and weights in manifest.files
            assert graph.stat().st_size < (tiny_bundle / weights).stat().st_size
    # the weights are part of the model's identity: jobs are routed by it
    changed = json.loads((tiny_bundle / "bundle.json").read_text())
    changed["files"]["decoder.int8.onnx.data"]["sha256"] = "0" * 64
    other = Manifest(tiny_bundle, changed, manifest.config)
    assert other.model_key("int8") != manifest.model_key("int8")
    assert other.model_key("fp32") == manifest.model_key("fp32")


def test_int8_only_export_keeps_only_deployment_files(tiny_marian_dir, tmp_path):
    from models.builder.export import ExportOptions  # noqa: F401  (documented flag path)

    bundle = export_tiny(tiny_marian_dir, tmp_path / "bundle", keep_fp32=False)
    manifest = read_manifest(bundle)
    assert manifest.precisions == ("int8",)
    assert not (bundle / "decoder.onnx").exists()
    assert "decoder.onnx" not in manifest.files
    assert not (bundle / "decoder.onnx.data").exists() and not (bundle / "encoder.onnx.data").exists()
    # the row scheme's int8 encoder replaces the fp32 one too
    assert not (bundle / "encoder.onnx").exists()
    assert manifest.graph("encoder", "int8") == bundle / "encoder.int8.onnx"
    # validated at export; validating it again needs its fp32 outputs, which it lacks
    result = CliRunner().invoke(
        main, ["validate", str(bundle), "--reference", str(tiny_marian_dir), "--parity-corpus", "none"]
    )
    assert result.exit_code == 1 and "ships only int8 (exported with --int8-only)" in result.output


@pytest.mark.parametrize(
    ("decoder", "precisions", "later"),
    [
        ("decoder.onnx", ("fp32",), True),  # an older bundle's one fp32 graph, named by path
        ({"fp32": "decoder.onnx", "int8": "decoder.int8.onnx"}, ("fp32", "int8"), True),
        ({"int8": "decoder.int8.onnx"}, ("int8",), False),
    ],
)
def test_an_unvalidated_bundle_can_be_validated_later_when_it_has_an_fp32_decoder(decoder, precisions, later):
    graphs = {"encoder": "encoder.onnx", "decoder": decoder}
    assert decoder_precisions(graphs) == precisions
    report = size_report(Path("b"), {"files": {}, "graphs": graphs, "validation": {"skipped": True}})
    assert ("run `transqueue validate`" in report) == later
    assert ("it cannot be validated later" in report) == (not later)


def test_an_int8_only_bundle_exported_unvalidated_is_never_said_to_be_validated(tiny_marian_dir, tmp_path):
    out = tmp_path / "bundle"
    args = ["export", str(tiny_marian_dir), "--out", str(out), "--int8-only", "--skip-validation"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "run `transqueue validate`" not in result.output  # it cannot: its fp32 graphs are gone
    assert "with --int8-only it cannot be validated later" in result.output
    args = ["validate", str(out), "--reference", str(tiny_marian_dir), "--parity-corpus", "none"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1 and "it was never validated" in result.output
    assert "validated at export" not in result.output


def test_row_scheme_export_quantizes_the_encoder_token_by_token(tiny_bundle):
    bundle = tiny_bundle
    manifest = read_manifest(bundle)
    assert manifest.graph("encoder", "int8") == bundle / "encoder.int8.onnx"
    assert manifest.graph("encoder", "fp32") == bundle / "encoder.onnx"
    encoder = onnx.load(bundle / "encoder.int8.onnx")
    ops = {node.op_type for node in encoder.graph.node}
    assert {"MatMulIntegerToFloat", "QuantizeLinear"} <= ops
    assert "MatMulInteger" not in ops  # every projection in symmetric or shifted rows
    assert "MatMul" in ops  # attention scores stay fp32
    float_weights = [
        init.name
        for init in encoder.graph.initializer
        if init.data_type == onnx.TensorProto.FLOAT and len(init.dims) == 2
    ]
    assert not [name for name in float_weights if name.endswith("embed_tokens.weight")]  # int8 rows instead


def test_fp32_encoder_option_keeps_one_encoder(tiny_marian_dir, tmp_path):
    bundle = export_tiny(tiny_marian_dir, tmp_path / "bundle", quantize=QuantizeOptions(encoder=False))
    manifest = read_manifest(bundle)
    assert manifest.graph("encoder", "int8") == manifest.graph("encoder", "fp32") == bundle / "encoder.onnx"
    assert not (bundle / "encoder.int8.onnx").exists()


@pytest.mark.parametrize("op_types", [("MatMul",), ("MatMul", "Gather")])
def test_fp32_lm_head_option_keeps_one_shared_matrix(tiny_marian_dir, tmp_path, op_types):
    bundle = export_tiny(  # Gather among the op types left the Gemm reading a removed matrix
        tiny_marian_dir,
        tmp_path / "bundle",
        quantize=QuantizeOptions(scheme="tensor", quantize_embeddings=False, op_types=op_types),
    )
    int8 = onnx.load(bundle / "decoder.int8.onnx")
    users = [n.op_type for n in int8.graph.node if "embed_tokens.weight" in n.input]
    assert sorted(users) == ["Gather", "Gemm"]
    assert duplicated_initializers(bundle / "decoder.int8.onnx", min_elements=1) == []
    assert read_manifest(bundle).data["quantization"]["quantize_embeddings"] is False


def test_validation_failure_names_sentence_and_step(tiny_bundle, tmp_path):
    other = build_tiny_marian(tmp_path / "other", seed=1)
    options = ValidateOptions(int8_min_exact=0, int8_min_agreement=0, parity_corpus=TINY_CORPUS)
    with pytest.raises(ValidationError, match=r"sentence 1 .*step \d+"):
        validate(tiny_bundle, other, options)


def test_cli_export_then_validate(tiny_marian_dir, tmp_path):
    runner = CliRunner()
    out = tmp_path / "bundle"
    flags = ["--int8-min-exact", "0", "--int8-min-agreement", "0", "--parity-corpus", str(TINY_CORPUS)]
    result = runner.invoke(main, ["export", str(tiny_marian_dir), "--out", str(out), *flags])
    assert result.exit_code == 0, result.output
    assert "fp32 greedy identical to PyTorch on 56/56 sentences" in result.output
    assert "decoder.int8.onnx" in result.output and "total" in result.output
    result = runner.invoke(main, ["validate", str(out), "--reference", str(tiny_marian_dir), *flags])
    assert result.exit_code == 0, result.output
    assert "validation passed" in result.output
    result = runner.invoke(
        main, ["validate", str(out), "--reference", str(tiny_marian_dir), "--json", *flags]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["fp32"]["greedy_identical"] == 56  # stdout is the JSON alone
    assert result.stderr.endswith("validation passed\n")


@pytest.mark.parametrize("command", ["export", "validate"])
@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--parity-corpus", "missing.tsv", "missing.tsv: no such file ('none' skips the corpus)"),
        ("--parity-corpus", ".", ".: a directory, not a file ('none' skips the corpus)"),
        ("--fp32-max-diff", "nan", "nan is not a threshold"),
        ("--fp32-max-diff", "-1", "-1.0 is not in the range x>=0."),
        ("--fp32-max-diff", "inf", "inf is not a threshold"),
        ("--int8-min-exact", "nan", "nan is not a threshold"),
        ("--int8-min-agreement", "1.5", "1.5 is not in the range 0<=x<=1."),
    ],
)
def test_a_validation_flag_that_would_check_nothing_is_a_usage_error(tmp_path, command, flag, value, message):
    """A missing corpus was skipped and nan passed every check: validation passed."""
    args = ["x", "--out", str(tmp_path / "y")] if command == "export" else [str(tmp_path), "--reference", "x"]
    result = CliRunner().invoke(main, [command, *args, flag, value])
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == f"Error: Invalid value for '{flag}': {message}"


def test_an_out_that_cannot_be_made_is_one_line_naming_it(tiny_marian_dir, tmp_path):
    (tmp_path / "file").write_text("not a directory\n")
    out = tmp_path / "file" / "bundle"
    result = CliRunner().invoke(
        main, ["export", str(tiny_marian_dir), "--out", str(out), "--skip-validation"]
    )
    assert result.exit_code == 1 and not isinstance(result.exception, OSError), result.output
    assert result.output.splitlines()[-1] == (
        f"Error: {out}.partial: cannot make the bundle's directory here (Not a directory)"
    )


@pytest.mark.parametrize(
    ("value", "said"),
    [("Gemm", "Gemm: not among"), ("MatMul,Bogus", "Bogus: not among"), (",", "name at least one of")],
)
def test_op_types_that_would_quantize_nothing_or_everything_are_a_usage_error(tmp_path, value, said):
    args = ["export", "x", "--out", str(tmp_path / "y"), "--int8-scheme", "tensor", "--op-types", value]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '--op-types': {said} the op types onnxruntime's" in result.output


def test_a_bundle_that_fails_validation_replaces_nothing_and_is_left_in_partial(
    tiny_marian_dir, tiny_bundle, tmp_path
):
    out, staging = tmp_path / "bundle", tmp_path / "bundle.partial"
    shutil.copytree(tiny_bundle, out)
    before = {path.name: sha256_file(path) for path in out.iterdir()}
    runner = CliRunner()
    flags = ["--int8-min-exact", "0", "--int8-min-agreement", "0", "--parity-corpus", str(TINY_CORPUS)]
    args = ["export", str(tiny_marian_dir), "--out", str(out), "--force", *flags]
    # ONNX Runtime's fp32 logits differ from PyTorch's by about 1e-7: a 1e-9 tolerance fails
    result = runner.invoke(main, [*args, "--fp32-max-diff", "1e-9"])
    assert result.exit_code == 1
    assert f"validation failed, bundle left in {staging} for inspection" in result.output
    assert "fp32 logits differ from PyTorch by" in result.output and "> 1e-09" in result.output
    assert {path.name: sha256_file(path) for path in out.iterdir()} == before  # the old bundle, whole

    # left for inspection: the whole build, every file in its manifest, which has no validation
    left = read_manifest(staging)
    assert "validation" not in left.data and set(left.precisions) == {"int8", "fp32"}
    assert {path.name for path in staging.iterdir()} == {*left.files, "bundle.json"}
    for name, info in left.files.items():
        assert sha256_file(staging / name) == info["sha256"]

    # the next export replaces what was left and, validated, moves it to out
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    assert not staging.exists()
    assert read_manifest(out).data["validation"]["fp32"]["threshold"] == 1e-3


def test_hub_id_offline_fails_with_local_directory_advice(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(SourceError, match="pass it instead: transqueue export /path/to/opus-mt-en-zh"):
        resolve("Helsinki-NLP/opus-mt-en-zh")


def test_a_hub_error_of_several_lines_is_reported_on_one(monkeypatch):
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError

    said = "Got: ConnectError: [Errno -2] Name or service not known\nAn error happened while trying to locate"

    def unreachable(*_args, **_kwargs):  # what the hub says when its host cannot be resolved
        raise LocalEntryNotFoundError(said)

    monkeypatch.setattr(huggingface_hub, "list_repo_files", unreachable)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", unreachable)
    with pytest.raises(SourceError) as error:
        resolve("Helsinki-NLP/opus-mt-en-zh")
    assert "\n" not in str(error.value) and "not known An error happened" in str(error.value)


def _fake_hub(monkeypatch, tmp_path, listing, checkpoint=None):
    """Stand-ins for the hub (unreachable here): `listing` is the repo's files, or an
    exception to raise; the snapshot holds the allowed ones, copied from `checkpoint` where
    it has them (a file `resolve` reads must be a real one). Returns the patterns asked."""
    import fnmatch

    import huggingface_hub

    asked = []

    def list_repo_files(repo_id, revision=None):
        if isinstance(listing, Exception):
            raise listing
        return listing

    def snapshot_download(repo_id, revision=None, allow_patterns=None):
        asked.extend(allow_patterns)
        held = listing if isinstance(listing, list) else ["config.json", "pytorch_model.bin"]
        snapshot = tmp_path / "snapshot" / "0123abcd"
        for name in held:
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in allow_patterns):
                (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
                real = checkpoint / name if checkpoint is not None else None
                (snapshot / name).write_bytes(real.read_bytes() if real and real.is_file() else b"x")
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "list_repo_files", list_repo_files)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    return asked


HUB_REPO = [
    "config.json",
    "source.spm",
    "target.spm",
    "vocab.json",
    "tokenizer_config.json",
    "pytorch_model.bin",
    "tf_model.h5",
    "rust_model.ot",
    "onnx/model.safetensors",
    "onnx/config.json",
]


@pytest.mark.parametrize(
    ("extra", "weights"), [(["model.safetensors"], "model.safetensors"), ([], "pytorch_model.bin")]
)
def test_hub_download_fetches_one_weights_file_and_no_subfolder(
    monkeypatch, tmp_path, tiny_marian_dir, extra, weights
):
    asked = _fake_hub(monkeypatch, tmp_path, HUB_REPO + extra, tiny_marian_dir)
    checkpoint = resolve("Helsinki-NLP/opus-mt-en-zh", revision="main")
    fetched = sorted(
        p.relative_to(checkpoint.directory).as_posix() for p in checkpoint.directory.rglob("*.*")
    )
    assert weights in fetched and not any(name.startswith("onnx/") for name in fetched)
    assert {"pytorch_model.bin", "model.safetensors"} & set(fetched) == {weights}
    assert not any("*" in pattern for pattern in asked)
    assert checkpoint.revision == "0123abcd" and checkpoint.source == "Helsinki-NLP/opus-mt-en-zh"


def test_hub_listing_failure_leaves_the_cache_to_snapshot_download(monkeypatch, tmp_path):
    asked = _fake_hub(monkeypatch, tmp_path, ConnectionError("offline"))
    with pytest.raises(SourceError, match="missing source.spm, target.spm, vocab.json"):
        resolve("Helsinki-NLP/opus-mt-en-zh")  # the fake cache holds a config and a .bin only
    assert {"model.safetensors", "pytorch_model.bin"} <= set(asked)


def test_local_path_that_is_not_a_checkpoint(tmp_path):
    with pytest.raises(SourceError, match="no such checkpoint directory"):
        resolve(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="missing config.json"):
        resolve(str(tmp_path / "empty"))
    (tmp_path / "config.json").write_text("{}")  # a file of a checkpoint, given in its place
    with pytest.raises(SourceError, match=r"config.json: not a directory \(a checkpoint is a directory"):
        resolve(str(tmp_path / "config.json"))


# Runs the CLI as if torch were not installed: None in sys.modules makes find_spec("torch")
# None and any import of it fail. At exit it prints what tried to import torch or loaded
# a heavy module.
WITHOUT_TORCH = """
import atexit, builtins, sys
sys.modules["torch"] = None
tried, real_import = [], builtins.__import__
def spy(name, *args, **kwargs):
    if name.partition(".")[0] == "torch":
        tried.append(name)
    return real_import(name, *args, **kwargs)
builtins.__import__ = spy
heavy = ("torch", "transformers", "onnx", "sentencepiece")
loaded = lambda: [name for name in heavy if sys.modules.get(name)]
atexit.register(lambda: print("tried torch:", tried, "loaded:", loaded(), file=sys.stderr))
from cli import main
main()
"""


@pytest.mark.parametrize("command", ["export", "validate"])
def test_export_and_validate_without_torch_name_the_extra_and_import_nothing_heavy(command, tmp_path):
    args = ["x", "--out", str(tmp_path / "y")] if command == "export" else [str(tmp_path), "--reference", "x"]
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, command, *args],
        cwd=Path(__file__).resolve().parent.parent,  # this checkout's cli
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr  # an error, README's exit statuses
    assert done.stderr.splitlines() == [
        "Error: this command needs the export extra (missing: torch). "
        "Install it with: pip install 'transqueue[export]'",
        "tried torch: [] loaded: []",
    ]


def _edited_copy(tiny_marian_dir, tmp_path, file_name, **changes):
    """A copy of the tiny checkpoint with `changes` made to one of its JSON files."""
    import shutil

    checkpoint = tmp_path / "edited"
    shutil.copytree(tiny_marian_dir, checkpoint)
    path = checkpoint / file_name
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    return checkpoint


@pytest.mark.parametrize(
    ("file_name", "changes", "message"),
    [
        ("generation_config.json", {"no_repeat_ngram_size": 2}, "no_repeat_ngram_size=2"),
        ("generation_config.json", {"repetition_penalty": 1.3}, "repetition_penalty=1.3"),
        ("generation_config.json", {"bad_words_ids": [[5, 6]]}, "bad_words_ids of more than one token"),
        ("generation_config.json", {"eos_token_id": [0, 7]}, r"several eos ids \(\[0, 7\]\)"),
        ("config.json", {"share_encoder_decoder_embeddings": False}, "separate source and target vocab"),
        ("config.json", {"tie_word_embeddings": False}, "an lm_head not tied to the embedding"),
    ],
)
def test_checkpoints_that_would_not_decode_as_generate_are_refused_up_front(
    tiny_marian_dir, tmp_path, file_name, changes, message
):
    from models.builder.export import ExportError

    checkpoint = _edited_copy(tiny_marian_dir, tmp_path, file_name, **changes)
    with pytest.raises(ExportError, match=message):
        export_tiny(checkpoint, tmp_path / "bundle")
    assert not (tmp_path / "bundle.partial").exists()


@pytest.mark.parametrize(
    ("file_name", "content", "message"),
    [
        ("config.json", b"{not json", "config.json cannot be read as JSON"),
        ("config.json", b'{"model_type": "bart"}', "model_type 'bart', not 'marian'"),
        ("generation_config.json", b"[1, 2", "generation_config.json cannot be read as JSON"),
        ("vocab.json", b"[]", r"vocab.json is not Marian's vocabulary \(an object of piece → id\)"),
        ("source.spm", b"xx", r"source.spm is not a SentencePiece model \(it has no <unk> piece\)"),
        ("target.spm", b"\xff\xff\xff", "target.spm is not a SentencePiece model"),
    ],
)
def test_a_checkpoint_file_that_cannot_be_read_is_named_before_any_work(
    tiny_marian_dir, tmp_path, file_name, content, message
):
    """Each was a traceback from transformers or the tokenizer conversion (a broken
    source.spm after the whole ONNX export), or, for generation_config.json, skipped."""
    checkpoint = _edited_copy(tiny_marian_dir, tmp_path, "config.json")
    (checkpoint / file_name).write_bytes(content)
    with pytest.raises(SourceError, match=message):
        resolve(str(checkpoint))


def test_weights_transformers_cannot_load_are_one_error_naming_the_checkpoint(tiny_marian_dir, tmp_path):
    checkpoint = _edited_copy(tiny_marian_dir, tmp_path, "config.json")
    (checkpoint / "model.safetensors").write_bytes(b"garbage" * 10)
    result = CliRunner().invoke(main, ["export", str(checkpoint), "--out", str(tmp_path / "bundle")])
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        f"Error: {checkpoint}: transformers cannot load this checkpoint "
        "(SafetensorError: Error while deserializing header: header too large)"
    ]
    assert not (tmp_path / "bundle.partial").exists()


def test_a_source_spm_that_cannot_be_converted_exactly_is_refused_up_front(tiny_marian_dir, tmp_path):
    from sentencepiece import sentencepiece_model_pb2 as spm_model

    from models.builder.export import ExportError

    checkpoint = _edited_copy(tiny_marian_dir, tmp_path, "config.json")
    proto = spm_model.ModelProto()
    proto.ParseFromString((checkpoint / "source.spm").read_bytes())
    proto.trainer_spec.treat_whitespace_as_suffix = True
    (checkpoint / "source.spm").write_bytes(proto.SerializeToString())
    with pytest.raises(
        ExportError, match="source.spm cannot be converted exactly: treat_whitespace_as_suffix"
    ):
        export_tiny(checkpoint, tmp_path / "bundle")
    assert not (tmp_path / "bundle.partial").exists()


def test_the_generation_configs_start_token_is_the_bundles_and_decodes_as_generate(tiny_marian_dir, tmp_path):
    import torch
    from transformers import MarianMTModel

    from models.translator import Translator

    # config.json keeps <pad> as the start; generate takes the generation config's
    checkpoint = _edited_copy(tiny_marian_dir, tmp_path, "generation_config.json", decoder_start_token_id=7)
    bundle = export_tiny(checkpoint, tmp_path / "bundle")  # validated against PyTorch
    assert read_manifest(bundle).config.decoder_start_token_id == 7
    fp32 = Translator(bundle, precision="fp32", threads=1)
    source = fp32.codec.encode("I like cats.")
    model = MarianMTModel.from_pretrained(checkpoint).eval()
    cap = fp32.max_new_tokens(len(source))
    with torch.no_grad():
        theirs = model.generate(torch.tensor([source]), num_beams=1, do_sample=False, max_new_tokens=cap)
    ids = theirs[0].tolist()[1:]  # after the start token
    generated, capped = fp32.generate(source)
    if capped:  # generate's forced_eos_token_id replaces its last id by eos
        assert ids[: cap - 1] == generated[: cap - 1]
    else:
        assert ids == [*generated, fp32.config.eos_token_id]


def test_a_model_with_fewer_positions_than_the_regression_sentences_validates(tiny_marian_dir, tmp_path):
    checkpoint = _edited_copy(tiny_marian_dir, tmp_path, "config.json", max_position_embeddings=64)
    bundle = export_tiny(checkpoint, tmp_path / "bundle")
    report = read_manifest(bundle).data["validation"]["fp32"]
    assert 0 < report["greedy_identical"] == report["sentences"] < 56  # the longest are split at run time


def test_export_never_replaces_a_directory_that_is_not_a_bundle_and_a_bundle_only_when_told(
    tiny_marian_dir, tiny_bundle, tmp_path
):
    from models.builder.export import ExportError

    documents = tmp_path / "documents"
    documents.mkdir()
    (documents / "thesis.txt").write_text("precious")
    with pytest.raises(ExportError, match="exists and is not a bundle: refusing to replace it"):
        export_tiny(tiny_marian_dir, documents)
    assert (documents / "thesis.txt").read_text() == "precious"
    stray = tmp_path / "bundle.partial"
    stray.mkdir()
    (stray / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="holds files that no export wrote"):
        export_tiny(tiny_marian_dir, tmp_path / "bundle")
    assert (stray / "notes.txt").exists()

    out = tmp_path / "copy"
    shutil.copytree(tiny_bundle, out)
    runner = CliRunner()
    args = ["export", str(tiny_marian_dir), "--out", str(out), "--skip-validation"]
    result = runner.invoke(main, args)
    assert result.exit_code == 1 and "holds a bundle already: pass --force to replace it" in result.output
    assert read_manifest(out).data["validation"] != {"skipped": True}
    result = runner.invoke(main, [*args, "--force"])
    assert result.exit_code == 0, result.output
    assert read_manifest(out).data["validation"] == {"skipped": True}


def test_an_existing_bundle_is_refused_before_the_hub_is_asked(tiny_bundle, monkeypatch, tmp_path):
    from models.builder.export import ExportError, ExportOptions, export

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # asked, it would fail with a SourceError
    with pytest.raises(ExportError, match="holds a bundle already: pass --force"):
        export("Helsinki-NLP/opus-mt-en-zh", tiny_bundle, ExportOptions())
