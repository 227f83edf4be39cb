"""Parquet documents: translated row group by row group, everything else kept."""

from __future__ import annotations

import datetime
import hashlib
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from producer.documents import DocumentError, ReadOptions
from producer.files import FileTask
from producer.jobs import JobBuilder, OriginalMissing, Source, iter_documents, write_document
from producer.pipeline import RunOptions, RunReport, read_tasks, translate_files
from producer.quality import FlagLog, place_text
from store.config import Settings
from store.jobstore import DeadLetter, JobStore
from tests.test_documents import sentence_text
from tests.test_streaming import CopyingTranslator, FakeTranslator, translated

pytest_plugins = ["distributed_support"]

OPTIONS = ReadOptions(columns=("text", "2"))
CELLS = st.one_of(st.none(), sentence_text(), st.text(max_size=20))


STRING = pa.string()
#: The kinds of string column taken: plain, dictionary-encoded (a pandas categorical has
#: int8 indices, ordered or not) and, from pyarrow 16, string_view.
TEXT_TYPES = [
    STRING,
    pa.dictionary(pa.int32(), pa.string()),
    pa.dictionary(pa.int8(), pa.string(), ordered=True),
    *([pa.string_view()] if hasattr(pa, "string_view") else []),
]


def write_table(
    path: Path, texts: list, notes: list, group: int, codec: str = "zstd", text: pa.DataType = STRING
) -> pa.Table:
    table = pa.table(
        {
            "id": pa.array(range(len(texts)), pa.int64()),
            "text": pa.array(texts, text),
            "note": pa.array(notes, pa.large_string()),
            "score": pa.array([0.5] * len(texts), pa.float32()),
        },
        metadata={b"origin": b"bench"},
    )
    pq.write_table(table, path, row_group_size=group, compression=codec)
    return table


def run(source: Path, target: Path, options: ReadOptions = OPTIONS) -> tuple[RunReport, FakeTranslator]:
    report, translator = RunReport(), FakeTranslator()
    translate_files(
        read_tasks([FileTask(source, target)], RunOptions(read=options), report), translator, report
    )
    return report, translator


def row_groups(path: Path) -> list[int]:
    metadata = pq.ParquetFile(path).metadata
    return [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data(), st.integers(min_value=1, max_value=5))
def test_translated_row_groups_keep_everything_else(tmp_path_factory, data, group):
    rows = data.draw(st.integers(min_value=0, max_value=12))
    texts = data.draw(st.lists(CELLS, min_size=rows, max_size=rows))
    notes = data.draw(st.lists(CELLS, min_size=rows, max_size=rows))
    directory = tmp_path_factory.mktemp("parquet")
    source, target = directory / "t.parquet", directory / "t.zh.parquet"
    table = write_table(source, texts, notes, group)
    report, translator = run(source, target)
    assert report.written == [target] and not report.errors
    out = pq.read_table(target)
    assert out.schema == table.schema and out.schema.metadata == table.schema.metadata
    assert row_groups(target) == row_groups(source)
    assert len(translator.calls) == len(row_groups(source))  # one call per row group
    assert out.column("id") == table.column("id") and out.column("score") == table.column("score")
    for name in ("text", "note"):
        for before, after in zip(table.column(name).to_pylist(), out.column(name).to_pylist(), strict=True):
            assert (before is None) == (after is None)
            if before is not None and not any(c.isalpha() for c in before):
                assert after == before
    assert sorted(p.name for p in directory.iterdir()) == ["t.parquet", "t.zh.parquet"]


