"""`transqueue export`: a MarianMT checkpoint → a validated ONNX bundle.

The bundle is built in DIR.partial and moved to DIR only once validation passed, so a
directory named by --out is always a bundle that passed. Export-time only: imports
torch, transformers, sentencepiece and onnx.
"""

from __future__ import annotations

import gc
import hashlib
import json
import shutil
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from models.builder import defaults
from models.builder.hub import Checkpoint, load_model, resolve
from models.builder.onnx_graphs import OPSET, export_decoder, export_encoder
from models.builder.portable import cpu_dependent_ops, decompose_softmax
from models.builder.quantize import QuantizeOptions, quantize_decoder, quantize_encoder
from models.builder.tokenizer_convert import convert, problems
from models.builder.validate import ValidateOptions, validate
from models.bundle import EXTERNAL_DATA, FORMAT, FORMAT_VERSION, MANIFEST, decoder_precisions, sha256_file
from models.tokenizer import MarianCodec

ENCODER, ENCODER_INT8 = "encoder.onnx", "encoder.int8.onnx"
DECODER, DECODER_INT8 = "decoder.onnx", "decoder.int8.onnx"
#: The codec as the runtime builds it from the tokenizer files (`MarianCodec.save`).
CODEC = "codec.npz"
#: Licence and attribution files carried from the checkpoint into the bundle.
CARRIED_FILES = ("ATTRIBUTION.md", "LICENSE", "README.md")
#: Every file an export writes (graphs, their weights, tokenizer files, carried files).
_EXPORT_FILES = {
    *(
        name + suffix
        for name in (ENCODER, ENCODER_INT8, DECODER, DECODER_INT8)
        for suffix in ("", EXTERNAL_DATA)
    ),
    "source.tokenizer.json",
    "target.tokenizer.json",
    "vocab.json",
    CODEC,
    MANIFEST,
    *CARRIED_FILES,
}


@dataclass(frozen=True)
class ExportOptions:
    """What `transqueue export` makes; recorded in bundle.json."""

    revision: str | None = None
    target_lang_token: str | None = defaults.TARGET_LANG_TOKEN
    keep_fp32: bool = True
    validate: bool = True
    replace: bool = False
    quantize: QuantizeOptions = field(default_factory=QuantizeOptions)
    validation: ValidateOptions = field(default_factory=ValidateOptions)


class ExportError(RuntimeError):
    """The export or its validation failed."""


#: Generation settings that change greedy output, with the value that leaves it alone:
#: a checkpoint setting any other value is refused, since the bundle would not decode as
#: `generate` does. (`forced_eos_token_id` only acts at `generate`'s max_length, where a
#: transqueue sentence stops at its own length cap instead, flagged.)
NEUTRAL_GENERATION = {
    "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "min_length": 0,
    "min_new_tokens": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "forced_bos_token_id": None,
    "forced_decoder_ids": None,
    "sequence_bias": None,
    "exponential_decay_length_penalty": None,
}


def check_supported(model_config, generation_config, model_dir: Path) -> None:
    """ExportError unless the checkpoint is one the bundle can decode exactly as `generate`
    does greedily: one vocabulary shared by source and target, the lm_head tied to it, one
    eos id, single-token `bad_words_ids` and no generation setting of `NEUTRAL_GENERATION`
    other than its neutral value."""
    problems = []
    if getattr(model_config, "share_encoder_decoder_embeddings", True) is False or (
        (model_dir / "target_vocab.json").exists()
    ):
        problems.append("separate source and target vocabularies (target_vocab.json)")
    if getattr(model_config, "tie_word_embeddings", True) is False:
        problems.append("an lm_head not tied to the embedding (tie_word_embeddings false)")
    eos = getattr(generation_config, "eos_token_id", None)
    if isinstance(eos, list) and len(set(eos)) > 1:
        problems.append(f"several eos ids ({eos})")
    if any(len(ids) != 1 for ids in getattr(generation_config, "bad_words_ids", None) or []):
        problems.append("bad_words_ids of more than one token")
    for name, neutral in NEUTRAL_GENERATION.items():
        value = getattr(generation_config, name, None)  # unset: None (or empty)
        if value not in (None, [], {}) and value != neutral:
            problems.append(f"{name}={value!r}")
    if problems:
        raise ExportError(
            f"{model_dir}: not supported by transqueue's greedy decoding: {'; '.join(problems)}"
        )


def _generation_id(generation_config, model_config, name: str) -> int:
    """`name` (a token id) as `generate` takes it: from the generation config, else the model's."""
    value = getattr(generation_config, name, None)
    if isinstance(value, list):
        value = value[0]
    return getattr(model_config, name) if value is None else value


