"""Translating one chunk of a job: memory lookups, translation, writes, dead letters.

A chunk is a list of (slot, sentence) pairs. Its first delivery translates the sentences
as one batch. A chunk run again after a strike (`store.leases`: a run of it died mid-chunk
or raised) translates one sentence at a time and writes each result at once, so a sentence
that kills its process is always the first unwritten one. Past the delivery cap that
sentence is moved to the job's dead letters and the rest of the chunk goes on. The cap is at
least 2 (`store.defaults.MIN_MAX_DELIVERIES`), so the delivery whose death reached it ran
one sentence at a time: the sentence blamed is the one it was translating alone, never an
innocent one of a batch that died. A chunk sent back because Redis went away counts no
strike, so its next run is a batch again. A sentence whose translation raises is
dead-lettered at once: the model is deterministic, so a retry would raise again.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from models.protocol import SentenceTranslator
from store.jobstore import DeadLetter, JobStore, Written
from store.leases import current_worker

Item = tuple[int, str]


@dataclass(frozen=True)
class ChunkOutcome:
    """What processing a chunk did."""

    translated: int
    hits: int
    dead: int
    finalized: bool


@dataclass
class _Writer:
    """Writes a chunk's results and dead letters and remembers what happened."""

    store: JobStore
    job_id: str
    chunk: int
    deliveries: int
    fingerprint: str
    translated: int = 0
    hits: int = 0
    dead: int = 0
    finalized: bool = False

    def _note(self, written: Written) -> bool:
        self.finalized |= written.finalized
        return written.written

    def result(self, item: Item, text: str, *, hit: bool, capped: bool) -> None:
        slot, source = item
        written = self.store.record(
            self.job_id, slot, source, text, fingerprint=self.fingerprint, hit=hit, capped=capped
        )
        if self._note(written):
            if hit:
                self.hits += 1
            else:
                self.translated += 1

    def dead_letter(self, item: Item, reason: str) -> None:
        slot, source = item
        letter = DeadLetter(
            slot=slot,
            text=source,
            reason=reason,
            chunk=self.chunk,
            deliveries=self.deliveries,
            at=time.time(),
        )
        if self._note(self.store.dead_letter(self.job_id, letter)):
            self.dead += 1

    def error(self, message: str) -> None:
        self.store.add_error(
            self.job_id,
            {
                "at": time.time(),
                "chunk": self.chunk,
                "deliveries": self.deliveries,
                "error": message,
                "worker": current_worker(),
            },
        )

    def outcome(self) -> ChunkOutcome:
        return ChunkOutcome(self.translated, self.hits, self.dead, self.finalized)


def process_chunk(
    store: JobStore,
    translator: SentenceTranslator,
    job_id: str,
    chunk: int,
    items: Sequence[Item],
    deliveries: int,
    max_deliveries: int,
) -> ChunkOutcome:
    """Settle every slot of a chunk (result or dead letter); see the module docstring. A
    chunk whose slots are all settled already finalizes its job if nothing did (a write that
    failed part way, `store.scripts`), so that no job waits with every slot settled."""
    fingerprint = translator.fingerprint
    writer = _Writer(store, job_id, chunk, deliveries, fingerprint)
    job_fingerprint = store.claim_fingerprint(job_id, fingerprint)
    if job_fingerprint is None:  # the job expired meanwhile: there is nothing to settle
        return writer.outcome()
    if job_fingerprint != fingerprint:
        for item in items:
            writer.dead_letter(
                item,
                f"this worker's model ({fingerprint[:12]}) differs from "
                f"the one the job started with ({job_fingerprint[:12]})",
            )
        return writer.outcome()

    settled = store.settled(job_id, [slot for slot, _ in items])
    pending = [item for item, done in zip(items, settled, strict=True) if not done]
    if not pending:  # a duplicate, or a retry of writes that settled every slot but never finished the job
        writer.finalized = store.try_finalize(job_id)
        return writer.outcome()
    memory = store.memory([text for _, text in pending], fingerprint)
    todo: list[Item] = [item for item, known in zip(pending, memory, strict=True) if known is None]
    hits = [(item, known) for item, known in zip(pending, memory, strict=True) if known is not None]
    capped = store.capped_in_memory([text for (_, text), _ in hits], fingerprint)
    for (item, known), was_capped in zip(hits, capped, strict=True):
        writer.result(item, known, hit=True, capped=was_capped)

    if todo and deliveries > max_deliveries:
        writer.dead_letter(
            todo[0],
            f"its worker was lost on each of the {deliveries - 1} deliveries before this one "
            f"(cap {max_deliveries})",
        )
        todo = todo[1:]
    if deliveries == 1 and todo:
        todo = _translate_batch(translator, writer, todo)
    for item in todo:
        try:
            result = translator.translate_one(item[1])
        except Exception as exc:  # any failure of the model settles the slot
            writer.dead_letter(item, f"translation failed: {exc!r}")
        else:
            writer.result(item, result.text, hit=False, capped=result.hit_length_cap)
    return writer.outcome()


def _translate_batch(translator: SentenceTranslator, writer: _Writer, todo: list[Item]) -> list[Item]:
    """Translate `todo` as one batch; return the items left when the model raised."""
    try:
        results = iter(translator.translate([text for _, text in todo]))
    except Exception as exc:  # the model refused the batch: find the bad sentence
        return _one_by_one(writer, exc, todo)
    for n, item in enumerate(todo):
        try:
            result = next(results)
        except Exception as exc:  # the model failed mid-batch: find the bad sentence
            return _one_by_one(writer, exc, todo[n:])
        writer.result(item, result.text, hit=False, capped=result.hit_length_cap)
    return []


def _one_by_one(writer: _Writer, exc: Exception, left: list[Item]) -> list[Item]:
    writer.error(f"batch failed, retrying sentence by sentence: {exc!r}")
    return left
