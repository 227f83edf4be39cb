"""producer.chunking: a job's sentences travel in chunks of similar token length."""

from __future__ import annotations

import shutil

import pytest

from models.bundle import default_bundle_dir, read_manifest
from producer import chunking
from store.config import Settings


def test_each_window_is_ordered_by_length_and_every_slot_travels_once(monkeypatch):
    monkeypatch.setattr(chunking.defaults, "CHUNK_SORT_WINDOW", 4)
    sentences = [f"s{i}" for i in range(10)]
    lengths = dict(zip(sentences, [5, 1, 3, 1, 9, 2, 2, 8, 7, 1], strict=True))
    chunker = chunking.Chunker(lambda batch: [lengths[s] for s in batch], size=3)
    handed = [chunker.add(slot, sentence) for slot, sentence in enumerate(sentences)]
    assert [len(chunks) for chunks in handed] == [0, 0, 0, 1, 0, 0, 0, 1, 0, 0]  # as soon as full
    chunks = [chunk for chunks in handed for chunk in chunks] + chunker.finish()
    slots = [slot for chunk in chunks for slot, _ in chunk]
    assert slots == [1, 3, 2, 0, 5, 6, 7, 4, 9, 8]  # windows [0..3], [4..7], [8, 9]
    assert all(sentences[slot] == text for chunk in chunks for slot, text in chunk)
    assert [len(chunk) for chunk in chunks] == [3, 3, 3, 1] and chunker.chunks == 4


def test_restoring_a_state_forgets_what_came_after(monkeypatch):
    monkeypatch.setattr(chunking.defaults, "CHUNK_SORT_WINDOW", 2)
    chunker = chunking.Chunker(chunking.character_lengths, size=2)
    chunker.add(0, "aaa")
    state = chunker.state()
    assert chunker.add(1, "b") == [[(1, "b"), (0, "aaa")]]
    chunker.add(2, "cc")
    chunker.restore(state)
    assert chunker.chunks == 0
    assert chunker.add(1, "dd") == [[(1, "dd"), (0, "aaa")]]
    assert chunker.finish() == [] and chunker.chunks == 1


def test_lengths_come_from_the_bundle_tokenizer_or_else_characters(tmp_path):
    sentences = ["Hello.", "Where is the railway station, please?"]
    tokens = chunking.source_lengths(Settings())(sentences)  # the demo bundle's source.spm
    assert tokens[0] < tokens[1] < len(sentences[1])
    assert chunking.source_lengths(Settings(bundle=str(tmp_path)))(sentences) == [len(s) for s in sentences]


@pytest.mark.parametrize("tokenizer", [None, "not JSON"])
def test_a_bundle_whose_tokenizer_file_is_missing_or_malformed_counts_characters(tmp_path, tokenizer):
    bundle = tmp_path / "bundle"
    shutil.copytree(default_bundle_dir(), bundle)
    source = read_manifest(bundle).tokenizer_file("source")
    if tokenizer is None:
        source.unlink()
    else:
        source.write_text(tokenizer, encoding="utf-8")
    sentences = ["Hello.", "Where is the railway station, please?"]
    assert chunking.source_lengths(Settings(bundle=str(bundle)))(sentences) == [len(s) for s in sentences]
