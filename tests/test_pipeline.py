"""The in-process pipeline: planning files, atomic writes, dedup, interruption, streaming."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from producer import defaults
from producer.documents import DocumentError, ReadOptions, parse_text
from producer.files import FileTask, plan_files, write_atomic
from producer.inputs import Limits, stdin_lines
from producer.pipeline import (
    RunOptions,
    RunReport,
    read_tasks,
    stdin_units,
    stream_units,
    translate_files,
    translate_stream,
)
from producer.quality import FlagLog
from tests.test_documents import read_whole


@dataclass(frozen=True)
class Result:
    text: str
    hit_length_cap: bool = False


class MarkingTranslator:
    """A deterministic stand-in for models.Translator: wraps each sentence in 【】."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.seen: list[str] = []
        self.fail_after = fail_after

    def translate(self, sentences: Iterable[str]) -> Iterator[Result]:
        for sentence in sentences:
            if self.fail_after is not None and len(self.seen) >= self.fail_after:
                raise KeyboardInterrupt
            self.seen.append(sentence)
            yield Result(f"【{sentence}】", hit_length_cap=len(sentence) > 40)


def expected(path: Path) -> str:
    document = read_whole(path)
    return document.render([f"【{segment.text}】" for segment in document.segments])


def run(tasks, translator, options: RunOptions | None = None) -> RunReport:
    report, options = RunReport(), options or RunOptions()
    documents = read_tasks(tasks, options, report)
    return translate_files(documents, translator, report, overwrite=options.force)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_bytes(b"Hello there. Hello there.\r\nHello there.\r\n")
    (root / "sub" / "b.md").write_text("# Title\n\nSome text. More text.\n\n```\ncode\n```\n")
    (root / "sub" / "c.jsonl").write_text('{"id": 1, "text": "Hello there."}\n')
    (root / "notes.pdf").write_bytes(b"%PDF")
    (root / "old.zh.txt").write_text("an earlier output\n")
    return root


def test_directory_is_mirrored_and_repeats_translated_once(tree: Path, tmp_path: Path):
    out = tmp_path / "out"
    tasks = plan_files([tree], out)
    assert [task.target.relative_to(out).as_posix() for task in tasks] == [
        "a.txt",
        "sub/b.md",
        "sub/c.jsonl",
    ]
    translator = MarkingTranslator()
    report = run(tasks, translator, RunOptions(read=ReadOptions(fields=("text",))))
    assert (out / "a.txt").read_bytes() == "【Hello there.】【Hello there.】\r\n【Hello there.】\r\n".encode()
    assert (out / "sub" / "b.md").read_bytes() == expected(tree / "sub" / "b.md").encode()
    assert json.loads((out / "sub" / "c.jsonl").read_text()) == {
        "id": 1,
        "text": "【Hello there.】",
    }
    assert translator.seen.count("Hello there.") == 1
    assert report.sentences == 7 and report.translated == 4 and not report.errors


def test_existing_outputs_are_skipped_unless_forced(tree: Path):
    tasks = plan_files([tree / "a.txt"])
    assert tasks == [FileTask(tree / "a.txt", tree / "a.zh.txt")]
    (tree / "a.zh.txt").write_text("keep me\n")
    report = run(tasks, MarkingTranslator())
    assert report.skipped == [tree / "a.zh.txt"] and not report.written
    assert (tree / "a.zh.txt").read_text() == "keep me\n"
    run(tasks, MarkingTranslator(), RunOptions(force=True))
    assert (tree / "a.zh.txt").read_bytes() == expected(tree / "a.txt").encode()


def test_plan_files_targets(tree: Path, tmp_path: Path):
    assert plan_files([tree / "a.txt"], tmp_path / "x.txt")[0].target == tmp_path / "x.txt"
    assert plan_files([tree / "a.txt"], tree / "sub")[0].target == tree / "sub" / "a.zh.txt"
    both = plan_files([tree / "a.txt", tree / "sub" / "b.md"], tmp_path / "o")
    assert [task.target for task in both] == [tmp_path / "o/a.zh.txt", tmp_path / "o/b.zh.md"]
    default = plan_files([tree / "sub"])
    assert default[0].target == tree / "sub.zh" / "b.md"


