"""`transqueue submit/status/wait/fetch/jobs/cancel`: distributed jobs from the command line."""

from __future__ import annotations

import os
import sys
import time
from collections import Counter, deque
from pathlib import Path

import click
from tqdm import tqdm

from cli.common import (
    cli_store,
    duration,
    echo_printable,
    job_info,
    model_key_of,
    open_report,
    os_failure,
    protect_option,
    record_options,
    stop_cleanly_on_termination,
    stopped_with_summary,
)
from producer.documents import DocumentError, ReadOptions
from producer.files import OutputAppeared, contained, plan_files
from producer.jobs import (
    STDIN,
    JobBuilder,
    JobGone,
    OriginalMissing,
    add_files,
    check_targets,
    iter_documents,
    stdin_sources,
    write_document,
)
from producer.pipeline import stdin_units
from producer.quality import FlagLog, place_text
from store import defaults
from store.errors import is_text, printable
from store.jobstore import CANCELLED, PARTIAL, CorruptRecord, DeadLetter, DocumentRecord, JobStore

STDIN_ORIGIN = "stdin"
#: Dead letters shown per distinct reason by `transqueue status`.
SHOWN_PER_REASON = 3
NO_WORKER = (
    "no worker has taken a chunk of job {job} for {s:.0f} s. Are workers running and consuming "
    "queue '{queue}'? Check with `celery -A worker inspect active_queues`, or in Flower."
)
NO_MODEL = (
    "job {job} is waiting for a worker serving model {model} (queue '{queue}'): none is running. "
    "Start one with TRANSQUEUE_BUNDLE set to that model's bundle (and its precision)."
)


@click.command("submit")
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory the translations are fetched to (required for files).",
)
@record_options
@click.option("--reflow", is_flag=True, help=".txt: paragraphs are hard-wrapped lines.")
@protect_option
@click.option(
    "--model",
    help="The model the job asks for: a bundle directory, or a model key (12 hex digits, as "
    "`transqueue status` shows). Default: TRANSQUEUE_BUNDLE at TRANSQUEUE_PRECISION, as the workers.",
)
@click.option(
    "--strict", is_flag=True, help="Submit nothing if any file cannot be read (default: submit the others)."
)
def submit_command(
    paths: tuple[str, ...],
    out: Path | None,
    fields: tuple[str, ...],
    columns: tuple[str, ...],
    reflow: bool,
    protect: tuple[str, ...],
    model: str | None,
    strict: bool,
) -> None:
    """Queue PATH... (files, directories, or '-' for stdin) for the workers; print the job id.

    Inputs are read as `transqueue translate` reads them (stdin: one unit per line, a JSONL
    record when --field is given). Equal sentences are sent once, and sentences translated
    before (by any job with the same model) come from the translation memory. A file that
    cannot be read or parsed is reported and the others are submitted (exit status 1);
    with --strict, nothing is submitted then.
    """
    options = ReadOptions(fields=fields, reflow=reflow, columns=columns, protect=protect)
    for name in (*fields, *columns):
        if not is_text(name):  # a job stores them as text
            raise click.UsageError(
                f"--field/--column '{printable(name)}' is not UTF-8, which a job cannot store"
            )
    if "-" in paths:
        if len(paths) > 1 or out is not None:
            raise click.UsageError("'-' reads stdin alone; fetch writes it to stdout")
        if columns:
            raise click.UsageError("--column reads .csv/.tsv files, not stdin")
    elif out is None:
        raise click.UsageError("--out DIR is required when submitting files")
    else:
        out = out.resolve()
        if not is_text(str(out)):  # the job stores it as text
            raise click.ClickException(
                f"{printable(str(out))}: the output directory's name is not UTF-8, which a job cannot store"
            )
    store = cli_store()
    job = JobBuilder(store, options, model_key_of(model, store.settings))
    errors: list[str] = []
    warnings: list[str] = []
    try:
        if "-" in paths:
            for source in stdin_sources(stdin_units(sys.stdin.buffer, options), fields):
                job.add(source)
            origin, out_dir = STDIN_ORIGIN, ""
        else:
            out.mkdir(parents=True, exist_ok=True)
            warnings = add_files(job, plan_files([Path(p) for p in paths], out), out, errors)
            origin, out_dir = "files", str(out)
    except OSError as exc:  # the output directory, a directory of inputs, or stdin
        job.discard()
        raise click.ClickException(os_failure(exc, STDIN if "-" in paths else None)) from None
    except DocumentError as exc:
        job.discard()
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        job.discard()  # what was stored so far would otherwise wait for its expiry
        raise
    for error in errors:
        click.echo(f"error: {error}", err=True)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    if errors and (strict or not job.documents):
        job.discard()
        raise click.ClickException(
            f"nothing submitted: {len(errors)} of {len(errors) + job.documents} files failed"
            + (" (--strict)" if strict else "")
        )
    click.echo(job.submit(out=out_dir, origin=origin))
    if errors:
        click.echo(
            f"submitted {job.documents} of {len(errors) + job.documents} files; {len(errors)} failed",
            err=True,
        )
        sys.exit(1)


