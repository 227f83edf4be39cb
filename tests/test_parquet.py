"""Parquet documents: translated row group by row group, everything else kept."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from producer.documents import PARQUET_TRANSLATE_ONLY, DocumentError, ReadOptions
from producer.files import FileTask
from producer.jobs import file_source
from producer.pipeline import RunOptions, RunReport, read_tasks, translate_files
from tests.test_documents import sentence_text
from tests.test_streaming import FakeTranslator, translated

OPTIONS = ReadOptions(columns=("text", "2"))
CELLS = st.one_of(st.none(), sentence_text(), st.text(max_size=20))


def write_table(path: Path, texts: list, notes: list, group: int, codec: str = "zstd") -> pa.Table:
    table = pa.table(
        {
            "id": pa.array(range(len(texts)), pa.int64()),
            "text": pa.array(texts, pa.string()),
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


def test_cells_render_their_translations_and_identity_gives_the_input(tmp_path, monkeypatch):
    source = tmp_path / "t.parquet"
    write_table(
        source, ["Hello there. How are you?", None, "42"], ["Keep me.", "a", None], group=2, codec="snappy"
    )
    run(source, tmp_path / "out.parquet", ReadOptions(columns=("text",)))
    out = pq.read_table(tmp_path / "out.parquet")
    assert out.column("text").to_pylist() == [
        f"{translated('Hello there.')} {translated('How are you?')}",
        None,
        "42",
    ]
    assert out.column("note").to_pylist() == ["Keep me.", "a", None]
    assert pq.ParquetFile(tmp_path / "out.parquet").metadata.row_group(0).column(0).compression == "SNAPPY"

    monkeypatch.setattr(
        FakeTranslator,
        "translate",
        lambda self, sentences: [type("R", (), {"text": s, "hit_length_cap": False})() for s in sentences],
    )
    run(source, tmp_path / "same.parquet")
    assert pq.read_table(tmp_path / "same.parquet") == pq.read_table(source)


@pytest.mark.parametrize(
    ("name", "columns", "message"),
    [
        (
            "t.parquet",
            ("body",),
            "t.parquet: no column 'body'; its 4 columns are 'id', 'text', 'note', 'score'",
        ),
        ("t.parquet", ("score",), "t.parquet: column 'score' holds float, not strings"),
        ("t.parquet", (), "t.parquet: a Parquet document needs at least one column (--column)"),
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


def test_submit_says_parquet_is_for_translate(tmp_path):
    write_table(tmp_path / "t.parquet", ["Hi there."], ["x"], group=1)
    source = file_source(FileTask(tmp_path / "t.parquet", tmp_path / "out" / "t.parquet"), tmp_path / "out")
    with pytest.raises(DocumentError) as raised:
        source.format()
    assert str(raised.value) == f"{tmp_path / 't.parquet'}: {PARQUET_TRANSLATE_ONLY}"