def test_an_input_is_never_overwritten(tree: Path):
    with pytest.raises(DocumentError, match="refusing to overwrite input"):
        plan_files([tree / "a.txt"], tree / "a.txt")
    with pytest.raises(DocumentError, match="no such file"):
        plan_files([tree / "missing.txt"])


def test_output_tree_inside_the_input_is_not_walked(tree: Path):
    out = tree / "translated"
    run(plan_files([tree], out), MarkingTranslator(), RunOptions(read=ReadOptions(("text",))))
    assert all(out not in task.source.parents for task in plan_files([tree], out))


def test_bad_document_is_reported_and_the_others_written(tree: Path, tmp_path: Path):
    (tree / "bad.jsonl").write_text('{"text": "fine"}\n{"text": 3}\n')
    out = tmp_path / "out"
    report = run(plan_files([tree], out), MarkingTranslator(), RunOptions(read=ReadOptions(("text",))))
    assert report.errors == [f"{tree / 'bad.jsonl'}:2:10: field 'text' holds int, not a string"]
    assert (out / "a.txt").exists() and not (out / "bad.jsonl").exists()


def test_interrupted_run_leaves_no_partial_file_and_can_be_rerun(tree: Path, tmp_path: Path):
    out = tmp_path / "out"
    options = RunOptions(read=ReadOptions(fields=("text",)))
    tasks = plan_files([tree], out)
    with pytest.raises(KeyboardInterrupt):
        run(tasks, MarkingTranslator(fail_after=2), options)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == ["a.txt"]
    interrupted = RunReport()
    documents = read_tasks(tasks, options, interrupted)
    with pytest.raises(KeyboardInterrupt):  # the summary counts the sentences translated
        translate_files(documents, MarkingTranslator(fail_after=2), interrupted)
    assert (interrupted.translated, interrupted.sentences) == (2, 2)  # 2 of b.md's 3 (a.txt is done)
    report = run(tasks, MarkingTranslator(), options)
    assert report.skipped == [out / "a.txt"]
    assert [p.relative_to(out).as_posix() for p in report.written] == ["sub/b.md", "sub/c.jsonl"]


def test_write_atomic_failure_keeps_the_old_file_and_no_temp(tmp_path: Path):
    target = tmp_path / "out.txt"
    write_atomic(target, "old\r\n")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(target, "new \ud800")
    assert target.read_bytes() == b"old\r\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_stream_units():
    lines = [b"One.\r\n", b"\n", b"Two\n", b"lines.\n", b"\n", b"\n", b"Tail"]
    assert list(stream_units(lines)) == [(n, line.decode()) for n, line in enumerate(lines, 1)]
    assert list(stream_units(lines, reflow=True)) == [
        (1, "One.\r\n\n"),
        (3, "Two\nlines.\n\n"),
        (6, "\n"),
        (7, "Tail"),
    ]
    with pytest.raises(DocumentError, match=r"<stdin>:2: not valid UTF-8"):
        list(stream_units([b"ok\n", b"\xff\n"]))


def test_stdin_jsonl_records_are_units_one_a_line_even_with_reflow():
    records = b'{"t": "Hello there."}\n{"t": "One.\\n\\nTwo."}\n{"t": "Bye."}\n'
    for reflow in (False, True):
        units = list(stdin_units(io.BytesIO(records), ReadOptions(fields=("t",), reflow=reflow)))
        assert [number for number, _ in units] == [1, 2, 3], reflow
    text = b"One\nparagraph.\n\nAnother.\n"
    assert list(stdin_units(io.BytesIO(text), ReadOptions(reflow=True))) == [
        (1, "One\nparagraph.\n\n"),
        (4, "Another.\n"),
    ]


