"""`transqueue export` and `transqueue validate`: make and check model bundles.

Both need the optional export extra (torch, transformers, sentencepiece, onnx); the
modules that use them are imported only when a command runs.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from models.builder import defaults

if TYPE_CHECKING:
    from models.builder.validate import ValidateOptions

F = TypeVar("F", bound=Callable[..., None])

EXPORT_MODULES = ("torch", "transformers", "sentencepiece", "onnx", "huggingface_hub")


def _require_export_extra() -> None:
    missing = [name for name in EXPORT_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise click.ClickException(
            f"this command needs the export extra (missing: {', '.join(missing)}). "
            "Install it with: pip install 'transqueue[export]'"
        )


def _validate_options(
    fp32_max_diff: float, int8_min_exact: float, int8_min_agreement: float, parity_corpus: str | None
) -> ValidateOptions:
    from models.builder.validate import ValidateOptions

    corpus = None if parity_corpus == "none" else Path(parity_corpus or defaults.TATOEBA_CORPUS)
    return ValidateOptions(
        fp32_max_abs_diff=fp32_max_diff,
        int8_min_exact=int8_min_exact,
        int8_min_agreement=int8_min_agreement,
        parity_corpus=corpus,
    )


def _finite(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """A threshold as given; `nan`, which every comparison passes, and `inf`, which turns
    the check off, are refused."""
    if not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a threshold", ctx=ctx, param=param)
    return value


def _corpus(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """The corpus as given ('none', or unset for the default when present); a file named
    that is not there is refused, never skipped."""
    if value not in (None, "none") and not Path(value).is_file():
        what = "a directory, not a file" if Path(value).is_dir() else "no such file"
        raise click.BadParameter(f"{value}: {what} ('none' skips the corpus)", ctx=ctx, param=param)
    return value


def _op_types(value: str) -> tuple[str, ...]:
    """``--op-types`` as a tuple; a usage error for an empty list (which onnxruntime reads
    as every op type) or a name its dynamic quantization does not handle (skipped silently:
    an "int8" decoder left fp32)."""
    from onnxruntime.quantization.registry import IntegerOpsRegistry

    names = tuple(name.strip() for name in value.split(",") if name.strip())
    unknown = [name for name in names if name not in IntegerOpsRegistry]
    if not names or unknown:
        said = f"{', '.join(unknown)}: not among" if unknown else "name at least one of"
        raise click.BadParameter(
            f"{said} the op types onnxruntime's dynamic quantization handles "
            f"({', '.join(sorted(IntegerOpsRegistry))})",
            param_hint="'--op-types'",
        )
    return names


def validation_flags(function: F) -> F:
    """Attach the validation threshold options shared by export and validate."""
    for option in reversed(
        [
            click.option(
                "--fp32-max-diff",
                type=click.FloatRange(min=0),
                callback=_finite,
                default=defaults.FP32_MAX_DIFF,
                show_default=True,
                help="Fail if an fp32 logit differs from PyTorch by more.",
            ),
            click.option(
                "--int8-min-exact",
                type=click.FloatRange(0, 1),
                callback=_finite,
                default=defaults.INT8_MIN_EXACT,
                show_default=True,
                help="Fail if fewer int8 outputs equal fp32 ones (0..1).",
            ),
            click.option(
                "--int8-min-agreement",
                type=click.FloatRange(0, 1),
                callback=_finite,
                default=defaults.INT8_MIN_AGREEMENT,
                show_default=True,
                help="Fail if int8/fp32 token agreement is lower (0..1).",
            ),
            click.option(
                "--parity-corpus",
                default=None,
                callback=_corpus,
                help="Tab-separated corpus whose first column is used for tokenizer "
                "parity; 'none' to skip. Default: ../shared/data/en-zh/cmn_hans.txt "
                "when present.",
            ),
        ]
    ):
        function = option(function)
    return function


@click.command("export")
@click.argument("source")
@click.option(
    "--out",
    "-o",
    type=click.Path(path_type=Path),
    required=True,
    help="Bundle directory to create: new or empty, or a bundle to replace with --force.",
)
@click.option("--force", is_flag=True, help="Replace the bundle already in --out.")
@click.option("--revision", default=None, help="Hub revision (branch, tag or commit).")
@click.option(
    "--target-lang-token",
    default=defaults.TARGET_LANG_TOKEN,
    show_default=True,
    help="Token put before every source sentence, if the vocabulary has it.",
)
@click.option("--no-target-lang-token", is_flag=True, help="Put no language token first.")
@click.option("--int8-only", is_flag=True, help="Keep only the int8 decoder (deployment).")
@click.option(
    "--int8-scheme",
    type=click.Choice(["row", "tensor"]),
    default=defaults.INT8_SCHEME,
    show_default=True,
    help="row: one activation scale per row, exact int32 products, so the Translator may "
    "batch; tensor: onnxruntime dynamic quantization (one scale per tensor, no batching).",
)
@click.option(
    "--per-channel/--per-tensor",
    default=True,
    show_default=True,
    help="tensor scheme: int8 weight scales per output channel or per tensor.",
)
@click.option("--reduce-range", is_flag=True, help="tensor scheme: 7-bit weights (CPUs without VNNI).")
@click.option(
    "--op-types",
    default="MatMul",
    show_default=True,
    help="tensor scheme: comma-separated op types that onnxruntime quantizes.",
)
@click.option(
    "--quantize-embeddings/--no-quantize-embeddings",
    default=True,
    show_default=True,
    help="tensor scheme: store the tied embedding/lm_head once as int8 in the int8 decoder.",
)
@click.option(
    "--int8-encoder/--fp32-encoder",
    default=True,
    show_default=True,
    help="row scheme: give int8 decoding an int8 encoder too (a quarter of the encoder's "
    "memory); --fp32-encoder keeps one fp32 encoder for both precisions.",
)
@click.option(
    "--skip-validation",
    is_flag=True,
    help="Do not compare with PyTorch (recorded in bundle.json); for quick trials.",
)
@validation_flags
def export_command(
    source: str,
    out: Path,
    force: bool,
    revision: str | None,
    target_lang_token: str,
    no_target_lang_token: bool,
    int8_only: bool,
    int8_scheme: str,
    per_channel: bool,
    reduce_range: bool,
    op_types: str,
    quantize_embeddings: bool,
    int8_encoder: bool,
    skip_validation: bool,
    fp32_max_diff: float,
    int8_min_exact: float,
    int8_min_agreement: float,
    parity_corpus: str | None,
) -> None:
    """Export a MarianMT checkpoint (directory or hub id) to a validated ONNX bundle."""
    _require_export_extra()
    from models.builder.export import ExportError, ExportOptions, export, size_report
    from models.builder.hub import SourceError
    from models.builder.quantize import QuantizeOptions

    options = ExportOptions(
        revision=revision,
        target_lang_token=None if no_target_lang_token else target_lang_token,
        keep_fp32=not int8_only,
        validate=not skip_validation,
        replace=force,
        quantize=QuantizeOptions(
            scheme=int8_scheme,
            per_channel=per_channel,
            reduce_range=reduce_range,
            op_types=_op_types(op_types),
            quantize_embeddings=quantize_embeddings,
            encoder=int8_encoder,
        ),
        validation=_validate_options(fp32_max_diff, int8_min_exact, int8_min_agreement, parity_corpus),
    )
    try:
        manifest = export(source, out, options)
    except (SourceError, ExportError) as error:
        raise click.ClickException(str(error)) from error
    click.echo(size_report(out, manifest))


@click.command("validate")
@click.argument("bundle", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--reference", required=True, help="The checkpoint (directory or hub id).")
@click.option(
    "--revision",
    default=None,
    help="Hub revision of the reference (default: the one recorded in the bundle at export).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the full report as JSON.")
@validation_flags
def validate_command(
    bundle: Path,
    reference: str,
    revision: str | None,
    as_json: bool,
    fp32_max_diff: float,
    int8_min_exact: float,
    int8_min_agreement: float,
    parity_corpus: str | None,
) -> None:
    """Check a bundle against its PyTorch checkpoint: logits, greedy ids, int8, tokenizer."""
    _require_export_extra()
    from models.builder.export import size_report
    from models.builder.hub import SourceError, resolve
    from models.builder.validate import ValidationError, validate
    from models.bundle import BundleError, read_manifest

    options = _validate_options(fp32_max_diff, int8_min_exact, int8_min_agreement, parity_corpus)
    try:
        manifest = read_manifest(bundle)
        revision = revision or manifest.data.get("source", {}).get("revision")
        report = validate(bundle, resolve(reference, revision).directory, options)
    except (BundleError, SourceError, ValidationError) as error:
        raise click.ClickException(str(error)) from error
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(size_report(bundle, {**manifest.data, "validation": report}))
    click.echo("validation passed", err=as_json)  # --json: stdout holds the JSON alone


COMMANDS = (export_command, validate_command)
