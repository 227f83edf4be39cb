"""Task messages are untrusted input: anyone who can write to Redis can send one.

A translate_chunk message is checked before anything is done with it: its shape (three
positional arguments: a job id of the allowed form, a chunk number, a list of [slot,
sentence] pairs), then its ranges against the stored job (the chunk and every slot must be
the job's, no slot twice), then its pairs against the chunk the job stored at submit (a
forged sentence is never translated into a real slot, nor charged to another chunk's lease
and strikes). A message that fails is dropped with one log line and recorded in the orphan
list (`transqueue jobs` counts them); it is never requeued, so it cannot loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeGuard

from store.jobstore import JobInfo
from store.keys import BadName, check_name, quoted


class BadMessage(ValueError):
    """A task message that transqueue did not send, or that does not fit its job."""


@dataclass(frozen=True)
class ChunkMessage:
    """A well-formed translate_chunk message."""

    job_id: str
    chunk: int
    pairs: list[tuple[int, str]]


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_arguments(args: Sequence[object], kwargs: Mapping[str, object]) -> ChunkMessage:
    """Check a translate_chunk message's arguments: exactly a job id, a chunk number and
    its items, by position (as transqueue sends them), then their shape (`parse_chunk`);
    BadMessage says what is wrong."""
    if kwargs:
        raise BadMessage(f"keyword arguments {quoted(sorted(kwargs))}: a chunk's arguments are positional")
    if len(args) != 3:
        raise BadMessage(f"{len(args)} arguments, not 3 (a job id, a chunk number, its items)")
    return parse_chunk(*args)


def parse_chunk(job_id: object, chunk: object, items: object) -> ChunkMessage:
    """Check a translate_chunk message's shape; BadMessage says what is wrong."""
    try:
        name = check_name(job_id)
    except BadName as exc:
        raise BadMessage(str(exc)) from None
    if not _is_int(chunk) or chunk < 0:
        raise BadMessage(f"chunk number {quoted(chunk)} is not a non-negative integer")
    if not isinstance(items, list):
        raise BadMessage(f"items of chunk {chunk} are not a list")
    pairs = []
    for item in items:
        if not (isinstance(item, list | tuple) and len(item) == 2):
            raise BadMessage(f"item {quoted(item)} of chunk {chunk} is not a [slot, sentence] pair")
        slot, text = item
        if not _is_int(slot) or not isinstance(text, str):
            raise BadMessage(f"item {quoted(item)} of chunk {chunk} is not a [slot, sentence] pair")
        pairs.append((slot, text))
    return ChunkMessage(name, chunk, pairs)


def check_ranges(message: ChunkMessage, info: JobInfo) -> None:
    """BadMessage unless the chunk and every slot of `message` belong to the job `info`."""
    if message.chunk >= info.chunks:
        raise BadMessage(f"job {info.job_id} has {info.chunks} chunks, not chunk {message.chunk}")
    slots: Sequence[int] = [slot for slot, _ in message.pairs]
    outside = [slot for slot in slots if not 0 <= slot < info.total]
    if outside:
        raise BadMessage(
            f"slots {outside[:5]} of chunk {message.chunk} are outside job "
            f"{info.job_id}'s 0..{info.total - 1}"
        )
    if len(set(slots)) != len(slots):
        raise BadMessage(f"chunk {message.chunk} of job {info.job_id} names a slot twice")


def check_stored(message: ChunkMessage, stored: list[tuple[int, str]] | None) -> None:
    """BadMessage unless `message` holds exactly the pairs its job `stored` for its chunk."""
    if stored != message.pairs:
        raise BadMessage(f"chunk {message.chunk} of job {message.job_id} is not the chunk its job stored")