@click.command("status")
@click.argument("job_id")
def status_command(job_id: str) -> None:
    """Show a job's progress, rate, ETA, cache hits, dead letters and errors."""
    store = cli_store(watching=True)
    info, now = job_info(store, job_id), time.time()
    rate = info.rate(now)
    share = f"{100 * info.settled / info.total:.1f}%" if info.total else "100%"
    lines = [
        f"job          {info.job_id} ({info.origin})",
        f"state        {info.state}",
        f"documents    {info.documents}",
        f"sentences    {info.done}/{info.total} distinct translated, {share} settled "
        f"({info.segments} segments)",
        f"cache hits   {info.hits}",
        f"rate         {f'{rate:.1f} sentences/s' if rate else 'not started'}",
        f"ETA          {'none (cancelled)' if info.state == CANCELLED else duration(info.eta(now))}",
        f"dead letters {info.dead}",
        *_dead_letter_lines(store, job_id),
    ]
    if info.model:
        serving = store.serving(info.queue)
        lines.append(f"model        {info.model} ({serving} worker{'' if serving == 1 else 's'} serving it)")
    if info.out:
        lines.append(f"output       {info.out}")
    lines.append(_flags_line(store, job_id))
    for line in lines:  # the origin, state, output and reasons as stored
        echo_printable(line)
    errors = store.errors(job_id)
    click.echo(f"errors       {len(errors)}")
    for (text, where), count in Counter((str(e["error"]), f"{e['worker']}") for e in errors).most_common():
        echo_printable(f"  {count} × on {where}: {text}")


def _dead_letter_lines(store: JobStore, job_id: str) -> list[str]:
    """The job's dead letters as `status` lists them under its ``dead letters`` line: each
    distinct reason once, with its count and a few examples."""
    by_reason: dict[str, list[DeadLetter]] = {}
    for letter in sorted(store.dead_letters(job_id).values(), key=lambda d: d.slot):
        by_reason.setdefault(letter.reason, []).append(letter)
    lines = []
    for reason, letters in by_reason.items():
        lines.append(f"  {len(letters)} sentences: {reason}")
        lines.extend(
            f"    sentence {letter.slot} (chunk {letter.chunk}, delivery {letter.deliveries}): "
            f"{letter.text!r}"
            for letter in letters[:SHOWN_PER_REASON]
        )
        if len(letters) > SHOWN_PER_REASON:
            lines.append(f"    … and {len(letters) - SHOWN_PER_REASON} more")
    return lines


def _flags_line(store: JobStore, job_id: str) -> str:
    """The quality flags of the job's finished documents, as `fetch --report` counts them,
    and in how many of them they are: ``flags  2 digits (in 1 of 3 finished documents)``."""
    flags, finished, flagged = FlagLog(), 0, 0
    try:
        for document in iter_documents(store, job_id, follow=False, poll_interval=0, flags=flags):
            if document.pieces is not None:
                deque(document.pieces, maxlen=0)  # render it, a window at a time, for its flags
                before = flags.counts.total()
                flags.keep()
                flagged += flags.counts.total() > before
                finished += 1
    except (JobGone, DocumentError) as exc:
        return f"flags        unknown: {exc}"
    return f"flags        {flags.summary() or 'none'} (in {flagged} of {finished} finished documents)"


