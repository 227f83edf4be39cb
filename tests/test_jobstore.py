"""store.jobstore against a real redis-server: keys, exactly-once writes, finalize, TTLs."""

from __future__ import annotations

import json
import threading
import unicodedata

import pytest
import redis

from store import defaults
from store.config import Settings
from store.jobstore import (
    CANCELLED,
    DONE,
    PARTIAL,
    QUEUED,
    RUNNING,
    CorruptRecord,
    DeadLetter,
    DocumentRecord,
    JobKeys,
    JobStore,
    NewJob,
    WindowRecord,
    longest_translation,
    tm_key,
)
from store.keys import STATS_KEY

pytest_plugins = ["distributed_support"]

FP = "fingerprint-a"


@pytest.fixture
def store(redis_server):
    redis_server.client().flushdb()
    return JobStore.from_settings(Settings(redis_url=redis_server.url, result_ttl=500, tm_ttl=900))


def make_job(store: JobStore, job_id: str = "job1", total: int = 3) -> str:
    writer = store.writer(job_id)
    writer.document(0, DocumentRecord("a.txt", "txt"))
    writer.window(0, 0, WindowRecord(tuple(range(total)), 7), "stored layout")
    writer.flush()
    store.create(
        NewJob(
            job_id=job_id,
            documents=1,
            segments=total,
            total=total,
            chunks=1,
            out="/out",
            origin="files",
        )
    )
    return job_id


def letter(slot: int) -> DeadLetter:
    return DeadLetter(slot=slot, text=f"s{slot}", reason="boom", chunk=0, deliveries=1, at=0.0)


def test_tm_key_depends_on_fingerprint_and_exact_text():
    decomposed = unicodedata.normalize("NFD", "café au lait.")
    assert tm_key(decomposed, FP) != tm_key("café au lait.", FP)  # as translate's memory
    assert tm_key("café au lait.", FP) == tm_key("café au lait.", FP)
    assert tm_key("café au lait.", FP) != tm_key("café au lait.", "other")
    assert tm_key("Hello.", FP) != tm_key("Hello!", FP)
    assert tm_key("Hello.", FP).startswith("tq:tm:")


def test_create_stores_the_job_with_ttls(store):
    make_job(store)
    info = store.info("job1")
    assert (info.state, info.total, info.documents, info.segments, info.out) == (QUEUED, 3, 1, 3, "/out")
    assert store.document("job1", 0) == DocumentRecord("a.txt", "txt", windows=1)
    assert store.window("job1", 0, 0) == WindowRecord((0, 1, 2), first_line=7)
    assert store.layout("job1", 0, 0) == "stored layout"
    keys = JobKeys("job1")
    for key in (keys.meta, keys.docs, keys.windows, keys.layouts):
        assert 0 < store.client.ttl(key) <= 500
    assert store.job_ids() == ["job1"]


def test_a_document_dropped_part_way_and_a_discarded_job_leave_nothing(store, monkeypatch):
    monkeypatch.setattr(defaults, "CHUNKS_READ_AT_ONCE", 2)
    monkeypatch.setattr(defaults, "WRITE_BATCH_BYTES", 8)
    keys, writer = JobKeys("j"), store.writer("j")
    writer.window(0, 0, WindowRecord((0,)), "w0")
    writer.chunks(0, [[(0, "A.")]])
    writer.document(0, DocumentRecord("a.txt", "txt"))
    writer.window(1, 0, WindowRecord((1, 2)), "w1")
    assert store.client.hkeys(keys.windows) == ["0:0", "1:0"]  # sent once 8 bytes wait
    writer.window(1, 1, WindowRecord((3,)), "w2")
    writer.chunks(1, [[(1, "B."), (2, "C.")], [(3, "D.")]])
    writer.drop_document(1, 2, range(1, 3))  # document 1 failed in its third window
    writer.flush()
    for key in (keys.docs, keys.windows, keys.layouts, keys.chunks):  # even if submit dies now
        assert 0 < store.client.ttl(key) <= 500
    assert store.client.hkeys(keys.windows) == store.client.hkeys(keys.layouts) == ["0:0"]
    assert list(store.chunks("j", 3)) == [(0, [[0, "A."]])]
    writer.chunks(1, [[(1, "E.")], [(2, "F.")], [(3, "G.")]])
    writer.flush()
    assert [n for n, _ in store.chunks("j", 4)] == [0, 1, 2, 3]  # read two at a time, in order
    store.discard("j")
    assert not any(store.client.exists(key) for key in keys.all())


