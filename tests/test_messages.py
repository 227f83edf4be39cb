"""worker.messages: a translate_chunk message is checked before anything is done with it."""

from __future__ import annotations

import pytest

from store.jobstore import JobInfo
from worker.messages import BadMessage, ChunkMessage, check_ranges, parse_arguments, parse_chunk

JOB = JobInfo(job_id="abc123", state="queued", created=0.0, documents=1, segments=3, total=3, chunks=2)


def test_a_well_formed_message():
    assert parse_chunk("abc123", 1, [[0, "One."], [2, "Two."]]) == ChunkMessage(
        "abc123", 1, [(0, "One."), (2, "Two.")]
    )
    check_ranges(parse_chunk("abc123", 1, [[0, "One."], [2, "Two."]]), JOB)


@pytest.mark.parametrize(
    ("job_id", "chunk", "items", "message"),
    [
        ("abc123:docs", 0, [], "job id 'abc123:docs' is not valid"),
        (None, 0, [], "job id None"),
        ("abc123", -1, [], "chunk number -1"),
        ("abc123", True, [], "chunk number True"),
        ("abc123", "0", [], "chunk number '0'"),
        ("abc123", 0, {"0": "x"}, "not a list"),
        ("abc123", 0, [[0]], "not a \\[slot, sentence\\] pair"),
        ("abc123", 0, [["0", "x"]], "not a \\[slot, sentence\\] pair"),
        ("abc123", 0, [[0, 5]], "not a \\[slot, sentence\\] pair"),
        ("abc123", 0, [[False, "x"]], "not a \\[slot, sentence\\] pair"),
    ],
)
def test_malformed_messages_say_what_is_wrong(job_id, chunk, items, message):
    with pytest.raises(BadMessage, match=message):
        parse_chunk(job_id, chunk, items)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("abc123", 0), {}, "2 arguments, not 3"),
        (("abc123", 0, [], []), {}, "4 arguments, not 3"),
        (("abc123", 0, []), {"x": 1}, "keyword arguments \\['x'\\]"),
        ((), {"job_id": "abc123", "chunk": 0, "items": []}, "keyword arguments"),
    ],
)
def test_messages_of_another_shape(args, kwargs, message):
    with pytest.raises(BadMessage, match=message):
        parse_arguments(args, kwargs)
    assert parse_arguments(("abc123", 0, [[0, "x"]]), {}) == ChunkMessage("abc123", 0, [(0, "x")])


@pytest.mark.parametrize(
    ("chunk", "items", "message"),
    [
        (2, [[0, "x"]], "has 2 chunks, not chunk 2"),
        (0, [[3, "x"]], "slots \\[3\\] of chunk 0 are outside"),
        (0, [[-1, "x"]], "slots \\[-1\\]"),
        (0, [[1, "x"], [1, "y"]], "names a slot twice"),
    ],
)
def test_messages_that_do_not_fit_their_job(chunk, items, message):
    with pytest.raises(BadMessage, match=message):
        check_ranges(parse_chunk("abc123", chunk, items), JOB)
