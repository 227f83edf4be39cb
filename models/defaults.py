"""Defaults of the model runtime, each documented (rq style).

Every value here can be overridden per Translator (`DecodeOptions`, `SessionOptions`)
and, for workers, through the TRANSQUEUE_* environment variables in store/defaults.py.
"""

#: Decoder precision used when none is asked for. int8 is about twice as fast on CPU
#: and its agreement with fp32 is reported in bundle.json by the export validation.
PRECISION = "int8"

#: The decoder precisions a bundle may ship and a Translator may load.
PRECISIONS = ("int8", "fp32")

#: Output length cap: at most `LENGTH_A * source_tokens + LENGTH_B` generated tokens
#: (never more than the model's max positions). A sentence that reaches it is flagged
#: with `hit_length_cap` in its result; a healthy en→zh translation needs well under
#: 2 target tokens per source token.
LENGTH_A = 2.0
LENGTH_B = 16

#: ORT intra-op threads per session run. Decoding steps are small: two sentences decoded
#: side by side with one thread each beat one sentence on two threads by about 2x
#: (bench/results/session.md), so a Translator spends its cores on sentences, not ops.
INTRA_OP_THREADS = 1

#: ONNX Runtime graph optimisation level: "disable", "basic", "extended" or "all".
GRAPH_OPTIMIZATION = "all"

#: Whether the decoder's ORT intra-op worker threads spin while waiting for work (there are
#: none with one intra-op thread, the default). Spinning lowers per-step latency of the
#: many small decoder runs but burns CPU that neighbouring worker processes could use;
#: `transqueue translate -`, one batch at a time on every core, turns it on
#: (bench/bench_session.py measures both).
ALLOW_SPINNING = False

#: Sentence encoded, and decoded one step, to warm the sessions up before the first request.
WARMUP_SENTENCE = "Hello, world."

#: Most rows (sentences, or parts of over-long ones) decoded together in one batch. Rows
#: of a batch share their padded source length (`PAD_TO`), and a row's output does not
#: depend on its neighbours, so this only trades memory for speed (bench/bench_session.py).
MAX_BATCH = 32

#: Every row's source ids are padded (masked) to a multiple of this many, so that rows of
#: nearby lengths share a batch. The padding depends on the row alone, so outputs never
#: depend on the batch; it is part of the decoding settings (and the translation-memory
#: fingerprint), since padding changes float rounding. 1 batches by exact length.
#: bench/bench_session.py measures the choice.
PAD_TO = 8

#: How many sentences `Translator.translate` reads ahead to form batches of equal source
#: length: more gives fuller batches, at the cost of the first result's latency. Memory
#: barely depends on it (ids and output tokens; cross K/V exist for the batches being
#: decoded only): 1024 decoded 999 Tatoeba sentences 5% faster than 256 (docs/benchmarks.md).
READ_AHEAD = 1024

#: The decoding scheme, part of the translation-memory fingerprint: a change to how
#: outputs are produced must change it, so that remembered translations are not reused.
DECODING = "greedy; batched by padded source length, encoded by exact length, finished rows dropped"

#: How source text becomes ids, part of the translation-memory fingerprint beside
#: `DECODING`: a change to the runtime's tokenization that can change any sentence's ids
#: must change it, since the bundle's files (and so their hashes) stay the same. Revision 2
#: (2026-12-02): the source charsmap applied by `models.charsmap` as SentencePiece applies
#: it, special tokens split out of the raw text, the unknown piece never matched.
TOKENIZATION = "marian source.spm pieces through vocab.json, revision 2"
