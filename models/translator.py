"""The Translator: batched greedy Marian decoding with ONNX Runtime, tokenizers and numpy only.

    translator = Translator()                       # the bundled demo model, int8
    for result in translator.translate(["Hello.", "How are you?"]):
        print(result.text, result.target_tokens, result.hit_length_cap)

Sentences are read ahead, cut into rows (`models.batching`) and decoded in batches of
rows of the same padded source length (each row padded, masked, to a multiple of
`DecodeOptions.pad_to` that depends on it alone): the encoder runs on the batch's rows of
each exact length, unpadded, and yields every decoder layer's cross K/V (zero-filled up
to the padded length), then the decoder runs one token per step for the rows still
going, on their KV cache; a row that reaches eos or its own length cap leaves the batch. A sentence translates
identically whatever it is batched with: with the fp32 decoder and with the int8 "row"
scheme every op computes each row from that row alone (tests/test_batching.py). A bundle
whose int8 decoder uses the per-tensor scheme is decoded one row at a time.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

from models import defaults
from models.batching import Batch, Row, group, padded_length, padding_mask, split_points
from models.bundle import BundleError, Manifest, ModelConfig, default_bundle_dir, read_manifest, verify_files
from models.heap import trim_heap
from models.threads import cpu_budget
from models.tokenizer import MarianCodec

_OPTIMIZATION = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


@dataclass(frozen=True)
class DecodeOptions:
    """Greedy decoding settings; part of the translation-memory fingerprint."""

    length_a: float = defaults.LENGTH_A
    length_b: int = defaults.LENGTH_B
    add_target_lang_token: bool = True
    pad_to: int = defaults.PAD_TO


@dataclass(frozen=True)
class SessionOptions:
    """ONNX Runtime session settings, shared by every sentence worker of a Translator.

    `allow_spinning` applies to the decoder's intra-op threads only (with one intra-op
    thread, the default, there are none): the decoder's runs, one a token, come one after
    another, and its threads then wait spinning rather than asleep between them; the
    encoder's pool never spins, since it would contend with the decoder's between its runs.
    """

    intra_op_threads: int = defaults.INTRA_OP_THREADS
    graph_optimization: str = defaults.GRAPH_OPTIMIZATION
    allow_spinning: bool = defaults.ALLOW_SPINNING


@dataclass(frozen=True)
class BatchOptions:
    """How rows are batched; outputs never depend on it, so it is not in the fingerprint."""

    max_batch: int = defaults.MAX_BATCH
    read_ahead: int = defaults.READ_AHEAD


@dataclass(frozen=True)
class TranslationResult:
    """One translated sentence and what it cost."""

    text: str
    source_tokens: int
    target_tokens: int
    hit_length_cap: bool
    seconds: float
    parts: int = 1


@dataclass(frozen=True)
class Decoded:
    """A decoded batch: (ids without eos, hit_length_cap) per row, and its wall time."""

    outputs: list[tuple[list[int], bool]]
    seconds: float


@functools.cache
def _register_shared_arena() -> None:
    """Register one CPU memory arena for every session of this process (ONNX Runtime's
    environment allocator). Each session otherwise grows an arena of its own to its own
    peak and keeps it: sharing one took an opus-mt-sized Translator's peak from 341 to
    314 MB, at the same speed. Called once, before any session is created."""
    memory = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
    ort.create_and_register_allocator(memory, ort.OrtArenaCfg({}))


def _codec(manifest: Manifest, config: ModelConfig, prefix_ids: tuple[int, ...], verify: bool) -> MarianCodec:
    """The bundle's codec: the one `transqueue export` saved where the bundle has one of this
    runtime's tokenization revision (`MarianCodec.load`), else built from the tokenizer
    files. The files it reads are checked first (with `verify`), so that a corrupt one is
    reported as such, not as a parse error."""
    ids = {"eos_id": config.eos_token_id, "unk_id": config.unk_token_id, "prefix_ids": prefix_ids}
    saved = manifest.codec_file()
    if saved is not None:
        if verify:
            verify_files(manifest, [saved.name])
        codec = _read_codec(manifest, MarianCodec.load, saved, **ids)
        if codec is not None:
            return codec
    tokenizers = [manifest.tokenizer_file(role) for role in ("source", "target")]
    if verify:
        verify_files(manifest, [path.name for path in tokenizers])
    return _read_codec(manifest, MarianCodec, *tokenizers, **ids)


def _read_codec(manifest: Manifest, make, *args, **kwargs):
    """`make(*args, **kwargs)`, its errors reported as the bundle's unreadable tokenizer files."""
    try:
        return make(*args, **kwargs)
    except Exception as error:  # the tokenizers library and np.load raise their own types
        raise BundleError(f"{manifest.directory}: unreadable tokenizer files: {error}") from error