@pytest.mark.parametrize("text", TEXT_TYPES, ids=str)
def test_cells_render_their_translations_and_identity_gives_the_input(tmp_path, monkeypatch, text):
    source = tmp_path / "t.parquet"
    table = write_table(
        source,
        ["Hello there. How are you?", None, "42", "Hello there. How are you?"],
        ["Keep me.", "a", None, "b"],
        group=2,
        codec="snappy",
        text=text,
    )
    report, _ = run(source, tmp_path / "out.parquet", ReadOptions(columns=("text",)))
    assert not report.errors, report.errors
    out = pq.read_table(tmp_path / "out.parquet")
    assert out.schema == table.schema and out.column("text").type == text
    assert out.column("text").to_pylist() == [
        f"{translated('Hello there.')} {translated('How are you?')}",
        None,
        "42",
        f"{translated('Hello there.')} {translated('How are you?')}",
    ]
    assert row_groups(tmp_path / "out.parquet") == [2, 2]
    assert out.column("note").to_pylist() == ["Keep me.", "a", None, "b"]
    assert pq.ParquetFile(tmp_path / "out.parquet").metadata.row_group(0).column(0).compression == "SNAPPY"

    monkeypatch.setattr(
        FakeTranslator,
        "translate",
        lambda self, sentences: [type("R", (), {"text": s, "hit_length_cap": False})() for s in sentences],
    )
    run(source, tmp_path / "same.parquet")
    same, original = pq.read_table(tmp_path / "same.parquet"), pq.read_table(source)
    assert same.schema == original.schema and same.to_pylist() == original.to_pylist()  # dictionaries anew


@pytest.mark.parametrize(
    ("name", "columns", "message"),
    [
        (
            "t.parquet",
            ("body",),
            "t.parquet: no column 'body'; its 4 columns are 'id', 'text', 'note', 'score'",
        ),
        ("t.parquet", ("score",), "t.parquet: column 'score' holds float, not strings"),
        (
            "t.parquet",
            (),
            "t.parquet: a Parquet document needs at least one column "
            "(--column, or columns in a schedule entry)",
        ),
        ("t.parquet.gz", ("text",), "t.parquet.gz: a Parquet file is compressed inside"),
        ("bad.parquet", ("text",), "bad.parquet: not a readable Parquet file"),
    ],
)
def test_parquet_errors_name_the_file_before_anything_is_translated(tmp_path, name, columns, message):
    write_table(tmp_path / name, ["Hi there."], ["x"], group=1)
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    report = RunReport()
    assert (
        read_tasks(
            [FileTask(tmp_path / name, tmp_path / "out.parquet")],
            RunOptions(read=ReadOptions(columns=columns)),
            report,
        )
        == []
    )
    assert len(report.errors) == 1 and report.errors[0].startswith(
        f"{tmp_path / name}: {message.split(': ', 1)[1]}"
    )


def test_cells_keep_the_protected_spans_of_the_options(tmp_path):
    write_table(tmp_path / "t.parquet", ["Ticket OPS-1234 is fixed."], [None], group=1)
    _, translator = run(
        tmp_path / "t.parquet",
        tmp_path / "out.parquet",
        ReadOptions(columns=("text",), protect=(r"OPS-\d+",)),
    )
    assert translator.calls == [["Ticket", "is fixed."]]


@pytest.fixture
def store(redis_server):
    redis_server.client().flushdb()
    return JobStore.from_settings(Settings(redis_url=redis_server.url))


