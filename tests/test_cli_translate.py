"""`transqueue translate` end to end with a real (tiny, random) model bundle."""

from __future__ import annotations

import errno
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zstandard
from click.testing import CliRunner

from cli import main
from producer.documents import ReadOptions
from tests.test_documents import read_whole

TRANSQUEUE = Path(sys.executable).with_name("transqueue")

TEXT = "The cat sat on the mat. It was happy.\r\n\r\n42\r\nI like tea.\r\nGood night.\r\n"
MARKDOWN = """\
---
title: Kept as is
---
# A small guide

Tom went home. He was tired.

```sh
echo "Do not translate me."
```

- Buy some milk.
- Call [my mother](https://example.com/mom).

| Word | Count |
|------|------:|
| apple | 3 |
"""
RECORDS = [
    {"id": 1, "text": "I am hungry. Let us eat.", "lang": "en", "score": 0.5},
    {"id": 2, "meta": {"note": "no text here"}},
    {"id": 3, "text": "Where is the station?", "tags": ["a", "b"]},
]


@pytest.fixture(scope="module")
def translator(tiny_bundle):
    from models.translator import Translator

    return Translator(tiny_bundle)


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    root = tmp_path / "in"
    root.mkdir()
    (root / "story.txt").write_bytes(TEXT.encode())
    (root / "guide.md").write_text(MARKDOWN)
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    return root


def expected(path: Path, translator, options: ReadOptions) -> str:
    """What the library renders for `path` with the model's translations."""
    document = read_whole(path, options)
    results = translator.translate([segment.text for segment in document.segments])
    return document.render([result.text for result in results])


def test_translate_directory_keeps_structure(inputs, tmp_path, tiny_bundle, translator):
    out = tmp_path / "out"
    args = ["translate", str(inputs), "-o", str(out), "--model", str(tiny_bundle)]
    result = CliRunner().invoke(main, [*args, "--field", "text"])
    assert result.exit_code == 0, result.output
    assert "3 written, 0 skipped" in result.output
    options = ReadOptions(fields=("text",))
    for name in ("story.txt", "guide.md", "corpus.jsonl"):
        output = (out / name).read_bytes().decode()
        assert output == expected(inputs / name, translator, options)

    story = (out / "story.txt").read_bytes()
    assert story.count(b"\r\n") == TEXT.count("\r\n") and b"\r\n\r\n42\r\n" in story

    guide = (out / "guide.md").read_text()
    for kept in (
        "---\ntitle: Kept as is\n---\n",
        '```sh\necho "Do not translate me."\n```\n',
        "(https://example.com/mom)",
        "|------|------:|\n",
        "| 3 |\n",
    ):
        assert kept in guide
    assert guide.startswith("---") and "\n# " in guide and "\n- " in guide

    records = [json.loads(line) for line in (out / "corpus.jsonl").read_text().splitlines()]
    assert len(records) == len(RECORDS)
    for before, after in zip(RECORDS, records, strict=True):
        assert {k: v for k, v in after.items() if k != "text"} == {
            k: v for k, v in before.items() if k != "text"
        }
        assert ("text" in after) == ("text" in before)

    again = CliRunner().invoke(main, [*args, "--field", "text"])
    assert "0 written, 3 skipped" in again.output


def test_tables_and_compressed_files(inputs, tmp_path, tiny_bundle, translator):
    rows = 'id,text,note\r\n1,"The cat sat. It was ""happy"", she said.",keep me\r\n2,I like tea.,x\r\n'
    (inputs / "rows.csv.gz").write_bytes(gzip.compress(rows.encode(), mtime=0))
    (inputs / "rows.tsv.zst").write_bytes(
        zstandard.ZstdCompressor().compress(rows.replace(",", "\t").encode())
    )
    (inputs / "story.txt").rename(inputs / "story.txt.gz")
    (inputs / "story.txt.gz").write_bytes(gzip.compress(TEXT.encode()))
    out = tmp_path / "out"
    args = ["translate", str(inputs), "-o", str(out), "--model", str(tiny_bundle), "--field", "text"]
    result = CliRunner().invoke(main, [*args, "--column", "text"])
    assert result.exit_code == 0, result.output
    assert "5 written" in result.output
    options = ReadOptions(fields=("text",), columns=("text",))
    csv_out = gzip.decompress((out / "rows.csv.gz").read_bytes()).decode()
    assert csv_out == expected(inputs / "rows.csv.gz", translator, options)
    assert csv_out.startswith("id,text,note\r\n1,") and csv_out.count("\r\n") == 3
    assert ",keep me\r\n2," in csv_out
    tsv_out = zstandard.ZstdDecompressor().decompressobj().decompress((out / "rows.tsv.zst").read_bytes())
    assert tsv_out.decode() == expected(inputs / "rows.tsv.zst", translator, options)
    story = gzip.decompress((out / "story.txt.gz").read_bytes()).decode()
    assert story == expected(inputs / "story.txt.gz", translator, options)

    missing = CliRunner().invoke(main, [*args, "--column", "body", "--force"])
    assert missing.exit_code == 1
    assert "rows.csv.gz: no column 'body'; its 3 columns are 'id', 'text', 'note'" in missing.output