@click.command("wait")
@click.argument("job_id")
@click.option("--quiet", "-q", is_flag=True, help="No progress output; the exit status tells.")
def wait_command(job_id: str, quiet: bool) -> None:
    """Wait until the job finishes (exit 1 if it has dead letters or is cancelled).

    On a terminal a progress bar shows; otherwise one plain line every 10 s. Rides out a
    Redis restart, and says when no worker has taken a chunk for a while.
    """
    store = cli_store(watching=True)
    info = job_info(store, job_id)
    mark, since, hinted = (info.settled, store.deliveries(job_id)), time.monotonic(), False
    plain, said_at = not quiet and not sys.stderr.isatty(), 0.0
    if not info.finished and info.state != CANCELLED and info.queue and not store.serving(info.queue):
        echo_printable(NO_MODEL.format(job=job_id, model=info.model, queue=info.queue), err=True)
    with tqdm(
        total=info.total, initial=info.settled, unit="sentence", desc=job_id, disable=quiet or plain
    ) as bar:
        while not info.finished and info.state != CANCELLED:
            if plain and time.monotonic() - said_at >= defaults.PLAIN_PROGRESS_EVERY:
                click.echo(f"{job_id}: {info.settled}/{info.total} sentences settled", err=True)
                said_at = time.monotonic()
            time.sleep(store.settings.poll_interval)
            info = job_info(store, job_id)
            bar.set_postfix(hits=info.hits, dead=info.dead, refresh=False)
            bar.update(info.settled - bar.n)
            progress = (info.settled, store.deliveries(job_id))
            if progress != mark:
                mark, since = progress, time.monotonic()
            elif not hinted and time.monotonic() - since >= defaults.NO_WORKER_HINT_AFTER:
                hinted = True
                hint = NO_WORKER.format(
                    job=job_id, s=defaults.NO_WORKER_HINT_AFTER, queue=info.queue or store.settings.queue
                )
                echo_printable(hint, err=True)
    if plain:
        click.echo(f"{job_id}: {info.settled}/{info.total} sentences settled, {info.state}", err=True)
    if info.state == CANCELLED:
        raise click.ClickException(f"job {job_id} was cancelled")
    if info.state == PARTIAL:
        raise click.ClickException(
            f"job {job_id} finished with {info.dead} dead letters; see `transqueue status {job_id}`"
        )


@click.command("fetch")
@click.argument("job_id")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write here instead of the directory given at submit.",
)
@click.option("--follow", is_flag=True, help="Wait, writing documents in order as they finish.")
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write one JSON line per flagged sentence of the written documents to this file; the "
    "records of the outputs there that this fetch does not write are kept from its earlier run.",
)
@click.option(
    "--source",
    "sources",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A Parquet file the job was submitted from (repeatable); default: the path it was submitted "
    "from, if that file is unchanged.",
)
@click.option("--force", is_flag=True, help="Overwrite outputs that exist already (default: skip them).")
def fetch_command(
    job_id: str,
    out: Path | None,
    follow: bool,
    report_path: Path | None,
    sources: tuple[Path, ...],
    force: bool,
) -> None:
    """Write a job's finished documents (all of them with --follow).

    Each file is written atomically and only once all its sentences are settled; a
    document still being translated is skipped (fetch again, or use --follow). A stdin
    job's records go to stdout in input order, up to the first unfinished one. Sentences
    in dead letters stay in the source language; they are listed and the exit status is 1,
    as it is when documents are left unfinished (the job is still running, or cancelled).
    Nothing is written if any target is one of the job's inputs or would land outside
    the output directory; an output that exists already is skipped unless --force. A
    Parquet document is written from its original file, which must be unchanged (size and
    sha256 as at submit): a --source file, or else the file at the path it was submitted
    from; without one, it is reported and the others are written.
    """
    stop_cleanly_on_termination()
    store = cli_store(watching=True)
    info = job_info(store, job_id)
    stream = info.origin == STDIN_ORIGIN
    if stream and out is not None:
        raise click.UsageError("a stdin job's records go to stdout: --out does not apply")
    out_dir = out or Path(info.out)
    if not (stream or out or out_dir.is_absolute()):  # submit and the inbox store it absolute: tampered
        raise click.ClickException(
            f"job {job_id}: its stored output directory {info.out!r:.80} is not an absolute path; "
            "pass --out DIR"
        )
    where, unit = ("stdout", "records") if stream else (str(out_dir), "documents")
    written, skipped, dead, missing, refused = 0, 0, [], [], []
    documents: list[DocumentRecord] = []  # a stdin job's records are written to stdout
    done: set[int] = set()  # the documents written by this fetch

    def written_line() -> str:  # the summary's start, also when the fetch stops part way
        return printable(f"{written} of {info.documents} {unit} written to {where}")  # where: as stored

    def unwritten_outputs() -> set[str]:  # their files' earlier records are kept
        return {
            os.path.realpath(d.name)
            for n, d in enumerate(documents)
            if n not in done and os.path.lexists(out_dir / d.target)
        }

    try:
        outputs: list[Path] = []  # where --report's directory may be made
        kept: list[Path] = []  # what --report may not name
        if not stream:
            documents = store.documents(job_id)
            check_targets(documents, out_dir)
            outputs = [out_dir / d.target for d in documents]
            kept = [*sources, *(Path(d.name) for d in documents), *outputs]
        with (
            stopped_with_summary(written_line),
            open_report(
                report_path, kept, "job", carried=unwritten_outputs, stdout_taken=stream, outputs=outputs
            ) as report,
        ):
            flags = FlagLog(report)
            for rendered in iter_documents(
                store, job_id, follow=follow, poll_interval=store.settings.poll_interval, flags=flags
            ):
                if rendered.pieces is None:
                    if stream:
                        break
                    continue
                if stream:
                    if rendered.record.fmt == "parquet":  # its pieces would be rows of cells
                        raise DocumentError(f"{rendered.name}: a stdin job holds no Parquet document")
                    for piece in rendered.pieces:
                        sys.stdout.buffer.write(piece.encode("utf-8"))
                    sys.stdout.buffer.flush()
                else:
                    record = rendered.record
                    target = contained(out_dir, record.target)
                    if not force and os.path.lexists(target):
                        skipped += 1
                        continue
                    try:
                        write_document(rendered, target, [*sources, Path(record.name)], overwrite=force)
                    except OriginalMissing as exc:
                        flags.drop()
                        missing.append(str(exc))
                        continue
                    except OutputAppeared as exc:
                        flags.drop()
                        refused.append(str(exc))
                        continue
                    except OSError as exc:  # the output directory refused it: the others go on
                        flags.drop()
                        refused.append(f"{target}: {exc.strerror or exc}")  # where, as translate
                        continue
                flags.keep()
                written += 1
                done.add(rendered.n)
                dead.extend((rendered.name, place, letter) for place, letter in rendered.dead)
    except (JobGone, DocumentError) as exc:
        if written:  # say what is on disk before why the rest is not (--follow, cancelled)
            click.echo(written_line(), err=True)
        raise click.ClickException(str(exc)) from None
    summary = written_line()
    if skipped:
        summary += f", {skipped} skipped (output exists; --force overwrites)"
    click.echo(summary + (f", flagged: {flags.summary()}" if flags.summary() else ""), err=True)
    state = job_info(store, job_id).state
    unfinished = info.documents - written - skipped - len(missing) - len(refused)
    if unfinished:
        later = "" if state == CANCELLED else " yet (fetch again, or use --follow)"
        echo_printable(f"job {job_id} is {state}: the other documents are not finished{later}", err=True)
    for name, place, letter in dead:
        where = name if stream else place_text(name, place)  # a stdin unit: its name says where
        echo_printable(f"{where}: left untranslated ({letter.reason}): {letter.text!r}", err=True)
    for error in missing:
        echo_printable(f"error: {error}; pass that file with --source FILE", err=True)
    for error in refused:
        echo_printable(f"error: {error}", err=True)
    if dead or unfinished or missing or refused:
        sys.exit(1)