@pytest.mark.parametrize("text", TEXT_TYPES, ids=str)
def test_a_job_stores_the_cells_and_writes_the_table_translate_writes(store, tmp_path, text):
    source = tmp_path / "in" / "t.parquet"
    source.parent.mkdir()
    table = write_table(
        source,
        ["Hello there. How are you?", None, "Fine.", "Hello there."],
        ["a", "b", None, "c"],
        group=3,
        text=text,
    )
    job = JobBuilder(store, OPTIONS)
    job.add(Source(str(source), "t.zh.parquet"))
    job.writer.flush()
    record = store.document(job.job_id, 0)
    data = source.read_bytes()
    assert (record.fmt, record.windows, record.columns) == ("parquet", 2, OPTIONS.columns)
    assert (record.size, record.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert [store.window(job.job_id, 0, w).slots for w in range(2)] == [(0, 1, 2, 3, 4), (0, 5)]
    job.submit(out="", origin="files")
    sentences = {
        slot: text for _, items in store.chunks(job.job_id, job.chunker.chunks) for slot, text in items
    }
    for slot, text in sentences.items():
        store.record(job.job_id, slot, text, translated(text), fingerprint="f", hit=False)
    (rendered,) = iter_documents(store, job.job_id, follow=False, poll_interval=0)
    write_document(rendered, tmp_path / "job.parquet", [source])
    run(source, tmp_path / "translate.parquet")
    assert (tmp_path / "job.parquet").read_bytes() == (tmp_path / "translate.parquet").read_bytes()
    out = pq.read_table(tmp_path / "job.parquet")
    assert out.schema == table.schema
    assert out.column("text").to_pylist() == [
        f"{translated('Hello there.')} {translated('How are you?')}",
        None,
        translated("Fine."),
        translated("Hello there."),
    ]


def test_the_original_must_be_unchanged_wherever_it_is_found(store, tmp_path):
    source = tmp_path / "t.parquet"
    write_table(source, ["Hello there."], ["a"], group=1)
    job = JobBuilder(store, OPTIONS)
    job.add(Source(str(source), "t.zh.parquet"))
    job_id = job.submit(out="", origin="files")
    store.record(job_id, 0, "Hello there.", "你好。", fingerprint="f", hit=False)
    store.record(job_id, 1, "a", "甲", fingerprint="f", hit=False)

    def write(*originals: Path) -> None:
        (rendered,) = iter_documents(store, job_id, follow=False, poll_interval=0)
        write_document(rendered, tmp_path / "out.parquet", list(originals))

    moved = tmp_path / "moved.parquet"
    source.rename(moved)
    with pytest.raises(OriginalMissing) as missing:
        write(source)
    assert str(missing.value).startswith(
        f"{source}: the Parquet file it was read from ({moved.stat().st_size:,} bytes"
    )
    assert str(missing.value).endswith(f"was not found: {source}: No such file or directory")
    write_table(source, ["Hello there!"], ["a"], group=1)  # same size, other content
    with pytest.raises(OriginalMissing, match=f"{source} has other content; {tmp_path / 'x'}: No such file"):
        write(source, tmp_path / "x")
    write(source, moved)
    assert pq.read_table(tmp_path / "out.parquet").column("text").to_pylist() == ["你好。"]
    with pytest.raises(DocumentError, match="refusing to overwrite input"):
        (rendered,) = iter_documents(store, job_id, follow=False, poll_interval=0)
        write_document(rendered, moved, [moved])


def test_each_column_keeps_its_codec_uncompressed_included(tmp_path):
    source = tmp_path / "mixed.parquet"
    table = pa.table({"id": pa.array([1, 2], pa.int64()), "text": pa.array(["One.", "Two."])})
    pq.write_table(table, source, compression={"id": "NONE", "text": "zstd"})
    report, _ = run(source, tmp_path / "out.parquet", ReadOptions(columns=("text",)))
    assert not report.errors, report.errors
    group = pq.ParquetFile(tmp_path / "out.parquet").metadata.row_group(0)
    assert [group.column(i).compression for i in range(2)] == ["UNCOMPRESSED", "ZSTD"]


def test_a_column_index_in_other_digits_is_no_index(tmp_path):
    source = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": ["x"], "b": ["y"]}), source)
    for column in ("²", "١"):
        report, _ = run(source, tmp_path / "out.parquet", ReadOptions(columns=(column,)))
        assert len(report.errors) == 1 and f"no column {column!r}" in report.errors[0]


@pytest.mark.parametrize("name", ["é" * 123 + ".parquet", "x" + "é" * 122 + ".parquet"])
def test_an_output_named_near_the_name_limit_is_written(tmp_path: Path, name: str):
    """Its temporary name is cut to fit the name limit by whole characters: one cut inside a
    two-byte character (one of the two names, whatever the process id's length) would be a
    name pyarrow cannot encode."""
    source = tmp_path / "in.parquet"
    write_table(source, ["Hello there.", None], ["a", "b"], group=2)
    report, _ = run(source, tmp_path / name, ReadOptions(columns=("text",)))
    assert not report.errors and report.written == [tmp_path / name]
    assert pq.read_table(tmp_path / name).column("text").to_pylist()[1] is None
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.parquet", name]


def test_a_corrupt_row_group_names_the_input_and_the_row_group(tmp_path):
    """A page that cannot be decoded is an error of the file read, not of the output (it was
    "OUT.parquet: Parquet cannot write this file"), and says which row group it is in."""
    source = tmp_path / "t.parquet"
    table = pa.table({"text": pa.array([f"Sentence number {i} is here." for i in range(20)])})
    pq.write_table(table, source, row_group_size=10, compression="none", use_dictionary=False)
    column = pq.ParquetFile(source).metadata.row_group(1).column(0)
    end = column.data_page_offset + column.total_compressed_size
    data = bytearray(source.read_bytes())
    data[end - 100 : end] = b"\xff" * 100  # the last values of the second row group
    source.write_bytes(bytes(data))
    report, _ = run(source, tmp_path / "out.parquet", ReadOptions(columns=("text",)))
    assert report.errors == [
        f"{source}: row group 2 of 2 cannot be read (Invalid or truncated PLAIN-encoded BYTE_ARRAY data)"
    ]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["t.parquet"]


def test_a_string_cell_that_is_not_utf8_is_an_error_naming_its_row_and_column(tmp_path):
    """A writer that does not check its strings can store other bytes in a string column:
    that stopped the run with a UnicodeDecodeError traceback."""
    source = tmp_path / "t.parquet"
    offsets = pa.py_buffer(b"\x00\x00\x00\x00\x03\x00\x00\x00\x06\x00\x00\x00")
    texts = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(b"Hi.\xff\xfe.")])
    pq.write_table(pa.table({"id": [1, 2], "text": texts}), source, row_group_size=1)
    report, _ = run(source, tmp_path / "out.parquet", ReadOptions(columns=("text",)))
    assert report.errors == [
        f"{source}: row 1 (0-based), column 'text': not valid UTF-8 (invalid start byte)"
    ]
    assert not (tmp_path / "out.parquet").exists()