def test_a_record_of_another_version_is_a_corrupt_record(store):
    old = json.dumps({"name": "a.txt", "fmt": "txt", "slots": [0], "fields": [], "reflow": False})
    store.client.hset(JobKeys("old").docs, "0", old)
    with pytest.raises(CorruptRecord, match="tq:job:old:docs field 0 is not a record of this transqueue"):
        store.document("old", 0)
    store.client.hset(JobKeys("old").windows, "0:0", "[0, 1]")
    with pytest.raises(CorruptRecord, match="tq:job:old:windows field 0:0"):
        store.window("old", 0, 0)


def test_each_slot_counts_once_and_the_last_write_finalizes(store):
    make_job(store)
    first = store.record("job1", 0, "s0", "t0", fingerprint=FP, hit=False)
    again = store.record("job1", 0, "s0", "other", fingerprint=FP, hit=False)
    assert (first.written, first.finalized) == (True, False)
    assert (again.written, again.finalized) == (False, False)
    assert store.info("job1").state == RUNNING
    store.record("job1", 1, "s1", "t1", fingerprint=FP, hit=True)
    last = store.record("job1", 2, "s2", "t2", fingerprint=FP, hit=False)
    assert last.finalized
    info = store.info("job1")
    assert (info.state, info.done, info.hits, info.dead) == (DONE, 3, 1, 0)
    assert store.slot_states("job1", [0, 1, 2]) == ["t0", "t1", "t2"]
    assert store.client.get(tm_key("s0", FP)) == "t0"
    assert 0 < store.client.ttl(tm_key("s0", FP)) <= 900
    assert store.stats() == {"translated": 2, "hits": 1}
    # A redelivered chunk writing again after the end changes nothing.
    assert not store.record("job1", 2, "s2", "t2", fingerprint=FP, hit=False).finalized
    assert store.info("job1").done == 3


def test_each_result_and_dead_letter_keeps_the_whole_job_for_the_result_ttl(store):
    """Results expire TRANSQUEUE_RESULT_TTL after the last write: each write gives the keys it
    creates (results, capped, dead) the TTL and renews every other key of the job (strikes too)."""
    make_job(store)
    keys = JobKeys("job1")
    store.leases.strike("job1", 0)
    writes = (
        lambda: store.record("job1", 0, "s0", "t0", fingerprint=FP, hit=False, capped=True),
        lambda: store.dead_letter("job1", letter(1)),
        lambda: store.record("job1", 2, "s2", "t2", fingerprint=FP, hit=True),
    )
    for write in writes:
        for key in keys.all():  # as if the job's last write were long ago
            store.client.expire(key, 100)
        assert write().written
        existing = [key for key in keys.all() if store.client.exists(key)]
        assert {keys.meta, keys.results, keys.capped, keys.strikes} <= set(existing)
        assert {key: 100 < store.client.ttl(key) <= 500 for key in existing} == dict.fromkeys(existing, True)
    assert keys.dead in existing and store.info("job1").state == PARTIAL


def test_concurrent_writers_finalize_exactly_once(store):
    total = 200
    make_job(store, total=total)
    finalized = []

    def writer():
        for slot in range(total):  # every thread writes every slot
            w = store.record("job1", slot, f"s{slot}", f"t{slot}", fingerprint=FP, hit=False)
            if w.finalized:
                finalized.append(slot)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(finalized) == 1
    assert store.info("job1").done == total