def test_a_byte_order_mark_is_read_as_one_at_the_start_of_stdin_only():
    options = ReadOptions(fields=("t",))
    record = '\ufeff{"t": "Two here."}\n'
    assert [s.text for s in parse_text(record, "jsonl", options, first_line=1).segments] == ["Two here."]
    with pytest.raises(DocumentError, match=r"<input>:2:1: invalid JSON"):
        parse_text(record, "jsonl", options, first_line=2)  # as inside a file


def test_translate_stream_answers_each_unit_before_reading_the_next():
    consumed = []

    def units():
        for number, text in enumerate(["Hello.\n", "42\n", "Bye.\n"], start=1):
            consumed.append(number)
            yield number, text

    outputs = translate_stream(units(), "txt", MarkingTranslator(), ReadOptions())
    assert next(outputs) == "【Hello.】\n" and consumed == [1]
    assert list(outputs) == ["42\n", "【Bye.】\n"]


def test_translate_stream_jsonl_errors_name_the_stdin_line():
    units = [(1, '{"text": "Fine."}\n'), (2, "{oops}\n")]
    outputs = translate_stream(units, "jsonl", MarkingTranslator(), ReadOptions(("text",)))
    assert next(outputs) == '{"text": "【Fine.】"}\n'
    with pytest.raises(DocumentError, match=r"<stdin>:2:2: invalid JSON"):
        next(outputs)


def test_two_inputs_with_one_target_are_refused(tree: Path, tmp_path: Path):
    (tree / "sub" / "a.txt").write_text("Other text.\n")
    with pytest.raises(DocumentError, match="would both be written to"):
        plan_files([tree / "a.txt", tree / "sub" / "a.txt"], tmp_path / "out")


def test_current_directory_is_mirrored_next_to_itself(tree: Path, monkeypatch):
    monkeypatch.chdir(tree / "sub")
    tasks = plan_files([Path(".")])
    assert [task.target.resolve() for task in tasks] == [
        tree / "sub.zh" / "b.md",
        tree / "sub.zh" / "c.jsonl",
    ]


def test_unreadable_document_is_reported_and_the_others_written(tree: Path, tmp_path: Path):
    (tree / "dir.txt").mkdir()  # a directory with a document suffix cannot be read
    out = tmp_path / "out"
    tasks = [FileTask(tree / "dir.txt", out / "dir.txt"), FileTask(tree / "a.txt", out / "a.txt")]
    report = run(tasks, MarkingTranslator())
    assert report.errors == [f"{tree / 'dir.txt'}: not a regular file (a directory); not read"]
    assert report.written == [out / "a.txt"]


def test_every_bad_input_fails_alone_and_the_good_files_are_written(tree: Path, tmp_path: Path):
    os.mkfifo(tree / "pipe.txt")
    (tree / "zero.txt").symlink_to("/dev/zero")
    (tree / "loop.md").symlink_to("loop.md")
    (tree / "gone.txt").symlink_to("nowhere.txt")
    (tree / "long.md").write_text("Short line.\n" + "word " * 30_000 + "\n")
    (tree / "block.md").write_text("Fine line.\n" * 25_000)  # one paragraph
    (tree / "big.md").write_text("Fine line.\n\n" * 25_000)  # streamed: no limit on a file
    (tree / "big.txt").write_text("Fine line.\n" * 25_000)
    (tree / "deep.jsonl").write_text('{"text": "Fine."}\n' + "[" * 100_000 + "\n")
    out = tmp_path / "out"
    options = RunOptions(read=ReadOptions(("text",), limits=Limits(line_bytes=120_000, block_bytes=250_000)))
    report = run(plan_files([tree], out), MarkingTranslator(), options)
    assert sorted(report.errors) == [
        f"{tree / 'block.md'}:1: Markdown block longer than 250,000 bytes (TRANSQUEUE_MAX_BLOCK_BYTES)",
        f"{tree / 'deep.jsonl'}:2:257: invalid JSON: nested deeper than 256 arrays and objects",
        f"{tree / 'gone.txt'}: dangling symbolic link to nowhere.txt",
        f"{tree / 'long.md'}:2: line longer than 120,000 bytes (TRANSQUEUE_MAX_LINE_BYTES)",
        f"{tree / 'loop.md'}: symbolic link loop",
        f"{tree / 'pipe.txt'}: not a regular file (a FIFO); not read",
        f"{tree / 'zero.txt'}: not a regular file (a character device); not read",
    ]
    written = sorted(p.relative_to(out).as_posix() for p in report.written)
    assert written == ["a.txt", "big.md", "big.txt", "sub/b.md", "sub/c.jsonl"]