def _session(path: Path, options: SessionOptions, spinning: bool) -> ort.InferenceSession:
    """A session for the graph at `path`; its intra-op threads spin only if `spinning`."""
    settings = ort.SessionOptions()
    settings.add_session_config_entry("session.use_env_allocators", "1")
    settings.graph_optimization_level = _OPTIMIZATION[options.graph_optimization]
    settings.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    settings.intra_op_num_threads = options.intra_op_threads
    settings.inter_op_num_threads = 1
    settings.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    try:
        return ort.InferenceSession(str(path), settings, providers=["CPUExecutionProvider"])
    except Exception as error:  # ORT raises its own exception types
        raise BundleError(f"{path}: ONNX Runtime cannot load this graph: {error}") from error


class DecoderCache:
    """The decoder inputs of the rows still going: cross K/V, mask and self-attention cache."""

    def __init__(self, session: ort.InferenceSession, layers: int, mask: np.ndarray, cross: list) -> None:
        self.session = session
        self.layers = layers
        self.mask = mask
        self.cross = cross
        rows, heads, _, head_dim = cross[0].shape
        empty = np.zeros((rows, heads, 0, head_dim), dtype=np.float32)
        self.past = [empty] * (2 * layers)

    def step(self, tokens: np.ndarray) -> np.ndarray:
        """Feed one token per row; return the logits [rows, vocab] and grow the cache."""
        feed = {"input_ids": tokens[:, None], "encoder_attention_mask": self.mask}
        for layer in range(self.layers):
            feed[f"past_key.{layer}"] = self.past[2 * layer]
            feed[f"past_value.{layer}"] = self.past[2 * layer + 1]
            feed[f"cross_key.{layer}"] = self.cross[2 * layer]
            feed[f"cross_value.{layer}"] = self.cross[2 * layer + 1]
        logits, *self.past = self.session.run(None, feed)
        return logits

    def keep(self, rows: np.ndarray) -> None:
        """Drop the rows where the boolean mask `rows` is False.

        The cross K/V, the largest inputs, are compacted in place (the rows kept moved to
        the front, a view of them fed from then on): copies would hold them twice.
        """
        kept = np.flatnonzero(rows)
        self.mask = self.mask[rows]
        self.cross = [_compacted(array, kept) for array in self.cross]
        self.past = [array[rows] for array in self.past]