def test_every_sentence_translated_exactly_once_in_order(inputs, tiny_bundle, translator):
    document = read_whole(inputs / "guide.md")
    markers = [f"〔{i}〕" for i in range(len(document.segments))]
    rendered = document.render(markers)
    assert [rendered.index(m) for m in markers] == sorted(rendered.index(m) for m in markers)
    assert all(rendered.count(m) == 1 for m in markers)
    assert [s.text for s in document.segments][:3] == [
        "A small guide",
        "Tom went home.",
        "He was tired.",
    ]


def test_unknown_format_and_missing_field(inputs, tiny_bundle):
    (inputs / "slides.pptx").write_bytes(b"x")
    result = CliRunner().invoke(main, ["translate", str(inputs / "slides.pptx"), "--model", str(tiny_bundle)])
    assert result.exit_code == 1
    assert "unsupported format '.pptx'" in result.output and ".jsonl, .markdown, .md" in result.output
    result = CliRunner().invoke(
        main, ["translate", str(inputs / "corpus.jsonl"), "--model", str(tiny_bundle)]
    )
    assert result.exit_code == 1 and "needs at least one field (--field, or fields" in result.output


def test_out_ending_in_a_slash_is_a_directory_even_before_it_exists(tmp_path, tiny_bundle):
    source = tmp_path / "one.txt"
    source.write_text("Hello there.\n", encoding="utf-8")
    for out, written in (
        (f"{tmp_path}/new/", tmp_path / "new" / "one.zh.txt"),
        (f"{tmp_path}/file.txt", tmp_path / "file.txt"),
    ):
        result = CliRunner().invoke(main, ["translate", str(source), "-o", out, "--model", str(tiny_bundle)])
        assert result.exit_code == 0, result.output
        assert written.is_file()