def _config(model_config, generation_config, vocab: dict[str, int], lang_token: str | None) -> dict:
    config = model_config
    bad_words = getattr(generation_config, "bad_words_ids", None) or []
    bad = sorted({i for ids in bad_words for i in ids})
    if config.pad_token_id not in bad:
        bad.append(config.pad_token_id)
    if lang_token is not None and lang_token not in vocab:
        lang_token = None
    return {
        "vocab_size": config.vocab_size,
        "decoder_layers": config.decoder_layers,
        "decoder_heads": config.decoder_attention_heads,
        "head_dim": config.d_model // config.decoder_attention_heads,
        "eos_token_id": _generation_id(generation_config, config, "eos_token_id"),
        "pad_token_id": config.pad_token_id,
        "unk_token_id": vocab["<unk>"],
        "decoder_start_token_id": _generation_id(generation_config, config, "decoder_start_token_id"),
        "bad_words_ids": bad,
        "max_positions": config.max_position_embeddings,
        "target_lang_token": lang_token,
        "target_lang_token_id": vocab[lang_token] if lang_token else None,
    }


def save_codec(directory: Path, tokenizer_files: dict[str, str], config: dict) -> str:
    """Save the codec of the tokenizer files in `directory` as `CODEC` there (validation
    then checks the codec a worker loads: the saved one) and return its name."""
    codec = MarianCodec(
        directory / tokenizer_files["source"],
        directory / tokenizer_files["target"],
        eos_id=config["eos_token_id"],
        unk_id=config["unk_token_id"],
    )
    codec.save(directory / CODEC)
    return CODEC


def store_weights_beside(path: Path) -> None:
    """Rewrite the graph at `path` with its weights in `path` + EXTERNAL_DATA.

    ONNX Runtime maps that file instead of parsing the weights out of the protobuf and
    copying them: an opus-mt-sized int8 worker's two sessions take 128 MB instead of 196 MB
    and load in 0.7 s instead of 1.1 s (docs/benchmarks.md).
    """
    model = onnx.load(path)
    onnx.save(
        model,
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=path.name + EXTERNAL_DATA,
        size_threshold=1024,
    )


def duplicated_initializers(path: Path, min_elements: int = 4096) -> list[tuple[str, str]]:
    """Pairs of large matrices in one ONNX file that hold the same (or transposed) data."""
    seen: dict[str, str] = {}
    pairs = []
    for init in onnx.load(path).graph.initializer:
        array = numpy_helper.to_array(init)
        if array.ndim != 2 or array.size < min_elements:
            continue
        for variant in (array, array.T):
            key = hashlib.sha256(np.ascontiguousarray(variant).tobytes()).hexdigest()
            if key in seen:
                pairs.append((seen[key], init.name))
        seen[hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()] = init.name
    return pairs


def _versions() -> dict[str, str]:
    names = ("torch", "transformers", "onnx", "onnxruntime", "tokenizers", "sentencepiece")
    return {name: version(name) for name in names}


def _file_table(directory: Path) -> dict[str, dict]:
    return {
        path.name: {"sha256": sha256_file(path), "bytes": path.stat().st_size}
        for path in sorted(directory.iterdir())
        if path.is_file() and path.name != MANIFEST
    }


def _write_manifest(directory: Path, manifest: dict) -> None:
    manifest["files"] = _file_table(directory)
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")


def check_out(out: Path, replace: bool) -> None:
    """ExportError unless the bundle may be written to `out`: a new or empty directory, or
    (with `replace`) a bundle already; never a directory of other files, which the
    export would delete. `out`.partial, its staging directory, is replaced if it holds
    nothing but the files of an export."""
    staging = out.with_name(out.name + ".partial")
    if staging.is_dir() and {path.name for path in staging.iterdir()} - _EXPORT_FILES:
        raise ExportError(f"{staging} holds files that no export wrote; move them or choose another --out")
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    if not (out / MANIFEST).is_file():
        raise ExportError(f"{out} exists and is not a bundle: refusing to replace it; choose another --out")
    if not replace:
        raise ExportError(f"{out} holds a bundle already: pass --force to replace it")