def _compacted(array: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """The rows `kept` (increasing indices) of `array`, moved to its front in place: a view."""
    for slot, row in enumerate(kept):
        if slot != row:
            array[slot] = array[row]
    return array[: len(kept)]


class _Window:
    """Sentences read ahead: their rows, batches, and the results once batches are decoded."""

    def __init__(self, translator: Translator, sentences: list[str]) -> None:
        codec = translator.codec
        limit = translator.config.max_positions - len(codec.prefix_ids) - 1
        self.started = time.perf_counter()
        encoded = [codec.pieces_and_ids(sentence) for sentence in sentences]
        self.pieces = [pieces for pieces, _ in encoded]
        self.parts: list[list[Row]] = []
        for number, (pieces, ids) in enumerate(encoded):
            bounds = [0, *split_points(pieces, limit), len(pieces)] if pieces else [0]
            self.parts.append(
                [
                    Row(number, part, np.array([*codec.prefix_ids, *ids[a:b], codec.eos_id], dtype=np.int64))
                    for part, (a, b) in enumerate(itertools.pairwise(bounds))
                ]
            )
        rows = [row for rows in self.parts for row in rows]
        self.batches = group(rows, translator.max_batch, translator.padded_length)
        #: One callable per batch that returns it decoded (waiting for it if need be).
        self.decoded: list[Callable[[], Decoded]] = []

    def results(self, decode: Callable[[list[int]], str]) -> Iterator[TranslationResult]:
        """Each sentence's TranslationResult in order, once its batches are decoded."""
        where = {
            (row.sentence, row.part): (number, index)
            for number, batch in enumerate(self.batches)
            for index, row in enumerate(batch.rows)
        }
        for number, (pieces, rows) in enumerate(zip(self.pieces, self.parts, strict=True)):
            texts, target_tokens, capped, seconds = [], 0, False, 0.0
            for row in rows:
                batch, index = where[(number, row.part)]
                done = self.decoded[batch]()
                generated, hit_cap = done.outputs[index]
                texts.append(decode(generated))
                target_tokens += len(generated)
                capped = capped or hit_cap
                seconds += done.seconds / len(self.batches[batch].rows)
            yield TranslationResult(
                text="".join(texts),
                source_tokens=len(pieces),
                target_tokens=target_tokens,
                hit_length_cap=capped,
                seconds=seconds,
                parts=max(1, len(rows)),
            )


class Translator:
    """Translate English sentences to Chinese with a transqueue model bundle."""

    def __init__(
        self,
        bundle_dir: str | Path | None = None,
        *,
        precision: str = defaults.PRECISION,
        threads: int | None = None,
        decode: DecodeOptions = DecodeOptions(),
        session: SessionOptions = SessionOptions(),
        batching: BatchOptions = BatchOptions(),
        verify: bool = True,
        warmup: bool = True,
    ) -> None:
        """Load `bundle_dir` (default: the demo model) for `precision` decoding.

        `threads` is how many cores to use (default: this process's CPU budget); they go
        to that many batches decoded side by side on the shared sessions, each run with
        `session.intra_op_threads` ORT threads.
        """
        if precision not in defaults.PRECISIONS:
            raise ValueError(f"precision must be one of {defaults.PRECISIONS}, not {precision!r}")
        self.manifest = read_manifest(bundle_dir or default_bundle_dir())
        self.precision = precision
        self.decode_options = decode
        self.batching = batching
        self.workers = threads or cpu_budget()
        self.max_batch = batching.max_batch if self.manifest.batch_invariant(precision) else 1
        encoder_path = self.manifest.graph("encoder", precision)
        decoder_path = self.manifest.graph("decoder", precision)
        used = self.manifest.files_for(precision)
        config = self.manifest.config
        self.config = config
        lang = (config.target_lang_token_id,) if decode.add_target_lang_token else ()
        prefix_ids = tuple(i for i in lang if i is not None)
        # The codec (Python, holding the GIL), the sha256 checks and both sessions' creation
        # run side by side (hashlib and ORT release the GIL); a corrupt file is reported as
        # such, before any ORT error or tokenizer parse error.
        _register_shared_arena()
        others = [name for name in used if name not in self.manifest.codec_inputs()]
        with ThreadPoolExecutor(4, thread_name_prefix="translator-load") as pool:
            codec = pool.submit(_codec, self.manifest, config, prefix_ids, verify)
            checked = pool.submit(verify_files, self.manifest, others) if verify else None
            # only the decoder's threads may spin: its runs come one after another, while
            # a spinning encoder pool would contend with them between its own runs
            encoder = pool.submit(_session, encoder_path, session, False)
            decoder = pool.submit(_session, decoder_path, session, session.allow_spinning)
            try:
                self.codec = codec.result()
                self._encoder, self._decoder = encoder.result(), decoder.result()
            finally:
                if checked is not None:
                    checked.result()
        self._banned = np.array(sorted(set(config.bad_words_ids)), dtype=np.int64)
        settings = {
            "precision": precision,
            "decoding": defaults.DECODING,
            "tokenization": defaults.TOKENIZATION,
            **asdict(decode),
        }
        self.fingerprint = self.manifest.fingerprint(*used) + ":" + repr(sorted(settings.items()))
        if warmup:  # one encoder run and one decoder step set both sessions up
            source = self.codec.encode(defaults.WARMUP_SENTENCE)
            self.start([source]).step(np.array([config.decoder_start_token_id], dtype=np.int64))
        trim_heap()  # what loading freed: the vocabulary's JSON, the weights before prepacking

    def translate(self, sentences: Iterable[str]) -> Iterator[TranslationResult]:
        """Translate `sentences` in order, one result per sentence, as they complete.

        Up to `batching.read_ahead` sentences are read ahead and cut into batches of
        one padded source length; `threads` batches are decoded side by side, and the next
        window is started before the results of the previous one are handed out.
        """
        iterator = iter(sentences)
        pool = ThreadPoolExecutor(self.workers, thread_name_prefix="translator")
        started: deque[_Window] = deque()
        try:
            for chunk in iter(lambda: list(itertools.islice(iterator, self.batching.read_ahead)), []):
                window = _Window(self, chunk)
                window.decoded = [pool.submit(self.decode_batch, batch).result for batch in window.batches]
                started.append(window)
                if len(started) > 1:
                    yield from started.popleft().results(self.codec.decode)
            while started:
                yield from started.popleft().results(self.codec.decode)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def translate_one(self, sentence: str) -> TranslationResult:
        """Translate one sentence in this thread. Too long for the model, it is split and rejoined."""
        window = _Window(self, [sentence])
        decoded = [self.decode_batch(batch) for batch in window.batches]
        window.decoded = [lambda done=done: done for done in decoded]
        return next(window.results(self.codec.decode))

    def max_new_tokens(self, source_length: int) -> int:
        """The output length cap for a source of `source_length` ids."""
        options = self.decode_options
        return min(self.config.max_positions, int(options.length_a * source_length + options.length_b))

    def decode_batch(self, batch: Batch) -> Decoded:
        """Greedy-decode the rows of one batch."""
        started = time.perf_counter()
        outputs = self.generate_batch([row.ids for row in batch.rows])
        return Decoded(outputs, time.perf_counter() - started)

    def padded_length(self, length: int) -> int:
        """The length a row of `length` source ids is padded to, whatever its batch."""
        return padded_length(length, self.decode_options.pad_to, self.config.max_positions)

    def start(self, rows: Sequence[np.ndarray]) -> DecoderCache:
        """Encode source id rows of one padded length; their cache for step-by-step decoding.

        The encoder runs on the rows of each exact length apart, unpadded (a fifth of a
        bulk run's encoder work was padding); their cross K/V are zero-filled up to the
        padded length, where the decoder's mask hides them. ValueError if the rows'
        padded lengths differ: a row's padding must be its own.
        """
        lengths = {self.padded_length(len(row)) for row in rows}
        if len(lengths) != 1:
            raise ValueError(f"rows of one batch must share their padded length, not {sorted(lengths)}")
        padded = lengths.pop()
        mask = padding_mask([len(row) for row in rows], padded)
        by_length: dict[int, list[int]] = {}
        for number, row in enumerate(rows):
            by_length.setdefault(len(row), []).append(number)
        cross: list[np.ndarray] = []
        for length, numbers in by_length.items():
            ids = np.stack([rows[number] for number in numbers])
            parts = self._encoder.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
            if length == padded and len(numbers) == len(rows):
                cross = parts
                break
            if not cross:  # [rows, heads, padded, head_dim] each
                cross = [
                    np.zeros((len(rows), part.shape[1], padded, part.shape[3]), part.dtype) for part in parts
                ]
            for whole, part in zip(cross, parts, strict=True):
                whole[numbers, :, :length] = part
        return DecoderCache(self._decoder, self.config.decoder_layers, mask, cross)

    def step_logits(self, source_ids: np.ndarray, tokens: list[int]) -> Iterator[np.ndarray]:
        """The decoder's logits after each of `tokens` (teacher forcing), for validation; an
        int8 row-scheme decoder's are each row's divided by its activation scale (the same
        argmax: README "The int8 decoder")."""
        cache = self.start([source_ids])
        for token in tokens:
            yield cache.step(np.array([token], dtype=np.int64))[0]

    def generate(self, source_ids: np.ndarray) -> tuple[list[int], bool]:
        """Greedy-decode one source id sequence; returns (ids without eos, hit_length_cap)."""
        return self.generate_batch([source_ids])[0]

    def generate_batch(self, source_ids: Sequence[np.ndarray]) -> list[tuple[list[int], bool]]:
        """Greedy-decode rows of one padded length: (ids without eos, hit_length_cap) each.

        Each row stops at eos or at its own length cap (`max_new_tokens` of its length).
        """
        config = self.config
        count = len(source_ids)
        cache = self.start(source_ids)
        caps = np.array([self.max_new_tokens(len(ids)) for ids in source_ids])
        rows = np.arange(count)
        tokens = np.full(count, config.decoder_start_token_id, dtype=np.int64)
        generated: list[list[int]] = [[] for _ in range(count)]
        capped = [False] * count
        for step in range(1, int(caps.max(initial=0)) + 1):
            logits = cache.step(tokens)
            logits[:, self._banned] = -np.inf
            tokens = logits.argmax(axis=1)
            going = tokens != config.eos_token_id
            for row, token in zip(rows[going], tokens[going], strict=True):
                generated[row].append(int(token))
            at_cap = going & (caps[rows] == step)
            for row in rows[at_cap]:
                capped[row] = True
            going &= ~at_cap
            if not going.all():
                rows, tokens = rows[going], tokens[going]
                if not rows.size:
                    break
                cache.keep(going)
        return list(zip(generated, capped, strict=True))