def test_dead_letter_and_result_exclude_each_other(store):
    make_job(store, total=2)
    assert store.dead_letter("job1", letter(0)).written
    assert not store.record("job1", 0, "s0", "late", fingerprint=FP, hit=False).written
    store.record("job1", 1, "s1", "t1", fingerprint=FP, hit=False)
    assert not store.dead_letter("job1", letter(1)).written
    info = store.info("job1")
    assert (info.state, info.done, info.dead, info.finished) == (PARTIAL, 1, 1, True)
    states = store.slot_states("job1", [0, 1])
    assert states[0] == letter(0) and states[1] == "t1"
    assert store.dead_letters("job1") == {0: letter(0)}


def test_a_dead_letter_starts_a_queued_job_as_a_result_does(store):
    make_job(store, total=2)
    store.dead_letter("job1", letter(0))
    info = store.info("job1")
    assert info.state == "running" and info.started_at is not None


def test_writes_for_a_missing_job_are_refused(store):
    written = store.record("nope", 0, "s", "t", fingerprint=FP, hit=False)
    assert not written.written and not written.finalized
    assert not store.dead_letter("nope", letter(0)).written
    assert not store.client.exists(JobKeys("nope").results)


def test_a_job_without_sentences_finalizes_at_once(store):
    make_job(store, total=0)
    assert store.try_finalize("job1")
    assert not store.try_finalize("job1")
    assert store.info("job1").state == DONE


def test_cancel_stops_finalize(store):
    make_job(store, total=1)
    assert store.cancel("job1")
    assert not store.cancel("job1")
    store.record("job1", 0, "s0", "t0", fingerprint=FP, hit=False)
    assert store.info("job1").state == CANCELLED