def physical_types(path: Path) -> list[str]:
    """The physical type of each leaf column of the Parquet file ``path`` (INT96, BYTE_ARRAY, ...)."""
    schema = pq.ParquetFile(path).metadata.schema
    return [schema.column(i).physical_type for i in range(len(schema))]


def _stamp_format_1(path: Path) -> None:
    """Mark the Parquet file at ``path`` as format version 1, as parquet-mr (Spark, Hive)
    marks every file it writes: the footer's first field (FileMetaData.version, a Thrift
    compact i32: header 0x15, then zigzag 2 → 4) set to 1 (zigzag 2)."""
    data = bytearray(path.read_bytes())
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    assert data[footer : footer + 2] == b"\x15\x04", "not a version 2 footer"
    data[footer + 1] = 0x02
    path.write_bytes(bytes(data))


def test_int96_timestamps_are_kept_and_a_format_1_file_with_nanoseconds_is_written(tmp_path):
    """Spark, Hive and Impala write timestamps as INT96 and refuse the INT64 nanoseconds
    they were written back as. A file stamped 1.0 (as Spark stamps every file) was written
    back as 1.0 for a while, which fails on a timestamp finer than a microsecond."""
    table = pa.table(
        {
            "at": pa.array([datetime.datetime(2020, 1, 1, 12, 0, 0, 123456)], pa.timestamp("us")),
            "text": ["Hello there."],
        }
    )
    pq.write_table(table, tmp_path / "spark.parquet", use_deprecated_int96_timestamps=True)
    fine = pa.table({"at": pa.array([1], pa.timestamp("ns")), "text": ["Hello there."]})
    pq.write_table(fine, tmp_path / "old.parquet", version="2.6")
    _stamp_format_1(tmp_path / "old.parquet")
    assert pq.ParquetFile(tmp_path / "old.parquet").metadata.format_version == "1.0"
    for name in ("spark.parquet", "old.parquet"):
        source, target = tmp_path / name, tmp_path / f"out-{name}"
        report, _ = run(source, target, ReadOptions(columns=("text",)))
        assert not report.errors, report.errors
        assert physical_types(target) == physical_types(source)
        assert (
            pq.read_table(target).drop_columns(["text"]).equals(pq.read_table(source).drop_columns(["text"]))
        )
    assert physical_types(tmp_path / "out-spark.parquet")[0] == "INT96"