def test_stdin_line_limit():
    assert list(stream_units([b"12345678\n", b"1234567\r\n", b"12345678"], max_line_bytes=8)) == [
        (1, "12345678\n"),
        (2, "1234567\r\n"),
        (3, "12345678"),
    ]
    stream = io.BytesIO(b"Fine.\n" + b"x" * 5_000_000 + b"\nNever read.\n")
    units = stream_units(stdin_lines(stream, 8), max_line_bytes=8)
    assert next(units) == (1, "Fine.\n")
    with pytest.raises(
        DocumentError, match=r"^<stdin>:2: line longer than 8 bytes \(TRANSQUEUE_MAX_LINE_BYTES\)$"
    ):
        next(units)
    assert stream.tell() == 6 + 9  # the long line was not read whole
    paragraph = [b"Four.\n", b"Five.\n", b"\n", b"One.\n", b"Two.\n", b"More.\n"]
    units = stream_units(paragraph, reflow=True, max_line_bytes=15)
    assert next(units) == (1, "Four.\nFive.\n\n")
    with pytest.raises(DocumentError, match=r"^<stdin>:4: paragraph longer than 15 bytes"):
        next(units)


class OutputMaker(MarkingTranslator):
    """Makes ``target`` while it translates, as another program writing there would."""

    def __init__(self, target: Path) -> None:
        super().__init__()
        self.target = target

    def translate(self, sentences: Iterable[str]) -> Iterator[Result]:
        if not self.target.exists():
            self.target.write_text("theirs\n")
        yield from super().translate(sentences)


def test_an_output_made_by_something_else_during_the_run_is_left_alone(tree: Path, tmp_path: Path):
    out = tmp_path / "out"
    tasks = plan_files([tree / "a.txt", tree / "sub" / "b.md"], out)
    first = tasks[0].target
    report = run(tasks, OutputMaker(first))
    assert first.read_text() == "theirs\n"
    assert report.errors == [
        f"{first}: made by something else while this run translated it; left as it is (--force overwrites)"
    ]
    assert report.written == [tasks[1].target] and not list(out.glob(".*"))
    first.unlink()
    forced = run(tasks, OutputMaker(first), RunOptions(force=True))
    assert first.read_bytes() == expected(tree / "a.txt").encode() and not forced.errors


def test_a_document_failing_part_way_leaves_no_flag_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Flags are recorded only for documents written: a JSONL file found invalid after its
    first windows were translated (and flagged) leaves nothing in the report."""
    monkeypatch.setattr(defaults, "STREAM_WINDOW_BYTES", 100)
    long = "Sentence {} is long enough to hit the stand-in's cap."  # flagged length_cap
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text(json.dumps({"text": long.format("one")}) + "\n")
    bad.write_text("".join(json.dumps({"text": long.format(n)}) + "\n" for n in range(5)) + "{broken\n")
    out = io.StringIO()
    report = RunReport(quality=FlagLog(out))
    options = RunOptions(read=ReadOptions(fields=("text",)))
    tasks = [FileTask(bad, tmp_path / "bad.zh.jsonl"), FileTask(good, tmp_path / "good.zh.jsonl")]
    translator = MarkingTranslator()
    translate_files(read_tasks(tasks, options, report), translator, report)
    assert len(translator.seen) > 2  # bad.jsonl's first windows were translated
    assert report.errors and str(bad) in report.errors[0] and report.written == [tmp_path / "good.zh.jsonl"]
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [record["document"] for record in records] == [str(good)]
    assert report.quality.counts["length_cap"] == 1  # good.jsonl's alone