def cancel_while_finishing(store: JobStore, job_id: str) -> dict[str, bool]:
    """Cancel a job in one thread while another writes its last slot."""
    outcome: dict[str, bool] = {}

    def cancel() -> None:
        outcome["cancelled"] = store.cancel(job_id)

    def finish() -> None:
        written = store.record(job_id, 0, "s0", "t0", fingerprint=FP, hit=False)
        outcome["finalized"] = written.finalized

    threads = [threading.Thread(target=cancel), threading.Thread(target=finish)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcome


def test_cancel_and_the_last_write_race_with_one_winner(store):
    for n in range(100):
        job_id = make_job(store, f"race{n}", total=1)
        outcome = cancel_while_finishing(store, job_id)
        assert outcome["cancelled"] != outcome["finalized"]
        assert store.info(job_id).state == (CANCELLED if outcome["cancelled"] else DONE)
    assert not store.cancel("no-such-job")
    assert store.info("no-such-job") is None


def test_fingerprint_memory_errors(store):
    make_job(store)
    assert store.claim_fingerprint("job1", FP) == FP
    assert store.claim_fingerprint("job1", "other") == FP
    store.record("job1", 0, "s0", "t0", fingerprint=FP, hit=False)
    assert store.memory(["s0", "unknown"], FP) == ["t0", None]
    assert store.memory(["s0"], "other") == [None]
    store.add_error("job1", {"chunk": 1, "error": "x", "worker": "host:1"})
    assert store.errors("job1") == [{"chunk": 1, "error": "x", "worker": "host:1"}]


def test_rate_and_eta(store):
    make_job(store, total=4)
    store.record("job1", 0, "s0", "t0", fingerprint=FP, hit=False)
    info = store.info("job1")
    assert info.rate(info.started_at) is None
    assert info.rate(info.started_at + 2) == pytest.approx(0.5)
    assert info.eta(info.started_at + 2) == pytest.approx(6.0)


def test_expired_jobs_leave_the_index(store):
    make_job(store, "a")
    make_job(store, "b")
    store.client.delete(JobKeys("a").meta)
    assert store.job_ids() == ["b"]


def test_a_missing_job_is_never_recreated(store):
    assert store.leases.start("gone", 0, [(0, "s")], "w:1", "q").state == "gone"
    assert store.claim_fingerprint("gone", FP) is None
    assert not store.client.exists(*JobKeys("gone").all())
    assert store.info("gone") is None
    make_job(store)
    store.client.delete(JobKeys("job1").meta)  # the job expires while a chunk is running
    assert store.claim_fingerprint("job1", FP) is None
    assert store.info("job1") is None


def test_a_slot_outside_the_job_is_never_written_or_counted(store):
    make_job(store, total=2)
    for slot in (2, -1, 99):
        assert not store.record("job1", slot, "s", "t", fingerprint=FP, hit=False).written
        assert not store.dead_letter("job1", letter(slot)).written
    info = store.info("job1")
    assert (info.done, info.dead, info.finished) == (0, 0, False)
    assert store.client.hlen(JobKeys("job1").results) == 0


#: Records a result or a dead letter would fail on part way (Redis keeps what a script wrote
#: before an error), and which of the two writes them.
CORRUPTIONS = {
    "a job counter is not an integer": (
        lambda client: client.hset(JobKeys("job1").meta, "done", "1.5"),
        ("result", "dead"),
    ),
    "the capped marks are not a hash": (lambda client: client.set(JobKeys("job1").capped, "x"), ("result",)),
}


@pytest.mark.parametrize(("corrupt", "refused"), CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_a_write_that_would_fail_part_way_writes_nothing(store, corrupt, refused):
    make_job(store, total=2)
    corrupt(store.client)
    keys = JobKeys("job1")
    meta = store.client.hgetall(keys.meta)
    writes = {
        "result": lambda: store.record("job1", 0, "s0", "t0", fingerprint=FP, hit=False, capped=True),
        "dead": lambda: store.dead_letter("job1", letter(1)),
    }
    for write in (writes[name] for name in refused):
        with pytest.raises(redis.ResponseError) as error:
            write()
        assert store.client.hgetall(keys.meta) == meta  # neither counted nor started
        assert not store.client.exists(keys.results, keys.dead, tm_key("s0", FP))
        assert "nothing written" in str(error.value)


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda client: client.set(STATS_KEY, "not a hash"),
        lambda client: client.hset(STATS_KEY, "dead", "many"),
    ],
    ids=["stats is not a hash", "a stats counter is not an integer"],
)
def test_corrupt_overall_stats_stop_no_job(store, corrupt):
    """The counters over all jobs are statistics: corrupt, they are left uncounted and read
    as none, and every job's results and dead letters are still written and finalize it."""
    make_job(store, total=2)
    corrupt(store.client)
    assert store.record("job1", 0, "s0", "t0", fingerprint=FP, hit=False).written
    assert store.dead_letter("job1", letter(1)).finalized
    info = store.info("job1")
    assert (info.done, info.dead, info.state) == (1, 1, "partial")
    assert "dead" not in store.stats()  # the corrupt counter neither counted nor read
    if store.client.type(STATS_KEY) == "hash":
        assert store.client.hget(STATS_KEY, "dead") == "many" and store.stats() == {"translated": 1}
    else:
        assert store.client.get(STATS_KEY) == "not a hash"


def test_a_key_that_holds_no_job_is_a_corrupt_record(store):
    store.client.set(JobKeys("str").meta, "not a hash")
    store.client.hset(JobKeys("nostate").meta, "total", "3")
    for job_id in ("str", "nostate"):
        with pytest.raises(CorruptRecord, match=f"tq:job:{job_id} does not hold a job"):
            store.info(job_id)


def test_the_index_stays_near_the_live_jobs(store):
    for n in range(5):
        make_job(store, f"old{n}")
        store.client.delete(JobKeys(f"old{n}").meta)  # expired
    store.client.zadd("tq:jobs", {"bad:name": 0})
    make_job(store, "new")  # each submit prunes the oldest entries of the index
    assert store.client.zrange("tq:jobs", 0, -1) == ["new"]
    assert store.job_ids() == ["new"]