@click.command("jobs")
def jobs_command() -> None:
    """List the known jobs, oldest first."""
    store = cli_store(watching=True)
    infos, corrupt = [], []
    for job_id in store.job_ids():
        try:
            infos.append(store.info(job_id))
        except CorruptRecord:
            corrupt.append(job_id)
    click.echo(
        f"{'JOB':12}  {'STATE':9}  {'SETTLED':>15}  {'DOCS':>5}  {'HITS':>6}  "
        f"{'DEAD':>5}  {'CREATED (UTC)':19}  ORIGIN"
    )
    for info in filter(None, infos):
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(info.created))
        echo_printable(
            f"{info.job_id:12}  {info.state:9}  {f'{info.settled}/{info.total}':>15}  "
            f"{info.documents:>5}  {info.hits:>6}  {info.dead:>5}  {created}  "
            f"{info.origin}"
        )
    if corrupt:
        click.echo(f"{len(corrupt)} job records are not readable: {', '.join(corrupt)}")
    orphans = store.orphan_count()
    if orphans:
        click.echo(
            f"{orphans} chunk messages were set aside (their job no longer exists, or the "
            "message was refused)"
        )


@click.command("cancel")
@click.argument("job_id")
def cancel_command(job_id: str) -> None:
    """Cancel a job: workers skip its remaining chunks; finished documents stay fetchable."""
    store = cli_store()
    info = job_info(store, job_id)
    if not store.cancel(job_id):
        raise click.ClickException(f"job {job_id} is already {info.state}")
    click.echo(f"cancelled {job_id}")


COMMANDS = (submit_command, status_command, wait_command, fetch_command, jobs_command, cancel_command)