def test_out_dash_is_refused_not_a_file_named_dash(tmp_path, tiny_bundle, monkeypatch):
    source = tmp_path / "one.txt"
    source.write_text("Hello there.\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["translate", str(source), "-o", "-", "--model", str(tiny_bundle)])
    assert result.exit_code == 2 and "-o -: " in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.txt"]


def test_an_empty_out_writes_next_to_the_input_as_no_out_does(tmp_path, tiny_bundle):
    source = tmp_path / "one.txt"
    source.write_text("Hello there.\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["translate", str(source), "-o", "", "--model", str(tiny_bundle)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "one.zh.txt").is_file()


@pytest.fixture(scope="module")
def precisions_apart(tiny_bundle, tmp_path_factory) -> Path:
    """A copy of the tiny bundle whose fp32 decoder favours 好 (the random model's int8 and
    fp32 decoders say the same on every input), so that the output shows the precision used."""
    import onnx

    bundle = tmp_path_factory.mktemp("precisions-apart") / "bundle"
    shutil.copytree(tiny_bundle, bundle)
    manifest = json.loads((bundle / "bundle.json").read_text())
    graph = onnx.load(bundle / manifest["graphs"]["decoder"]["fp32"], load_external_data=False)
    bias = next(tensor for tensor in graph.graph.initializer if tensor.name == "final_logits_bias")
    where = {entry.key: entry.value for entry in bias.external_data}
    data = bytearray((bundle / where["location"]).read_bytes())
    offset, length = int(where["offset"]), int(where["length"])
    values = np.frombuffer(data[offset : offset + length], dtype=np.float32).copy()
    values[json.loads((bundle / "vocab.json").read_text())["好"]] = 100.0  # above pad's 50, banned
    data[offset : offset + length] = values.tobytes()
    (bundle / where["location"]).write_bytes(data)
    manifest["files"][where["location"]] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (bundle / "bundle.json").write_text(json.dumps(manifest))
    return bundle


def test_precision_option_and_setting_choose_the_decoder(inputs, precisions_apart):
    from models.translator import Translator

    story = inputs / "story.txt"
    models = {precision: Translator(precisions_apart, precision=precision) for precision in ("int8", "fp32")}
    wanted = {precision: expected(story, model, ReadOptions()) for precision, model in models.items()}
    assert "好" in wanted["fp32"] and "好" not in wanted["int8"]
    cases = (
        (["--precision", "fp32"], {}, "fp32"),
        ([], {"TRANSQUEUE_PRECISION": "fp32"}, "fp32"),
        ([], {}, "int8"),
        (["--precision", "int8"], {"TRANSQUEUE_PRECISION": "fp32"}, "int8"),
    )
    for args, env, precision in cases:
        command = ["translate", str(story), "--model", str(precisions_apart), "--force", *args]
        result = CliRunner().invoke(main, command, env=env)
        assert result.exit_code == 0, result.output
        assert (inputs / "story.zh.txt").read_bytes().decode() == wanted[precision], (args, env)
    for args, env, precision in cases:  # stdin loads its Translator apart
        command = ["translate", "-", "--model", str(precisions_apart), *args]
        result = CliRunner().invoke(main, command, input="I like tea.\n", env=env)
        assert result.exit_code == 0, result.output
        assert result.stdout == models[precision].translate_one("I like tea.").text + "\n", (args, env)


def test_missing_default_model_says_how_to_get_one(inputs, monkeypatch, tmp_path):
    import models.bundle

    monkeypatch.setattr(models.bundle, "default_bundle_dir", lambda: tmp_path / "absent")
    result = CliRunner().invoke(main, ["translate", str(inputs / "story.txt")])
    assert result.exit_code == 1
    assert "transqueue export Helsinki-NLP/opus-mt-en-zh --out DIR" in result.output
    assert "--model DIR" in result.output


def test_cli_subprocess_file_and_stdin(inputs, tiny_bundle, translator):
    assert TRANSQUEUE.exists(), "run: .venv/bin/pip install -e . --no-deps"
    done = subprocess.run(
        [
            TRANSQUEUE,
            "translate",
            inputs / "story.txt",
            "--model",
            tiny_bundle,
            "--precision",
            "fp32",
            "--threads",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "1 written" in done.stderr and "sentences/s" in done.stderr
    assert (inputs / "story.zh.txt").read_bytes().count(b"\r\n") == TEXT.count("\r\n")

    lines = "Hello.\nI like tea.\n\n42\nGood night."
    streamed = subprocess.run(
        [TRANSQUEUE, "translate", "-", "--model", tiny_bundle],
        input=lines.encode(),
        capture_output=True,
        timeout=300,
    )
    assert streamed.returncode == 0, streamed.stderr
    out = streamed.stdout.decode().split("\n")
    assert len(out) == len(lines.split("\n")) and out[2] == "" and out[3] == "42"
    assert out[1] == translator.translate_one("I like tea.").text

    records = "".join(json.dumps(r) + "\n" for r in RECORDS)
    streamed = subprocess.run(
        [TRANSQUEUE, "translate", "-", "--model", tiny_bundle, "--field", "text"],
        input=records.encode(),
        capture_output=True,
        timeout=300,
    )
    assert streamed.returncode == 0, streamed.stderr
    assert [json.loads(line)["id"] for line in streamed.stdout.decode().splitlines()] == [1, 2, 3]


def test_the_model_comes_from_transqueue_bundle_as_for_workers(tmp_path):
    env = {"TRANSQUEUE_BUNDLE": "/no/such/bundle"}
    result = CliRunner().invoke(main, ["translate", "-"], input="Hello.\n", env=env)
    assert result.exit_code == 1 and "--model" not in result.output
    assert (
        result.output
        == "Error: TRANSQUEUE_BUNDLE='/no/such/bundle': Directory '/no/such/bundle' does not exist.\n"
    )
    passed = CliRunner().invoke(main, ["translate", "--model", str(tmp_path / "none"), "-"], env=env)
    assert passed.exit_code == 2 and "Invalid value for '--model'" in passed.output
    assert "TRANSQUEUE_BUNDLE" not in passed.output
    for variable_first in (True, False):  # a directory that is no bundle
        env = {"TRANSQUEUE_BUNDLE": str(tmp_path)} if variable_first else {}
        args = [] if variable_first else ["--model", str(tmp_path)]
        result = CliRunner().invoke(main, ["translate", *args, "-"], input="Hello.\n", env=env)
        assert result.exit_code == 1, result.output
        named = f"TRANSQUEUE_BUNDLE={str(tmp_path)!r}: " if variable_first else ""
        assert result.output.startswith(f"Error: cannot load the model: {named}{tmp_path}: not a transqueue")


def test_threads_and_precision_come_from_the_workers_variables(tiny_bundle, monkeypatch):
    import cli.translate

    asked = []
    real = cli.translate.load_translator
    monkeypatch.setattr(
        cli.translate, "load_translator", lambda *args, **kw: asked.append(args[1:3]) or real(*args, **kw)
    )
    env = {"TRANSQUEUE_THREADS": "1", "TRANSQUEUE_PRECISION": "fp32"}
    args = ["translate", "--model", str(tiny_bundle), "-"]
    result = CliRunner().invoke(main, args, input="Hello.\n", env=env)
    assert result.exit_code == 0, result.output
    assert asked == [("fp32", 1)]
    result = CliRunner().invoke(main, [*args[:-1], "--threads", "2", "-"], input="Hello.\n", env=env)
    assert result.exit_code == 0 and asked[-1] == ("fp32", 2)  # the option wins
    for variable, bad in (("TRANSQUEUE_THREADS", "0"), ("TRANSQUEUE_PRECISION", "int4")):
        result = CliRunner().invoke(main, args, input="Hello.\n", env={variable: bad})
        assert result.exit_code == 2 and f"for {variable} (environment variable of" in result.output


def test_bad_inputs_fail_alone_and_fast_in_a_real_process(inputs, tmp_path, tiny_bundle):
    os.mkfifo(inputs / "pipe.txt")
    (inputs / "zero.txt").symlink_to("/dev/zero")
    (inputs / "loop.md").symlink_to("loop.md")
    (inputs / "long.txt").write_text("Fine.\n" + "x" * 200 + "\n")
    env = {**os.environ, "TRANSQUEUE_MAX_LINE_BYTES": "100"}
    model = ["--model", tiny_bundle]
    done = subprocess.run(
        [TRANSQUEUE, "translate", inputs, "-o", tmp_path / "out", *model, "--field", "text"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 1, done.stderr
    assert sorted(done.stderr.splitlines()[:4]) == [  # long.txt is streamed: found bad when read
        f"error: {inputs / 'long.txt'}:2: line longer than 100 bytes (TRANSQUEUE_MAX_LINE_BYTES)",
        f"error: {inputs / 'loop.md'}: symbolic link loop",
        f"error: {inputs / 'pipe.txt'}: not a regular file (a FIFO); not read",
        f"error: {inputs / 'zero.txt'}: not a regular file (a character device); not read",
    ]
    assert "3 written, 0 skipped (output exists; --force overwrites), 4 failed" in done.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["corpus.jsonl", "guide.md", "story.txt"]

    direct = subprocess.run(
        [TRANSQUEUE, "translate", inputs / "pipe.txt", *model], capture_output=True, text=True, timeout=300
    )
    assert direct.returncode == 1
    assert f"error: {inputs / 'pipe.txt'}: not a regular file (a FIFO); not read" in direct.stderr

    streamed = subprocess.run(
        [TRANSQUEUE, "translate", "-", *model],
        input=b"Hello.\n" + b"x" * 5_000_000 + b"\nNever reached.\n",
        capture_output=True,
        timeout=300,
        env=env,
    )
    assert streamed.returncode == 1
    assert streamed.stdout.decode().count("\n") == 1  # the first line's translation
    assert (
        "Error: <stdin>:2: line longer than 100 bytes (TRANSQUEUE_MAX_LINE_BYTES)" in streamed.stderr.decode()
    )


class StdinFailingAfter(io.RawIOBase):
    """A stdin that gives `data`, then fails every read as a read of a broken device does (EIO)."""

    def __init__(self, data: bytes) -> None:
        self.left = data

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray) -> int:
        if not len(buffer):  # the test runner's probe of what the stream reads
            return 0
        if not self.left:
            raise OSError(errno.EIO, "Input/output error")
        size = min(len(buffer), len(self.left))
        buffer[:size], self.left = self.left[:size], self.left[size:]
        return size


def test_a_failed_read_of_stdin_is_one_line_naming_it_after_what_was_written(tiny_bundle, translator):
    model = ["--model", str(tiny_bundle)]
    result = CliRunner().invoke(main, ["translate", "-", *model], input=StdinFailingAfter(b"Hello.\n"))
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    [first] = [result.text for result in translator.translate(["Hello."])]
    assert result.stdout == first + "\n"  # the line read before the failure
    assert result.stderr == "Error: <stdin>: Input/output error\n"  # as submit - says it


class StdinInterruptedAfter(StdinFailingAfter):
    """A stdin that gives `data`, then is interrupted by Ctrl-C while the next line is awaited."""

    def readinto(self, buffer: bytearray) -> int:
        if len(buffer) and not self.left:
            raise KeyboardInterrupt
        return super().readinto(buffer)


def test_ctrl_c_stops_stdin_with_status_130_after_what_was_written(tiny_bundle, translator):
    model = ["--model", str(tiny_bundle)]
    result = CliRunner().invoke(main, ["translate", "-", *model], input=StdinInterruptedAfter(b"Hello.\n"))
    assert result.exit_code == 130, result.output  # as files and SIGTERM: a stop, not a failure (1)
    [first] = [result.text for result in translator.translate(["Hello."])]
    assert result.stdout == first + "\n"
    assert "Aborted" not in result.output


def test_report_lists_each_flagged_sentence_of_the_demo_model(tmp_path):
    """--report on the demo model, which loops and mangles digits: one record per flagged
    sentence, with its line, as the flags of the model's own results say; counts in the summary."""
    from models.translator import Translator
    from producer.quality import FLAGS, flags

    lines = [
        "Tom is 25 years old.",
        "",
        "Each output is written atomically (temporary file, then rename), and an input is never overwritten.",
        "I was born on May 13, 1990. Hi.",
    ]
    source = tmp_path / "notes.txt"
    source.write_text("\n".join(lines) + "\n")
    report = tmp_path / "flags.jsonl"
    args = ["translate", str(source), "-o", str(tmp_path / "out.txt"), "--report", str(report)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output

    sentences = [(1, lines[0]), (3, lines[2]), (4, "I was born on May 13, 1990."), (4, "Hi.")]
    results = Translator().translate([text for _, text in sentences])
    wanted = []
    for (line, text), translated in zip(sentences, results, strict=True):
        found = flags(text, translated.text, hit_length_cap=translated.hit_length_cap)
        if found:
            wanted.append(
                {
                    "document": str(source),
                    "path": os.path.realpath(source),
                    "line": line,
                    "source": text,
                    "output": translated.text,
                    "flags": found,
                }
            )
    records = [json.loads(line) for line in report.read_text().splitlines()]
    assert records == wanted and len(records) >= 2  # the demo model gets at least two wrong
    counts = {name: sum(name in r["flags"] for r in records) for name in FLAGS}
    shown = ", ".join(f"{n} {name}" for name, n in counts.items() if n)
    assert f"flagged: {shown}" in result.output


def test_report_refuses_stdin_and_an_unwritable_file(tmp_path, tiny_bundle):
    result = CliRunner().invoke(
        main, ["translate", "-", "--report", str(tmp_path / "r.jsonl")], input="Hi.\n"
    )
    assert result.exit_code == 2 and "no --report" in result.output
    (tmp_path / "a.txt").write_text("Hi.\n")
    args = [
        "translate",
        str(tmp_path / "a.txt"),
        "--model",
        str(tiny_bundle),
        "--report",
        str(tmp_path / "no" / "r.jsonl"),
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1 and "cannot write the report" in result.output
    assert not (tmp_path / "a.zh.txt").exists()


def test_a_report_may_go_into_the_output_directory_the_run_makes(tmp_path, tiny_bundle):
    (tmp_path / "a.txt").write_text("Hi.\n")
    (tmp_path / "corpus" / "sub").mkdir(parents=True)
    (tmp_path / "corpus" / "sub" / "b.txt").write_text("Hello world.\n")
    model = ["--model", str(tiny_bundle)]
    for given, out in ((tmp_path / "a.txt", "zh/"), (tmp_path / "corpus", "mirror")):
        report = tmp_path / out / "flags.jsonl"
        args = ["translate", str(given), "-o", f"{tmp_path}/{out}", "--report", str(report), *model]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0 and report.is_file(), result.output
    assert (tmp_path / "zh" / "a.zh.txt").is_file() and (tmp_path / "mirror" / "sub" / "b.txt").is_file()
    elsewhere = tmp_path / "elsewhere" / "flags.jsonl"  # a directory the run makes no output in
    args = ["translate", str(tmp_path / "a.txt"), "-o", f"{tmp_path}/new/", "--report", str(elsewhere)]
    result = CliRunner().invoke(main, [*args, *model])
    assert result.exit_code == 1 and "cannot write the report" in result.output
    assert not (tmp_path / "new").exists() and not elsewhere.parent.exists()


def test_a_report_never_names_an_input_or_an_output(tmp_path, tiny_bundle):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "c.txt").write_text("Hello world.\n")
    (corpus / "flags.jsonl").write_text('{"text": "Hello."}\n')  # a report left there before
    (tmp_path / "c.zh.txt").write_text("PRECIOUS\n")
    model = ["--model", str(tiny_bundle)]
    for args in (
        [str(corpus / "c.txt"), "--report", str(corpus / "c.txt")],
        [str(corpus / "c.txt"), "-o", str(tmp_path), "--report", str(tmp_path / "c.zh.txt")],
        [str(corpus), "--field", "text", "--report", str(corpus / "flags.jsonl")],
    ):
        result = CliRunner().invoke(main, ["translate", *args, *model])
        assert result.exit_code == 2 and "is one of the run's inputs or outputs" in result.output
    assert (corpus / "c.txt").read_text() == "Hello world.\n"
    assert (tmp_path / "c.zh.txt").read_text() == "PRECIOUS\n"
    # a new report inside an input directory would be read as an input by the rerun
    inside = CliRunner().invoke(
        main, ["translate", str(corpus), "--report", str(corpus / "sub" / "new.jsonl"), *model]
    )
    assert inside.exit_code == 2 and f"is inside the input directory {corpus}" in inside.output
    assert not (corpus / "sub").exists() and not (tmp_path / "corpus.zh").exists()


def test_a_file_named_that_cannot_be_read_fails_alone(tmp_path, tiny_bundle, monkeypatch):
    unread, fine = tmp_path / "unread.txt", tmp_path / "fine.txt"
    unread.write_text("Hello world.\n")
    fine.write_text("Good night.\n")
    unread.chmod(0)
    # as root no permission denies a read: deny it as it is denied to anyone else
    access, open_descriptor = os.access, os.open

    def denied_access(path, mode, *args, **kwargs):
        return os.fspath(path) != str(unread) and access(path, mode, *args, **kwargs)

    def denied_open(path, flags, *args, **kwargs):
        if os.fspath(path) == str(unread):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return open_descriptor(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "access", denied_access)
    monkeypatch.setattr(os, "open", denied_open)
    result = CliRunner().invoke(main, ["translate", str(unread), str(fine), "--model", str(tiny_bundle)])
    assert result.exit_code == 1, result.output  # not a usage error stopping the run
    assert f"error: {unread}: Permission denied" in result.output
    assert (tmp_path / "fine.zh.txt").exists() and not (tmp_path / "unread.zh.txt").exists()


def test_an_output_that_cannot_be_written_is_named_as_the_output(tmp_path, tiny_bundle):
    (tmp_path / "in").mkdir()
    for name in ("a.txt", "b.txt"):
        (tmp_path / "in" / name).write_text("Hello world.\n")
    (tmp_path / "taken").write_text("a file where the output directory would go\n")
    args = ["translate", str(tmp_path / "in"), "-o", str(tmp_path / "taken"), "--model", str(tiny_bundle)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert f"error: {tmp_path / 'taken' / 'a.txt'}:" in result.output
    assert f"error: {tmp_path / 'in' / 'a.txt'}" not in result.output


def stopped_while_writing(args: list[str], temporary: Path, number: int) -> subprocess.Popen:
    """`transqueue ARGS` stopped by signal `number` once it writes the temporary file
    `temporary` (a glob pattern), waited for; its stderr left to read."""
    import signal
    import time

    # A suite started in the background (`cmd &` in a script) has SIGINT ignored, which a
    # child would inherit; with a handler here, the child starts with the default, as a
    # terminal's foreground command does.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        run = subprocess.Popen(
            [TRANSQUEUE, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    deadline = time.monotonic() + 120
    while not list(temporary.parent.glob(temporary.name)):  # it has started writing
        assert run.poll() is None and time.monotonic() < deadline, run.stderr.read()
        time.sleep(0.05)
    run.send_signal(number)
    run.wait(timeout=120)
    return run


def test_sigterm_leaves_no_temporary_output_behind(tmp_path, tiny_bundle):
    import signal

    source = tmp_path / "big.txt"
    source.write_text("".join(f"Sentence number {n} is here.\n" for n in range(40000)))
    args = ["translate", str(source), "--model", str(tiny_bundle)]
    run = stopped_while_writing(args, tmp_path / ".big.zh.txt.*.tmp", signal.SIGTERM)
    assert run.returncode == 128 + signal.SIGTERM
    assert not list(tmp_path.glob(".*.tmp")) and not (tmp_path / "big.zh.txt").exists()


def test_stdin_gives_one_batch_at_a_time_every_core(tiny_bundle):
    """stdin translates each line before it reads the next: its Translator runs one batch
    at a time with all the ONNX Runtime threads (the decoder's spinning between steps),
    files batches side by side on one each."""
    from cli.translate import load_translator

    lines = load_translator(tiny_bundle, "int8", 2, one_at_a_time=True)
    files = load_translator(tiny_bundle, "int8", 2)
    assert (lines.workers, lines._decoder.get_session_options().intra_op_num_threads) == (1, 2)
    assert (files.workers, files._decoder.get_session_options().intra_op_num_threads) == (2, 1)
    spinning = "session.intra_op.allow_spinning"  # between the steps of the one batch
    assert lines._decoder.get_session_options().get_session_config_entry(spinning) == "1"
    assert files._decoder.get_session_options().get_session_config_entry(spinning) == "0"


def test_a_rerun_keeps_the_report_records_of_the_files_it_skips(tmp_path, monkeypatch):
    """The first run stopped after a.txt (its output is there, b.txt's is not): the rerun
    skips a.txt, and its report still holds a.txt's records beside b.txt's, matched by the
    file's resolved path, so a rerun may name the files otherwise (from another directory)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Tom is 25 years old.\n")  # the demo model gets both digits wrong
    (corpus / "b.txt").write_text("He has 31 cats.\n")
    monkeypatch.chdir(tmp_path)
    first = CliRunner().invoke(main, ["translate", "corpus", "--report", "flags.jsonl"])
    assert first.exit_code == 0, first.output
    records = [
        json.loads(line) for line in (tmp_path / "flags.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert [(r["document"], r["path"]) for r in records] == [
        (os.path.join("corpus", name), str(corpus.resolve() / name)) for name in ("a.txt", "b.txt")
    ]
    (tmp_path / "corpus.zh" / "b.txt").unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    again = CliRunner().invoke(main, ["translate", str(corpus), "--report", str(tmp_path / "flags.jsonl")])
    assert again.exit_code == 0 and "1 written, 1 skipped" in again.output, again.output
    now = [json.loads(line) for line in (tmp_path / "flags.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(now, key=lambda r: r["path"]) == [
        records[0],
        {**records[1], "document": str(corpus / "b.txt")},
    ]
    assert not list(tmp_path.glob(".*"))


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT"])
def test_an_interrupted_run_reports_the_files_it_wrote(tmp_path, stop):
    """Stopped part way (kill, or Ctrl-C), a run still writes its report and its summary,
    and exits 128 + the signal's number."""
    import signal

    number = getattr(signal, stop)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Tom is 25 years old.\n")
    (corpus / "big.txt").write_text("".join(f"Sentence number {n} is here.\n" for n in range(40000)))
    report = tmp_path / "flags.jsonl"
    args = ["translate", str(corpus), "--report", str(report)]
    run = stopped_while_writing(args, tmp_path / "corpus.zh" / ".big.txt.*.tmp", number)  # a.txt is written
    assert run.returncode == 128 + number
    summary = run.stderr.read().splitlines()[-1]
    assert summary.startswith("1 written") and summary.endswith(f"; stopped (exit status {128 + number})")
    (record,) = [json.loads(line) for line in report.read_text(encoding="utf-8").splitlines()]
    assert record["document"] == str(corpus / "a.txt") and record["flags"] == ["digits"]
    assert not list(tmp_path.glob(".*.tmp")) and not list((tmp_path / "corpus.zh").glob(".*"))


#: `transqueue ARGV[2:]`, sent SIGTERM by itself when it starts importing module ARGV[1]
STOPPED_WHILE_IMPORTING = """
import os, signal, sys

class StopWhenImported:
    def find_spec(self, name, path, target=None):
        if name == sys.argv[1]:
            os.kill(os.getpid(), signal.SIGTERM)

sys.meta_path.insert(0, StopWhenImported())
from cli import main
main(sys.argv[2:], prog_name="transqueue")
"""


@pytest.mark.parametrize(
    "module",
    [
        "cli.translate",  # the command's module, loaded before it can install its handlers
        "models.translator",  # the model, loaded once the documents are read
    ],
)
def test_sigterm_while_the_command_starts_stops_it_with_its_summary(tmp_path, tiny_bundle, module):
    """Sent before the command's handlers were installed, SIGTERM ended the process at once,
    without a word (exit status 143 in a shell); now it is held until they are, and the run
    stops as one stopped later does."""
    import signal

    (tmp_path / "a.txt").write_text("Hello world.\n")
    args = ["translate", str(tmp_path / "a.txt"), "--model", str(tiny_bundle)]
    run = subprocess.run(
        [sys.executable, "-c", STOPPED_WHILE_IMPORTING, module, *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 128 + signal.SIGTERM, run.stderr
    assert run.stderr.splitlines()[-1] == (
        "0 written, 0 skipped (output exists; --force overwrites), 0 failed, 0 sentences (0 distinct) "
        "in 0.0s, 0.0 sentences/s; stopped (exit status 143)"
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.txt"]


def test_a_sigterm_held_for_a_command_that_ends_before_its_handlers_is_not_lost(tmp_path):
    """A usage error ends the command before it installs its handlers: the SIGTERM held
    meanwhile is sent again once the old handlers are back, and it ends the process."""
    import signal

    args = ["translate", str(tmp_path / "a.txt"), "-o", "-"]
    run = subprocess.run(
        [sys.executable, "-c", STOPPED_WHILE_IMPORTING, "cli.translate", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == -signal.SIGTERM and run.stderr == ""
    before = signal.getsignal(signal.SIGTERM)
    assert CliRunner().invoke(main, args).exit_code == 2
    assert signal.getsignal(signal.SIGTERM) is before  # this process's own, not the held one


def test_a_report_can_go_to_a_pipe_or_a_device(tmp_path):
    """--report /dev/stdout (or -) is written to stdout itself as the run goes: a pipe, or a
    file the shell opened, at its position (`>> all.jsonl` keeps its earlier lines, and
    `> run.log 2>&1` holds the records and the summary, neither written over the other)."""
    (tmp_path / "a.txt").write_text("Tom is 25 years old.\n")
    for report in ("/dev/stdout", "-"):
        args = [TRANSQUEUE, "translate", str(tmp_path / "a.txt"), "--report", report, "--force"]
        run = subprocess.run(args, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["document"] == str(tmp_path / "a.txt")
    log = tmp_path / "run.log"
    with log.open("w") as shared:
        run = subprocess.run(args, stdout=shared, stderr=subprocess.STDOUT, timeout=300)
    assert run.returncode == 0
    record, summary = log.read_text().splitlines()
    assert json.loads(record)["document"] == str(tmp_path / "a.txt") and summary.startswith("1 written")
    log.unlink()
    args = args[:-1]
    everything = tmp_path / "all.jsonl"
    everything.write_text('{"earlier": "run"}\n')
    with everything.open("a") as stdout:
        for more in (["--force"], []):  # the second run skips a.txt, whose record is in the file
            run = subprocess.run(
                [*args, *more], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=300
            )
            assert run.returncode == 0, run.stderr
    earlier, record = everything.read_text().splitlines()  # nothing carried over into a stream
    assert earlier == '{"earlier": "run"}' and json.loads(record)["document"] == str(tmp_path / "a.txt")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.txt", "a.zh.txt", "all.jsonl"]


def test_a_file_failing_under_force_keeps_its_earlier_output_and_records(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Tom is 25 years old.\n")
    (corpus / "b.jsonl").write_text('{"text": "He has 31 cats."}\n')
    report = tmp_path / "flags.jsonl"
    args = ["translate", str(corpus), "--field", "text", "--report", str(report)]
    assert CliRunner().invoke(main, args).exit_code == 0
    records = report.read_text(encoding="utf-8").splitlines()
    assert len(records) == 2
    (corpus / "b.jsonl").write_text('{"text": "He has 31 cats."}\n{broken\n')
    output = (tmp_path / "corpus.zh" / "b.jsonl").read_bytes()
    again = CliRunner().invoke(main, [*args, "--force"])
    assert (
        again.exit_code == 1
        and "1 written, 0 skipped (output exists; --force overwrites), 1 failed" in again.output
    )
    assert (tmp_path / "corpus.zh" / "b.jsonl").read_bytes() == output  # kept, as its records are
    assert sorted(report.read_text(encoding="utf-8").splitlines()) == sorted(records)


def test_a_directory_with_nothing_to_translate_is_named_in_a_warning(tmp_path, tiny_bundle):
    """It printed "0 written, ..." and nothing else, as a run that found everything done does."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "scan.pdf").write_bytes(b"%PDF")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "a.txt").write_text("Hello.\n")
    inputs = [str(tmp_path / "empty"), str(tmp_path / "full")]
    result = CliRunner().invoke(main, ["translate", *inputs, "--model", str(tiny_bundle)])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: {tmp_path / 'empty'}: no file to translate in it (suffixes read: "
        ".csv, .jsonl, .markdown, .md, .parquet, .text, .tsv, .txt)"
    ]
    assert (tmp_path / "full.zh" / "a.txt").exists()


def test_a_jsonl_file_whose_records_hold_no_text_in_the_field_is_named_in_a_warning(tmp_path, tiny_bundle):
    """A misspelt --field wrote every record back as it was and said only "0 sentences"."""
    source = tmp_path / "corpus.jsonl"
    source.write_text('{"id": 1, "text": "Hello."}\n{"id": 2, "text": "Good night."}\n')
    model = ["--model", str(tiny_bundle)]
    result = CliRunner().invoke(main, ["translate", str(source), "--field", "txt", *model])
    assert result.exit_code == 0, result.output
    assert f"warning: {source}: no record holds text to translate in --field 'txt'; " in result.stderr
    assert (tmp_path / "corpus.zh.jsonl").read_text() == source.read_text()
    result = CliRunner().invoke(main, ["translate", str(source), "--field", "text", "--force", *model])
    assert result.exit_code == 0 and "warning" not in result.stderr, result.output