def test_stored_bytes_that_are_not_utf8_are_corrupt_records_or_misses_never_a_failed_read(store):
    """The client writes a lone surrogate as the byte it escapes (0xff is no UTF-8)."""
    job_id = make_job(store)
    store.client.set(tm_key("s0", FP), "\udcff")
    assert store.memory(["s0"], FP) == [None]  # translated again
    store.client.hset(JobKeys(job_id).layouts, "0:0", "\udcff")
    with pytest.raises(CorruptRecord, match="layouts field 0:0 .*not UTF-8 text"):
        store.layout(job_id, 0, 0)
    store.client.hset(JobKeys(job_id).docs, "0", '{"name": "\\udcff"}')  # an escape that spells it
    with pytest.raises(CorruptRecord, match="docs field 0 .*not UTF-8 text"):
        store.document(job_id, 0)
    store.client.hset(STATS_KEY, mapping={"translated": "\udcff", "\udcff": "1", "dead": "2"})
    assert store.stats() == {"dead": 2}
    store.client.lpush("tq:orphans", '{"job": "\udcff"}')
    assert list(store.orphans()) == [] and store.orphan_count() == 1


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),  # sets a terminal's title
        ("a\rb\nc\td\x7f\x9b", "a\\rb\\nc\\td\\x7f\\x9b"),  # C0, DEL, C1 (CSI)
        ("\u202etxt.exe\u202c \u2066x\u2069", "\\u202etxt.exe\\u202c \\u2066x\\u2069"),  # bidi
        ("a\u200fb\u061cc\u2028d", "a\\u200fb\\u061cc\\u2028d"),  # bidi marks, a line separator
        ("晚安\udcff", "晚安\\udcff"),  # a byte that is not UTF-8
        ("第 1 章 a\\x1b.txt\u3000…", "第 1 章 a\\x1b.txt\u3000…"),  # ordinary text, as it is
    ],
)
def test_printable_escapes_what_a_terminal_would_obey_and_nothing_else(stored, shown):
    from store.errors import printable

    assert printable(stored) == shown


def test_a_corrupt_chunk_s_error_shows_its_stored_number_with_controls_escaped(store):
    """The stall watch logs the error (`store.leases`)."""
    store.client.hset(JobKeys("job1").chunks, "0\x1b]0;pwned\x07", "5")
    with pytest.raises(CorruptRecord, match=r"^chunk 0\\x1b\]0;pwned\\x07 of job job1 is not a list"):
        list(store.unsettled_chunks("job1"))


def test_a_translation_longer_than_the_model_writes_is_a_corrupt_record_never_read(store, monkeypatch):
    """A slot that segments repeat renders once per segment: a huge stored translation is
    refused by its stored length, and the memory's is a miss (translated again)."""
    job_id = make_job(store)
    longest = longest_translation("Hi.")
    assert longest == 4 * (
        defaults.MAX_TRANSLATION_CHARS_PER_SOURCE_CHAR * 3 + defaults.MAX_TRANSLATION_EXTRA_CHARS
    )
    store.record(job_id, 0, "Hi.", "嗨" * (longest // 3), fingerprint=FP, hit=False)  # as long as may be
    assert store.slot_states(job_id, [0, 0], ["Hi.", "Hi."]) == ["嗨" * (longest // 3)] * 2
    store.client.hset(JobKeys(job_id).results, "1", "x" * (longest + 1))  # tampered
    reads = []
    monkeypatch.setattr(store.client, "hmget", lambda *args: reads.append(args))
    with pytest.raises(CorruptRecord, match=f"^tq:job:{job_id}:results field 1 holds a translation of"):
        store.slot_states(job_id, [0, 1, 1], ["Hi.", "Hi.", "Hi."])
    assert reads == []  # refused before it was read
    monkeypatch.undo()
    assert store.slot_states(job_id, [1], ["x" * 10]) == ["x" * (longest + 1)]  # a longer sentence's may
    store.client.set(tm_key("Hi.", FP), "x" * (longest + 1))
    assert store.memory(["Hi.", "s2"], FP) == [None, None]
