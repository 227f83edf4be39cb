"""producer.files: planning special files and links, which reading then refuses one by one."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from producer import files, streaming
from producer.documents import DocumentError, ReadOptions
from producer.files import FileTask, OutputAppeared, atomic_target, plan_files, write_atomic
from producer.pipeline import RunOptions, RunReport, read_tasks, translate_files
from tests.test_streaming import FakeTranslator


@pytest.fixture
def odd_tree(tmp_path: Path) -> Path:
    """A directory of one good file, a FIFO, a device link, a link loop and a dangling link."""
    root = tmp_path / "docs"
    root.mkdir()
    (root / "good.txt").write_text("Hello there.\n")
    os.mkfifo(root / "pipe.txt")
    (root / "zero.txt").symlink_to("/dev/zero")
    (root / "loop1.md").symlink_to("loop2.md")
    (root / "loop2.md").symlink_to("loop1.md")
    (root / "gone.jsonl").symlink_to("nowhere.jsonl")
    return root


def test_special_files_and_links_are_planned_not_followed(odd_tree: Path, tmp_path: Path):
    out = tmp_path / "out"
    names = ["gone.jsonl", "good.txt", "loop1.md", "loop2.md", "pipe.txt", "zero.txt"]
    assert plan_files([odd_tree], out) == [FileTask(odd_tree / name, out / name) for name in names]


def test_special_files_and_links_given_directly_are_planned(odd_tree: Path, tmp_path: Path):
    for name in ("pipe.txt", "zero.txt", "loop1.md", "gone.jsonl"):
        assert plan_files([odd_tree / name]) == [
            FileTask(odd_tree / name, odd_tree / f"{Path(name).stem}.zh{Path(name).suffix}")
        ]
    assert plan_files([odd_tree / "pipe.txt"], tmp_path / "x.txt")[0].target == tmp_path / "x.txt"
    with pytest.raises(DocumentError, match="missing.txt: no such file or directory"):
        plan_files([odd_tree / "missing.txt"])


def test_a_link_loop_as_output_is_no_crash(odd_tree: Path):
    with pytest.raises(DocumentError, match="refusing to overwrite input"):
        plan_files([odd_tree / "good.txt"], odd_tree / "good.txt")
    assert plan_files([odd_tree / "good.txt"], odd_tree / "loop1.md")[0].target == odd_tree / "loop1.md"


def test_write_atomic_writes_big_texts_in_pieces(tmp_path: Path):
    text = "中文 and English.\r\n" * 200_000  # 3.4 M characters: four write pieces
    write_atomic(tmp_path / "out.txt", text)
    assert (tmp_path / "out.txt").read_bytes() == text.encode("utf-8")


def test_the_root_directory_needs_an_output_directory():
    with pytest.raises(
        DocumentError, match="^/: the root directory has no sibling for its output; give -o DIR$"
    ):
        plan_files([Path("/")])


def test_a_directory_that_cannot_be_listed_stops_the_plan_naming_it(tmp_path: Path):
    # as root no permission denies a listing, so the walk meets a directory gone instead;
    # either way it is reported, never taken for an empty directory
    from producer.files import _walk

    with pytest.raises(DocumentError, match=f"{tmp_path / 'gone'}: cannot read this directory"):
        list(_walk(tmp_path / "gone", tmp_path / "out"))


def test_an_output_named_near_the_name_limit_is_written(tmp_path: Path):
    name = "é" * 125 + ".txt"  # 254 bytes: its temporary name, cut to fit, still is
    write_atomic(tmp_path / name, "你好\n")
    assert (tmp_path / name).read_text(encoding="utf-8") == "你好\n" and os.listdir(tmp_path) == [name]


def test_without_overwrite_a_file_made_meanwhile_is_left_as_it_is(tmp_path: Path):
    target = tmp_path / "a.txt"
    with pytest.raises(OutputAppeared, match="made by something else"):
        with atomic_target(target, overwrite=False) as temporary:
            temporary.write_text("ours\n")
            target.write_text("theirs\n")
    assert target.read_text() == "theirs\n" and os.listdir(tmp_path) == ["a.txt"]
    with atomic_target(tmp_path / "b.txt", overwrite=False) as temporary:
        temporary.write_text("ours\n")
    assert (tmp_path / "b.txt").read_text() == "ours\n" and sorted(os.listdir(tmp_path)) == ["a.txt", "b.txt"]


def test_always_keeps_what_was_written_before_a_failure(tmp_path: Path):
    with pytest.raises(KeyboardInterrupt), atomic_target(tmp_path / "log", always=True) as temporary:
        temporary.write_text("so far\n")
        raise KeyboardInterrupt
    assert (tmp_path / "log").read_text() == "so far\n" and os.listdir(tmp_path) == ["log"]
    with pytest.raises(KeyboardInterrupt), atomic_target(tmp_path / "out") as temporary:
        temporary.write_text("half\n")
        raise KeyboardInterrupt
    assert os.listdir(tmp_path) == ["log"]


def test_the_tree_an_earlier_run_wrote_beside_its_directory_is_not_an_input(tmp_path: Path):
    """`translate w` writes `w.zh/` with the same file names; translating the directory above
    them translated those outputs again (and wrote `w.zh.zh/`)."""
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "a.txt").write_text("Hi.\n")
    first = plan_files([tmp_path / "w"])
    assert [(t.source, t.target) for t in first] == [(tmp_path / "w" / "a.txt", tmp_path / "w.zh" / "a.txt")]
    (tmp_path / "w.zh").mkdir()
    (tmp_path / "w.zh" / "a.txt").write_text("嗨。\n")
    (tmp_path / "notes.zh").mkdir()  # no `notes` beside it: a directory of inputs like any other
    (tmp_path / "notes.zh" / "b.txt").write_text("Hello.\n")
    sources = [task.source for task in plan_files([tmp_path])]
    assert sources == [tmp_path / "notes.zh" / "b.txt", tmp_path / "w" / "a.txt"]


def test_a_walk_without_hidden_names_never_enters_a_dot_directory(tmp_path: Path):
    """The inbox's walk: a dot directory (rsync's `.~tmp~`, removed when its transfer ends)
    that vanishes while the tree is walked is no error, as it is never entered."""
    import shutil

    from producer.files import _walk

    for hidden in (False, True):
        (tmp_path / "a.txt").write_text("Hi.\n")
        (tmp_path / ".~tmp~").mkdir()
        (tmp_path / ".~tmp~" / "b.txt").write_text("Hi.\n")
        (tmp_path / ".c.txt").write_text("Hi.\n")
        walk = _walk(tmp_path, tmp_path / "out", hidden)
        first = next(walk)
        shutil.rmtree(tmp_path / ".~tmp~")
        if hidden:
            assert first == tmp_path / ".c.txt"
            with pytest.raises(DocumentError, match="cannot read this directory"):
                list(walk)
        else:
            assert [first, *walk] == [tmp_path / "a.txt"]


def test_a_file_in_place_of_an_output_directory_is_named_as_such(tmp_path: Path):
    (tmp_path / "a.txt").write_text("x", encoding="utf-8")
    with pytest.raises(NotADirectoryError) as raised, atomic_target(tmp_path / "a.txt" / "b.txt"):
        pass
    assert raised.value.strerror == f"Not a directory ({tmp_path / 'a.txt'} exists and is not a directory)"
    assert raised.value.filename == str(tmp_path / "a.txt" / "b.txt")
    # an output deeper in the tree names the same file, not only "Not a directory"
    with pytest.raises(NotADirectoryError) as raised, atomic_target(tmp_path / "a.txt" / "sub" / "b.txt"):
        pass
    assert raised.value.strerror == f"Not a directory ({tmp_path / 'a.txt'} exists and is not a directory)"
    assert raised.value.filename == str(tmp_path / "a.txt" / "sub" / "b.txt")


class FullDisk:
    """A writer whose writes find the disk full, as the kernel says it: an OSError that
    names no file."""

    def __init__(self, raw) -> None:
        self.raw = raw

    def write(self, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def close(self) -> None:
        pass


def test_a_full_disk_is_reported_under_the_output_s_name(tmp_path: Path, monkeypatch):
    """It was reported under the input's name ("big.csv: No space left on device"), as if
    the input could not be read; a read that fails the same way still names the input."""
    source, target = tmp_path / "in.csv", tmp_path / "out" / "in.csv"
    source.write_text("id,text\n1,Hello there.\n")
    options = RunOptions(read=ReadOptions(columns=("text",)))

    def run() -> RunReport:
        report = RunReport()
        return translate_files(
            read_tasks([FileTask(source, target)], options, report), FakeTranslator(), report
        )

    monkeypatch.setattr(files, "compressing", lambda raw, compression: FullDisk(raw))
    assert run().errors == [f"{target}: {os.strerror(errno.ENOSPC)}"]
    monkeypatch.undo()

    def failing_read(path, limits):
        yield b"id,text\n"
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(streaming, "stream_input", failing_read)
    assert run().errors == [f"{source}: {os.strerror(errno.EIO)}"]
    assert sorted(os.listdir(tmp_path)) == ["in.csv", "out"] and not os.listdir(tmp_path / "out")


def test_a_full_disk_fails_a_parquet_output_under_its_name(tmp_path: Path, monkeypatch):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    source, target = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table({"text": ["Hello there."]}), source)

    def full(self, table, row_group_size=None):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as pyarrow's ArrowIOError

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    report = RunReport()
    options = RunOptions(read=ReadOptions(columns=("text",)))
    translate_files(read_tasks([FileTask(source, target)], options, report), FakeTranslator(), report)
    assert report.errors == [f"{target}: {os.strerror(errno.ENOSPC)}"]
    assert sorted(os.listdir(tmp_path)) == ["in.parquet"]