def build_bundle(checkpoint: Checkpoint, out: Path, options: ExportOptions) -> dict:
    """Export, quantize, validate and write the bundle for `checkpoint` into `out`
    (`check_out`: ExportError if `out` holds anything but a bundle to replace; ExportError
    too, before any work, if its source.spm cannot be converted exactly)."""
    check_out(out, options.replace)
    refusals = problems(checkpoint.directory / "source.spm")
    if refusals:
        raise ExportError(
            f"{checkpoint.directory}: source.spm cannot be converted exactly: {'; '.join(refusals)}"
        )

    model = load_model(checkpoint.directory)
    check_supported(model.config, model.generation_config, checkpoint.directory)
    staging = out.with_name(out.name + ".partial")
    try:
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
    except OSError as error:  # a file in the way, a read-only or missing file system
        raise ExportError(
            f"{staging}: cannot make the bundle's directory here ({error.strerror or error})"
        ) from None
    export_encoder(model, staging / ENCODER)
    export_decoder(model, staging / DECODER)
    # before quantization, so that the int8 graphs inherit it
    decompose_softmax(staging / ENCODER, log_sum_exp=False)
    decompose_softmax(staging / DECODER, log_sum_exp=True)
    model_config, generation_config = model.config, model.generation_config
    del model  # quantization and validation load what they need: free its weights first
    gc.collect()
    quantize_decoder(staging / DECODER, staging / DECODER_INT8, options.quantize)
    encoders = {"fp32": ENCODER}
    if options.quantize.scheme == "row" and options.quantize.encoder:
        quantize_encoder(staging / ENCODER, staging / ENCODER_INT8, options.quantize)
        encoders["int8"] = ENCODER_INT8
    for name in (*encoders.values(), DECODER, DECODER_INT8):
        duplicates = duplicated_initializers(staging / name)
        if duplicates:
            raise ExportError(f"{name}: duplicated weights inside one file: {duplicates}")
        dependent = cpu_dependent_ops(staging / name)
        if dependent:
            raise ExportError(f"{name}: ops whose results depend on the CPU: {dependent}")
        store_weights_beside(staging / name)
    tokenizer_files = convert(checkpoint.directory, staging)
    for name in CARRIED_FILES:
        if (checkpoint.directory / name).is_file():
            shutil.copyfile(checkpoint.directory / name, staging / name)
    vocab = json.loads((staging / "vocab.json").read_text(encoding="utf-8"))
    config = _config(model_config, generation_config, vocab, options.target_lang_token)
    tokenizer_files["codec"] = save_codec(staging, tokenizer_files, config)
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "source": {"model": checkpoint.source, "revision": checkpoint.revision},
        "config": config,
        "graphs": {
            "layout": "encoder+cross-kv, decoder-step-with-kv-cache",
            "opset": OPSET,
            "encoder": encoders,
            "decoder": {"int8": DECODER_INT8, "fp32": DECODER},
            "softmax": "decomposed",
        },
        "tokenizer": tokenizer_files,
        "quantization": options.quantize.as_dict(),
        "versions": _versions(),
    }
    _write_manifest(staging, manifest)
    try:
        manifest["validation"] = (
            validate(staging, checkpoint.directory, options.validation)
            if options.validate
            else {"skipped": True}
        )
    except Exception as error:
        raise ExportError(f"validation failed, bundle left in {staging} for inspection: {error}") from error
    if not options.keep_fp32:
        graphs = manifest["graphs"]
        for role in ("encoder", "decoder") if "int8" in encoders else ("decoder",):
            graph = staging / graphs[role].pop("fp32")
            graph.unlink()
            graph.with_name(graph.name + EXTERNAL_DATA).unlink()
    _write_manifest(staging, manifest)
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)
    return manifest


def export(source: str, out: Path, options: ExportOptions) -> dict:
    """Resolve `source` (directory or hub id) and build its bundle in `out` (checked first,
    before any download)."""
    check_out(out, options.replace)
    return build_bundle(resolve(source, options.revision), out, options)


def size_report(directory: Path, manifest: dict) -> str:
    """A human-readable table of the bundle's files and the validation summary."""
    lines = [f"bundle {directory}"]
    for name, info in manifest["files"].items():
        lines.append(f"  {name:<24} {info['bytes'] / 1e6:9.2f} MB")
    total = sum(info["bytes"] for info in manifest["files"].values())
    lines.append(f"  {'total':<24} {total / 1e6:9.2f} MB")
    validation = manifest.get("validation")
    if validation and validation.get("skipped"):
        later = (
            "run `transqueue validate`"
            if "fp32" in decoder_precisions(manifest["graphs"])
            else "with --int8-only it cannot be validated later (validation needs the fp32 "
            "graphs): export again without one of them"
        )
        lines.append(f"validation: SKIPPED (--skip-validation); {later}")
    elif validation:
        fp32 = validation["fp32"]
        lines.append(
            f"validation: fp32 greedy identical to PyTorch on {fp32['greedy_identical']}/"
            f"{fp32['sentences']} sentences, max |Δlogit| {fp32['max_abs_diff']:.2e}, "
            f"min cosine {fp32['min_cosine']:.6f}"
        )
        tok = validation["tokenizer"]
        lines.append(
            f"tokenizer: ids equal to MarianTokenizer on {tok['source_strings']} strings, "
            f"detokenization equal on {tok['decoded_sequences']} sequences"
        )
        if "int8" in validation:
            int8 = validation["int8"]
            lines.append(
                f"int8 vs fp32: exact match {int8['exact_match']:.1%}, token agreement "
                f"{int8['token_agreement']:.1%}"
            )
    return "\n".join(lines)
