"""worker.chunks.process_chunk on a real redis-server with stand-in translators."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import pytest

from store.config import Settings
from store.jobstore import PARTIAL, CorruptRecord, DeadLetter, JobKeys, JobStore, NewJob
from worker.chunks import process_chunk

pytest_plugins = ["distributed_support"]


@dataclass(frozen=True)
class Result:
    text: str
    hit_length_cap: bool = False


class Upper:
    """Translates by upper-casing; raises on 'BAD'; records what it was asked."""

    fingerprint = "upper"

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.singles: list[str] = []

    def translate(self, sentences):
        batch = list(sentences)
        self.batches.append(batch)
        for sentence in batch:
            if "BAD" in sentence:
                raise RuntimeError("bad sentence")
            yield Result(sentence.upper(), hit_length_cap="loop" in sentence)

    def translate_one(self, sentence):
        self.singles.append(sentence)
        if "BAD" in sentence:
            raise RuntimeError("bad sentence")
        return Result(sentence.upper(), hit_length_cap="loop" in sentence)


@pytest.fixture
def store(redis_server):
    redis_server.client().flushdb()
    return JobStore.from_settings(Settings(redis_url=redis_server.url))


def make_job(store, sentences, job_id="j"):
    store.create(
        NewJob(
            job_id=job_id,
            documents=1,
            segments=len(sentences),
            total=len(sentences),
            chunks=1,
            out="",
            origin="files",
        )
    )
    return list(enumerate(sentences))


def test_first_delivery_translates_the_batch_and_finalizes(store):
    items = make_job(store, ["a.", "b.", "c."])
    translator = Upper()
    outcome = process_chunk(store, translator, "j", 0, items, deliveries=1, max_deliveries=3)
    assert (outcome.translated, outcome.hits, outcome.dead, outcome.finalized) == (3, 0, 0, True)
    assert translator.batches == [["a.", "b.", "c."]] and translator.singles == []
    assert store.slot_states("j", [0, 1, 2]) == ["A.", "B.", "C."]


def test_memory_hits_are_not_translated_again(store):
    items = make_job(store, ["a.", "b."], "first")
    process_chunk(store, Upper(), "first", 0, items, deliveries=1, max_deliveries=3)
    items = make_job(store, ["b.", "new."], "second")
    translator = Upper()
    outcome = process_chunk(store, translator, "second", 0, items, deliveries=1, max_deliveries=3)
    assert (outcome.translated, outcome.hits) == (1, 1)
    assert translator.batches == [["new."]]
    assert store.info("second").hits == 1


def test_length_cap_is_kept_with_the_result_and_in_the_memory(store):
    items = make_job(store, ["a loop.", "b.", "c loop."], "first")
    process_chunk(store, Upper(), "first", 0, items, deliveries=1, max_deliveries=3)
    assert store.capped("first", [0, 1, 2]) == [True, False, True]
    items = make_job(store, ["b.", "a loop."], "second")
    outcome = process_chunk(store, Upper(), "second", 0, items, deliveries=1, max_deliveries=3)
    assert outcome.hits == 2
    assert store.capped("second", [0, 1]) == [False, True]  # remembered with the translation


def test_a_corrupt_capped_mark_is_refused(store):
    make_job(store, ["a."])
    store.client.hset("tq:job:j:capped", "0", "yes")
    with pytest.raises(CorruptRecord, match="tq:job:j:capped"):
        store.capped("j", [0])


def test_settled_slots_are_skipped_on_redelivery(store):
    items = make_job(store, ["a.", "b."])
    store.record("j", 0, "a.", "A.", fingerprint="upper", hit=False)
    translator = Upper()
    outcome = process_chunk(store, translator, "j", 0, items, deliveries=2, max_deliveries=3)
    assert outcome.translated == 1 and outcome.finalized
    assert translator.singles == ["b."] and translator.batches == []


def test_a_raising_sentence_is_dead_lettered_and_the_rest_translated(store):
    items = make_job(store, ["a.", "a BAD one.", "c."])
    outcome = process_chunk(store, Upper(), "j", 0, items, deliveries=1, max_deliveries=3)
    assert (outcome.translated, outcome.dead, outcome.finalized) == (2, 1, True)
    states = store.slot_states("j", [0, 1, 2])
    assert states[0] == "A." and states[2] == "C."
    assert isinstance(states[1], DeadLetter) and "bad sentence" in states[1].reason
    assert store.info("j").state == PARTIAL
    assert "batch failed" in store.errors("j")[0]["error"]


def test_past_the_cap_the_first_unwritten_sentence_is_given_up(store):
    items = make_job(store, ["a.", "crasher.", "c."])
    store.record("j", 0, "a.", "A.", fingerprint="upper", hit=False)
    outcome = process_chunk(store, Upper(), "j", 0, items, deliveries=4, max_deliveries=3)
    assert (outcome.translated, outcome.dead) == (1, 1)
    letter = store.dead_letters("j")[1]
    assert letter.text == "crasher." and letter.deliveries == 4
    assert "lost on each of the 3 deliveries before this one (cap 3)" in letter.reason


def test_a_worker_with_another_model_does_not_mix_outputs(store):
    items = make_job(store, ["a."])
    store.claim_fingerprint("j", "another-model")
    outcome = process_chunk(store, Upper(), "j", 0, items, deliveries=1, max_deliveries=3)
    assert outcome.dead == 1 and outcome.translated == 0
    assert "differs" in store.dead_letters("j")[0].reason


def test_the_memory_keys_on_the_exact_sentence(store):
    composed = "café."
    decomposed = unicodedata.normalize("NFD", composed)
    process_chunk(
        store, Upper(), "first", 0, make_job(store, [composed], "first"), deliveries=1, max_deliveries=3
    )
    translator = Upper()
    outcome = process_chunk(
        store,
        translator,
        "second",
        0,
        make_job(store, [decomposed, composed], "second"),
        deliveries=1,
        max_deliveries=3,
    )
    # Like `transqueue translate`'s memory: another spelling is another sentence.
    assert (outcome.translated, outcome.hits) == (1, 1)
    assert translator.batches == [[decomposed]]


def test_a_chunk_of_an_expired_job_settles_nothing_and_recreates_nothing(store):
    items = make_job(store, ["a."])
    store.client.delete(JobKeys("j").meta)
    translator = Upper()
    outcome = process_chunk(store, translator, "j", 0, items, deliveries=1, max_deliveries=3)
    assert (outcome.translated, outcome.dead, outcome.finalized) == (0, 0, False)
    assert translator.batches == [] and store.info("j") is None
