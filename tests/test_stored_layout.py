"""producer.stored_layout: a parsed document survives JSON and renders byte for byte alike."""

from __future__ import annotations

import json

import pytest

from producer import layout
from producer.documents import DocumentError, ReadOptions, parse_text
from producer.formats.parquet import RowGroupCells
from producer.stored_layout import dump_cells, dump_document, load_cells, load_document

DOCUMENTS = [
    ("txt", ReadOptions(), "Hello there. How are you?\r\n\r\n  Fine, thanks!\r\nBye"),
    ("txt", ReadOptions(reflow=True), "A hard\nwrapped line. And more\nof it.\n\nNext one.\n"),
    (
        "md",
        ReadOptions(),
        "# Title here\n\nSome *text*. More [text](http://x.y).\n\n"
        "- one item. Two.\n- three\n\n```\ncode. stays.\n```\n",
    ),
    (
        "jsonl",
        ReadOptions(fields=("text", "meta.title")),
        '{"id": 1, "text": "Caf\\u00e9 time. Line\\nbreak.", "meta": {"title": "A title."}}\r\n'
        '{"id": 2, "text": null}\n{"id": 3, "text": "\\"Quoted.\\" Fine."}',
    ),
]


def translations(texts: list[str]) -> list[list[str]]:
    """Identity, CJK (drops gaps, re-encodes JSON values) and mixed translations."""
    return [
        texts,
        [f"句子{i}。" for i in range(len(texts))],
        [t if i % 2 else f"译{i}" for i, t in enumerate(texts)],
    ]


@pytest.mark.parametrize(("fmt", "options", "content"), DOCUMENTS)
def test_a_stored_document_renders_like_the_parsed_one(fmt, options, content):
    doc = parse_text(content, fmt, options)
    stored = load_document(dump_document(doc), "doc")
    assert [(s.index, s.text, s.start, s.end) for s in stored.segments] == [
        (s.index, s.text, s.start, s.end) for s in doc.segments
    ]
    assert stored.render([s.text for s in stored.segments]) == content
    for attempt in translations([s.text for s in doc.segments]):
        assert stored.render(attempt) == doc.render(attempt)


def test_rendering_never_segments_again(monkeypatch):
    content = "One sentence. Another sentence.\n"
    stored = dump_document(parse_text(content, "txt"))
    monkeypatch.setattr(layout, "split_paragraph", lambda text, protected=(): ([(0, len(text))], []))
    assert len(parse_text(content, "txt").segments) == 1  # segmentation differs now
    assert load_document(stored, "a.txt").render(["一。", "二。"]) == "一。二。\n"


@pytest.mark.parametrize(
    "change",
    [
        lambda data: data["parts"].pop(),  # a slot missing
        lambda data: data["parts"].append({"slot": 0}),  # a slot twice
        lambda data: data["segments"].append([40, 45, "Extra."]),  # a segment without a slot
        lambda data: data["parts"].append({"raw": "42", "parts": []}),  # not a JSON string
        lambda data: data.pop("segments"),
        lambda data: data["parts"].append([0, 1]),  # a part that is no object: AttributeError
        lambda data: data["parts"][0].update(source=["One."]),  # a source that is no text
        lambda data: data["parts"].append({"raw": 5, "parts": []}),  # a raw value that is no text
    ],
)
def test_stored_data_that_does_not_line_up_names_the_document(change):
    data = json.loads(dump_document(parse_text("One. Two.\n", "txt")))
    data["parts"] = [p for p in data["parts"] if p != "\n"]
    change(data)
    with pytest.raises(DocumentError, match=r"^in/a\.txt: stored "):
        load_document(json.dumps(data), "in/a.txt")


