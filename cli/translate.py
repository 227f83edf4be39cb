"""`transqueue translate`: translate documents in this process, without Redis."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import click
from click.core import ParameterSource
from tqdm import tqdm

from cli.common import (
    BUNDLE_VARIABLE,
    BundleDirectory,
    VariableOption,
    open_report,
    os_failure,
    protect_option,
    record_options,
    stop_cleanly_on_termination,
    stopped_with_summary,
)
from models.defaults import PRECISION, PRECISIONS
from models.protocol import SentenceTranslator
from producer.defaults import FORMAT_BY_SUFFIX
from producer.documents import DocumentError, ReadOptions
from producer.files import FileTask, plan_files
from producer.inputs import STDIN
from producer.pipeline import (
    RunOptions,
    RunReport,
    read_tasks,
    stdin_units,
    translate_files,
    translate_stream,
)
from producer.quality import FlagLog
from store.defaults import MAX_THREADS

GET_A_MODEL = (
    "no model given and the bundled demo model is absent ({path}). Export one with\n"
    "  transqueue export Helsinki-NLP/opus-mt-en-zh --out DIR\n"
    "and pass it with --model DIR."
)


def load_translator(
    model: Path | None, precision: str, threads: int | None, one_at_a_time: bool = False
) -> SentenceTranslator:
    """A Translator for ``model`` (default: the demo bundle); a clean CLI error otherwise.

    `one_at_a_time` (stdin: each line's few sentences translated before the next is read):
    the cores go to the ONNX Runtime ops of one batch, not to batches side by side, of
    which there would be only one, and the decoder's threads spin between its steps.
    """
    from models.bundle import BundleError, default_bundle_dir

    if model is None and not default_bundle_dir().exists():
        raise click.ClickException(GET_A_MODEL.format(path=default_bundle_dir()))
    from models.threads import cpu_budget
    from models.translator import SessionOptions, Translator

    try:
        if one_at_a_time:
            session = SessionOptions(intra_op_threads=threads or cpu_budget(), allow_spinning=True)
            return Translator(model, precision=precision, threads=1, session=session)
        return Translator(model, precision=precision, threads=threads)
    except (BundleError, OSError, ValueError) as error:
        raise click.ClickException(f"cannot load the model: {_named_by_variable(model)}{error}") from None


def _named_by_variable(model: Path | None) -> str:
    """``TRANSQUEUE_BUNDLE='DIR': `` when the running command took `model` from the
    variable, so that an error says where the directory came from; else nothing."""
    ctx = click.get_current_context(silent=True)
    if model is None or ctx is None or ctx.get_parameter_source("model") is not ParameterSource.ENVIRONMENT:
        return ""
    return f"{BUNDLE_VARIABLE}={str(model)!r}: "


@click.command("translate")
# readable=False: a file that cannot be read fails alone, reported by the pipeline, while the
# others are translated; click's own check would stop the whole run with a usage error.
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path, readable=False))
@click.option(
    "-o",
    "--out",
    type=click.Path(),
    help="Output directory (or output file, for a single input file; end it with / for a "
    "directory). Default: NAME.zh.EXT next to each file, DIR.zh for a directory.",
)
@click.option(
    "--model",
    type=BundleDirectory(),
    cls=VariableOption,
    envvar=BUNDLE_VARIABLE,
    help="Model bundle directory [TRANSQUEUE_BUNDLE, as the workers; default: the bundled demo model].",
)
@click.option(
    "--precision",
    type=click.Choice(PRECISIONS),
    default=PRECISION,
    show_default=True,
    cls=VariableOption,
    envvar="TRANSQUEUE_PRECISION",
    show_envvar=True,
    help="Decoder precision.",
)
@record_options
@click.option("--reflow", is_flag=True, help=".txt: blank-line-separated hard-wrapped paragraphs.")
@protect_option
@click.option("--force", is_flag=True, help="Overwrite outputs that already exist.")
@click.option(
    "--threads",
    type=click.IntRange(1, MAX_THREADS),
    cls=VariableOption,
    envvar="TRANSQUEUE_THREADS",
    show_envvar=True,
    help="Cores to use (default: the CPU budget): batches decoded side by side; for - (stdin), "
    "ONNX Runtime threads on one line at a time.",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write one JSON line per flagged sentence (quality flags) to this file; the records of "
    "the outputs there that this run does not write are kept from its earlier run.",
)
def translate_command(
    inputs: tuple[Path, ...],
    out: str | None,
    model: Path | None,
    precision: str,
    fields: tuple[str, ...],
    columns: tuple[str, ...],
    reflow: bool,
    protect: tuple[str, ...],
    force: bool,
    threads: int | None,
    report_path: Path | None,
) -> None:
    """Translate INPUT... (files, directories, or '-' for stdin) English→Chinese.

    Files keep their structure: .txt line by line (or --reflow paragraphs), .md with code,
    links and markup kept, .jsonl with only the --field values translated, .csv/.tsv/.parquet with
    only the --column cells translated; any but .parquet may be compressed (.gz, .zst), and
    the output is compressed the same way. Files are streamed in bounded memory. With '-', each
    stdin line (a JSONL record if --field is given) is translated and printed as soon as
    it is ready, in order.
    """
    read = ReadOptions(fields=fields, reflow=reflow, columns=columns, protect=protect)
    if Path("-") in inputs:
        stop_cleanly_on_termination()
        if len(inputs) > 1 or out is not None or report_path is not None:
            raise click.UsageError("'-' reads stdin alone and writes to stdout (no --report)")
        if columns:
            raise click.UsageError("--column reads .csv/.tsv files, not stdin")
        _translate_stdin(load_translator(model, precision, threads, one_at_a_time=True), read)
        return
    if out == "-":  # not a file named "-": files are written atomically, never to stdout
        raise click.UsageError(
            "-o -: files are written to files; stdout takes stdin's lines ('-' as the input)"
        )
    report = RunReport()
    with stopped_with_summary(report.summary):  # a stop from the start says what was done
        stop_cleanly_on_termination()
        try:
            tasks = plan_files(
                inputs, Path(out) if out else None, out_is_dir=bool(out) and out.endswith(("/", os.sep))
            )
        except DocumentError as error:
            raise click.ClickException(str(error)) from None
        _warn_of_empty_trees(inputs, tasks)

        def unwritten_outputs() -> set[str]:  # their files' earlier records are kept
            written = set(report.written)
            return {
                os.path.realpath(task.source)
                for task in tasks
                if task.target not in written and os.path.lexists(task.target)
            }

        kept = [path for task in tasks for path in (task.source, task.target)]
        trees = [given for given in inputs if given.is_dir()]
        with open_report(
            report_path, kept, carried=unwritten_outputs, trees=trees, outputs=[task.target for task in tasks]
        ) as flagged:
            report.quality = FlagLog(flagged)
            _translate_files(
                tasks,
                RunOptions(read=read, force=force),
                report,
                lambda: load_translator(model, precision, threads),
            )
    click.echo(report.summary(), err=True)
    if report.errors:
        sys.exit(1)


def _warn_of_empty_trees(inputs: Sequence[Path], tasks: Sequence[FileTask]) -> None:
    """Say on stderr which of the directories in ``inputs`` hold no file to translate (a
    wrong directory, or files of other suffixes), which the summary's "0 written" alone
    does not tell from a run that found everything done."""
    sources = [os.path.abspath(task.source) for task in tasks]
    for given in inputs:
        if given.is_dir():
            tree = os.path.join(os.path.abspath(given), "")
            if not any(source.startswith(tree) for source in sources):
                suffixes = ", ".join(sorted(FORMAT_BY_SUFFIX))
                click.echo(
                    f"warning: {given}: no file to translate in it (suffixes read: {suffixes})", err=True
                )


def _translate_files(
    tasks: list[FileTask],
    options: RunOptions,
    report: RunReport,
    translator: Callable[[], SentenceTranslator],
) -> None:
    documents = read_tasks(tasks, options, report)
    for error in report.errors:
        click.echo(f"error: {error}", err=True)
    shown = len(report.errors)
    if documents:
        model = translator()
        with tqdm(unit="sent", disable=not sys.stderr.isatty(), dynamic_ncols=True) as bar:
            translate_files(documents, model, report, progress=bar.update, overwrite=options.force)
    for error in report.errors[shown:]:  # streamed files found invalid part way
        click.echo(f"error: {error}", err=True)
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)


def _translate_stdin(translator: SentenceTranslator, read: ReadOptions) -> None:
    fmt = "jsonl" if read.fields else "txt"
    try:
        for text in translate_stream(_stdin_units(read), fmt, translator, read):
            sys.stdout.buffer.write(text.encode("utf-8"))
            sys.stdout.buffer.flush()
    except DocumentError as error:
        raise click.ClickException(str(error)) from None


def _stdin_units(read: ReadOptions) -> Iterator[tuple[int, str]]:
    """stdin's units; a failed read (EIO, say) is a one-line error naming ``<stdin>``, as
    submit reports it, after the translations of the units read before it."""
    try:
        yield from stdin_units(sys.stdin.buffer, read)
    except OSError as error:
        raise click.ClickException(os_failure(error, STDIN)) from None


COMMANDS = (translate_command,)
