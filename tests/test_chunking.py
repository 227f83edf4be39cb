"""producer.chunking: a job's sentences travel in chunks of similar token length."""

from __future__ import annotations

from producer import chunking
from store.config import Settings


def test_each_window_is_ordered_by_length_and_every_slot_travels_once(monkeypatch):
    monkeypatch.setattr(chunking.defaults, "CHUNK_SORT_WINDOW", 4)
    sentences = [f"s{i}" for i in range(10)]
    lengths = [5, 1, 3, 1, 9, 2, 2, 8, 7, 1]
    chunks = chunking.chunk_sentences(sentences, lengths, size=3)
    slots = [slot for chunk in chunks for slot, _ in chunk]
    assert slots == [1, 3, 2, 0, 5, 6, 7, 4, 9, 8]  # windows [0..3], [4..7], [8, 9]
    assert all(sentences[slot] == text for chunk in chunks for slot, text in chunk)
    assert [len(chunk) for chunk in chunks] == [3, 3, 3, 1]


def test_lengths_come_from_the_bundle_tokenizer_or_else_characters(tmp_path):
    sentences = ["Hello.", "Where is the railway station, please?"]
    tokens = chunking.source_lengths(Settings(), sentences)  # the demo bundle's source.spm
    assert tokens[0] < tokens[1] < len(sentences[1])
    assert chunking.source_lengths(Settings(bundle=str(tmp_path)), sentences) == [len(s) for s in sentences]
