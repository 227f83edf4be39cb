"""The Translator: greedy Marian decoding with ONNX Runtime, tokenizers and numpy only.

    translator = Translator()                       # the bundled demo model, int8
    for result in translator.translate(["Hello.", "How are you?"]):
        print(result.text, result.target_tokens, result.hit_length_cap)

One sentence at a time: the encoder runs once and yields every decoder layer's cross
K/V; the decoder then runs one token per step on its KV cache. Sentences are never
batched together: int8 dynamic quantization picks one activation scale per tensor, so a
batched sentence's output would depend on its neighbours, and a sentence must
translate identically wherever it runs.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

from models import defaults
from models.bundle import BundleError, default_bundle_dir, read_manifest, verify_files
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


@dataclass(frozen=True)
class SessionOptions:
    """ONNX Runtime session settings, shared by every sentence worker of a Translator."""

    intra_op_threads: int = defaults.INTRA_OP_THREADS
    graph_optimization: str = defaults.GRAPH_OPTIMIZATION
    allow_spinning: bool = defaults.ALLOW_SPINNING


@dataclass(frozen=True)
class TranslationResult:
    """One translated sentence and what it cost."""

    text: str
    source_tokens: int
    target_tokens: int
    hit_length_cap: bool
    seconds: float
    parts: int = 1


def _session(path: Path, options: SessionOptions) -> ort.InferenceSession:
    settings = ort.SessionOptions()
    settings.graph_optimization_level = _OPTIMIZATION[options.graph_optimization]
    settings.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    settings.intra_op_num_threads = options.intra_op_threads
    settings.inter_op_num_threads = 1
    settings.add_session_config_entry(
        "session.intra_op.allow_spinning", "1" if options.allow_spinning else "0"
    )
    try:
        return ort.InferenceSession(str(path), settings, providers=["CPUExecutionProvider"])
    except Exception as error:  # ORT raises its own exception types
        raise BundleError(f"{path}: ONNX Runtime cannot load this graph: {error}") from error


def split_points(pieces: list[str], limit: int) -> list[int]:
    """Cut positions that split `pieces` into runs of at most `limit` pieces.

    A cut goes after sentence or clause punctuation if there is one in the last half of
    the run, else before a word start (a piece beginning with ▁), else anywhere.
    """
    cuts, start = [], 0
    while len(pieces) - start > limit:
        window = range(start + limit, start + limit // 2, -1)
        cut = next((i for i in window if pieces[i - 1].rstrip()[-1:] in ".;:,!?)]"), None)
        if cut is None:
            cut = next((i for i in window if pieces[i].startswith("▁")), start + limit)
        cuts.append(cut)
        start = cut
    return cuts


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
        verify: bool = True,
        warmup: bool = True,
    ) -> None:
        """Load `bundle_dir` (default: the demo model) for `precision` decoding.

        `threads` is how many cores to use (default: this process's CPU budget); they go
        to that many sentences decoded side by side on the shared sessions, each run
        with `session.intra_op_threads` ORT threads, which bench/ measured fastest.
        """
        if precision not in defaults.PRECISIONS:
            raise ValueError(f"precision must be one of {defaults.PRECISIONS}, not {precision!r}")
        self.manifest = read_manifest(bundle_dir or default_bundle_dir())
        self.precision = precision
        self.decode_options = decode
        self.workers = threads or cpu_budget()
        encoder_path = self.manifest.graph("encoder")
        decoder_path = self.manifest.graph("decoder", precision)
        used = [
            encoder_path.name,
            decoder_path.name,
            *(self.manifest.tokenizer_file(role).name for role in ("source", "target", "vocab")),
        ]
        if verify:
            verify_files(self.manifest, used)
        config = self.manifest.config
        self.config = config
        lang = (config.target_lang_token_id,) if decode.add_target_lang_token else ()
        self.codec = MarianCodec(
            self.manifest.tokenizer_file("source"),
            self.manifest.tokenizer_file("target"),
            self.manifest.tokenizer_file("vocab"),
            eos_id=config.eos_token_id,
            unk_id=config.unk_token_id,
            prefix_ids=tuple(i for i in lang if i is not None),
        )
        self._encoder = _session(encoder_path, session)
        self._decoder = _session(decoder_path, session)
        self._banned = np.array(sorted(set(config.bad_words_ids)), dtype=np.int64)
        settings = {"precision": precision, **asdict(decode)}
        self.fingerprint = self.manifest.fingerprint(*used) + ":" + repr(sorted(settings.items()))
        if warmup:
            self.translate_one(defaults.WARMUP_SENTENCE)

    def translate(self, sentences: Iterable[str]) -> Iterator[TranslationResult]:
        """Translate `sentences` in order, one result per sentence, as they complete.

        With several workers, up to 2 × workers sentences are read ahead and decoded side
        by side (each alone, so the output is the same as one at a time).
        """
        if self.workers == 1:
            yield from map(self.translate_one, sentences)
            return
        with ThreadPoolExecutor(self.workers, thread_name_prefix="translator") as pool:
            window: deque[Future[TranslationResult]] = deque()
            for sentence in sentences:
                window.append(pool.submit(self.translate_one, sentence))
                while window and (len(window) >= 2 * self.workers or window[0].done()):
                    yield window.popleft().result()
            while window:
                yield window.popleft().result()

    def translate_one(self, sentence: str) -> TranslationResult:
        """Translate one sentence. Too long for the model, it is split and rejoined."""
        started = time.perf_counter()
        pieces = self.codec.pieces(sentence)
        if not pieces:
            return TranslationResult("", 0, 0, False, time.perf_counter() - started)
        body = self.codec.piece_ids(pieces)
        limit = self.config.max_positions - len(self.codec.prefix_ids) - 1
        bounds = [0, *split_points(pieces, limit), len(pieces)]
        texts, target_tokens, capped = [], 0, False
        for begin, end in zip(bounds, bounds[1:], strict=False):
            ids = np.array([*self.codec.prefix_ids, *body[begin:end], self.codec.eos_id], dtype=np.int64)
            generated, hit_cap = self.generate(ids)
            texts.append(self.codec.decode(generated))
            target_tokens += len(generated)
            capped = capped or hit_cap
        return TranslationResult(
            text="".join(texts),
            source_tokens=len(pieces),
            target_tokens=target_tokens,
            hit_length_cap=capped,
            seconds=time.perf_counter() - started,
            parts=len(bounds) - 1,
        )

    def max_new_tokens(self, source_length: int) -> int:
        """The output length cap for a source of `source_length` ids."""
        options = self.decode_options
        return min(self.config.max_positions, int(options.length_a * source_length + options.length_b))

    def _encode(self, source_ids: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        input_ids = source_ids[None, :]
        mask = np.ones_like(input_ids)
        return mask, self._encoder.run(None, {"input_ids": input_ids, "attention_mask": mask})

    def _steps(self, mask: np.ndarray, cross: list[np.ndarray]):
        """A coroutine: send a token id, receive that step's logits [vocab]."""
        config = self.config
        empty = np.zeros((1, config.decoder_heads, 0, config.head_dim), dtype=np.float32)
        past = [empty] * (2 * config.decoder_layers)
        logits = None
        while True:
            token = yield logits
            feed = {"input_ids": np.array([[token]], dtype=np.int64), "encoder_attention_mask": mask}
            for layer in range(config.decoder_layers):
                feed[f"past_key.{layer}"] = past[2 * layer]
                feed[f"past_value.{layer}"] = past[2 * layer + 1]
                feed[f"cross_key.{layer}"] = cross[2 * layer]
                feed[f"cross_value.{layer}"] = cross[2 * layer + 1]
            batch_logits, *past = self._decoder.run(None, feed)
            logits = batch_logits[0]

    def step_logits(self, source_ids: np.ndarray, tokens: list[int]) -> Iterator[np.ndarray]:
        """Raw logits after each of `tokens` (teacher forcing), for validation."""
        steps = self._steps(*self._encode(source_ids))
        next(steps)
        for token in tokens:
            yield steps.send(token)

    def generate(self, source_ids: np.ndarray) -> tuple[list[int], bool]:
        """Greedy-decode one source id sequence; returns (ids without eos, hit_length_cap)."""
        config = self.config
        steps = self._steps(*self._encode(source_ids))
        next(steps)
        token = config.decoder_start_token_id
        generated: list[int] = []
        for _ in range(self.max_new_tokens(len(source_ids))):
            logits = steps.send(token)
            logits[self._banned] = -np.inf
            token = int(logits.argmax())
            if token == config.eos_token_id:
                return generated, False
            generated.append(token)
        return generated, True