def test_an_encoded_value_inside_another_is_refused_before_it_renders():
    """Each level would JSON-encode the one inside it again, doubling its backslashes: 60
    levels, stored in a few kilobytes, rendered (at fetch, or an inbox delivery) to 2**60
    bytes, with neither time nor memory to finish."""
    parts: list[object] = [{"slot": 0}]
    for _ in range(60):
        parts = [{"raw": '"One."', "parts": parts}]
    stored = json.dumps({"segments": [[0, 4, "One."]], "parts": parts})
    with pytest.raises(DocumentError, match="an encoded value inside another"):
        load_document(stored, "in/a.jsonl")
    one_level = json.dumps(
        {"segments": [[0, 4, "One."]], "parts": [{"raw": '"One."', "parts": [{"slot": 0}]}]}
    )
    assert load_document(one_level, "in/a.jsonl").render(['"引号"']) == '"\\"引号\\""'


@pytest.mark.parametrize(("fmt", "options", "content"), DOCUMENTS)
def test_the_stored_json_is_compact_json(fmt, options, content):
    stored = dump_document(parse_text(content, fmt, options))
    assert stored == json.dumps(json.loads(stored), ensure_ascii=False, separators=(",", ":"))


def test_a_cut_for_length_is_stored_and_checked_when_read_back():
    text = " ".join(f"word{n}" for n in range(400)) + ". The end.\n"
    document = parse_text(text, "txt")
    assert [s.split for s in document.segments] == [True, True, False]
    stored = dump_document(document)
    assert [s.split for s in load_document(stored, "long.txt").segments] == [True, True, False]
    data = json.loads(stored)
    data["segments"][0][3] = "yes"
    with pytest.raises(DocumentError, match="long.txt: stored document is malformed"):
        load_document(json.dumps(data), "long.txt")
    data["segments"][0] = "12a"
    with pytest.raises(DocumentError, match="long.txt: stored document is malformed"):
        load_document(json.dumps(data), "long.txt")


def test_a_row_group_s_cells_survive_with_their_nulls_and_where_they_lie():
    cells = [parse_text("Hello there. Bye.", "txt"), None, parse_text("", "txt"), parse_text("Fine.", "txt")]
    group = load_cells(dump_cells(RowGroupCells(cells, ("text", "título"), 4096)), "t.parquet")
    assert (group.columns, group.first_row) == (("text", "título"), 4096)
    stored = group.cells
    assert [None if c is None else [s.text for s in c.segments] for c in stored] == [
        ["Hello there.", "Bye."],
        None,
        [],
        ["Fine."],
    ]
    assert [None if c is None else c.render([s.text for s in c.segments]) for c in stored] == [
        "Hello there. Bye.",
        None,
        "",
        "Fine.",
    ]
    for bad in (
        '{"cells": 3}',
        "[]",
        '{"cells": [{"segments": []}]}',
        "{",
        '{"cells": [null, null, null], "columns": ["a", "b"]}',  # not a whole number of rows
        '{"cells": [], "columns": "ab"}',
        '{"cells": [], "columns": [1]}',
        '{"cells": [], "first_row": -1}',
        '{"cells": [], "first_row": true}',
        '{"cells": [], "first_row": 1.5}',
    ):
        with pytest.raises(DocumentError, match="t.parquet: stored (cells|document) (are|is) malformed"):
            load_cells(bad, "t.parquet")


def test_cells_stored_before_their_places_were_kept_still_load():
    group = load_cells(
        '{"cells": [null, {"segments": [[0, 3, "Hi."]], "parts": [{"slot": 0}]}]}', "t.parquet"
    )
    assert (group.columns, group.first_row, group.document().places) == ((), 0, None)
    assert group.render(["你好。"]) == [None, "你好。"]


def test_a_row_group_s_document_places_each_segment_in_its_cell():
    cells = [parse_text("One. Two.", "txt"), None, None, parse_text("Three.", "txt")]
    document = RowGroupCells(cells, ("text", "note"), 10).document()
    assert [s.index for s in document.segments] == [0, 1, 2]
    assert document.places == [(10, "text"), (10, "text"), (11, "note")]
    assert (
        RowGroupCells(cells).sentences() == [s.text for s in document.segments] == ["One.", "Two.", "Three."]
    )