def test_an_ordered_dictionary_column_keeps_the_order_of_its_values(tmp_path):
    """Its dictionary was built anew in the order the cells came in: "Low." < "Medium." <
    "High." became the translation of "High." < that of "Low." < that of "Medium."."""
    source, target = tmp_path / "t.parquet", tmp_path / "out.parquet"
    levels = pa.array(["Low.", "Medium.", "High."])
    indices = pa.array([2, 0, None, 1, 0], pa.int8())
    pq.write_table(pa.table({"level": pa.DictionaryArray.from_arrays(indices, levels, ordered=True)}), source)
    report, _ = run(source, target, ReadOptions(columns=("level",)))
    assert not report.errors, report.errors
    (column,) = pq.read_table(target).column("level").chunks
    assert column.type == pa.dictionary(pa.int8(), pa.string(), ordered=True)
    assert column.dictionary.to_pylist() == [translated(level) for level in levels.to_pylist()]
    assert column.to_pylist() == [
        translated(t) if t else None for t in ["High.", "Low.", None, "Medium.", "Low."]
    ]


FLAGGED = ["Hello there.", "Flag me.", "Fine.", "Fine. Flag me."], ["a", "b", "Flag me.", "Dead one."]
#: Where "Flag me." is in FLAGGED written in row groups of two rows: (0-based row, column).
FLAGGED_AT = [(1, "text"), (3, "text"), (2, "note")]


def copied_places(records: str) -> list[tuple[int, str]]:
    lines = [json.loads(line) for line in records.splitlines()]
    assert all("line" not in record for record in lines)
    return [(record["row"], record["column"]) for record in lines if "copied" in record["flags"]]


def test_translate_s_flag_records_name_the_row_and_column_of_their_cell(tmp_path):
    source = tmp_path / "t.parquet"
    write_table(source, *FLAGGED, group=2)
    records = io.StringIO()
    report = RunReport(quality=FlagLog(records))
    tasks = read_tasks([FileTask(source, tmp_path / "out.parquet")], RunOptions(read=OPTIONS), report)
    translate_files(tasks, CopyingTranslator("Flag me."), report)
    assert not report.errors and copied_places(records.getvalue()) == FLAGGED_AT


def test_a_job_s_flag_records_and_dead_letters_name_the_row_and_column_of_their_cell(store, tmp_path):
    source = tmp_path / "t.parquet"
    write_table(source, *FLAGGED, group=2)
    job = JobBuilder(store, OPTIONS)
    job.add(Source(str(source), "t.zh.parquet"))
    job_id = job.submit(out="", origin="files")
    for _, items in store.chunks(job_id, job.chunker.chunks):
        for slot, text in items:
            if text == "Dead one.":
                letter = DeadLetter(slot=slot, text=text, reason="boom", chunk=0, deliveries=1, at=0.0)
                store.dead_letter(job_id, letter)
            else:
                output = text if text == "Flag me." else "好好"
                store.record(job_id, slot, text, output, fingerprint="f", hit=False)
    records = io.StringIO()
    flags = FlagLog(records)
    (rendered,) = iter_documents(store, job_id, follow=False, poll_interval=0, flags=flags)
    write_document(rendered, tmp_path / "out.parquet", [source])
    flags.keep()
    assert copied_places(records.getvalue()) == FLAGGED_AT
    assert rendered.dead == [({"row": 3, "column": "note"}, letter)]
    assert (
        place_text(rendered.name, rendered.dead[0][0]) == f"{rendered.name}: row 3 (0-based), column 'note'"
    )
