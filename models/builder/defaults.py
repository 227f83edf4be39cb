"""Defaults of model building (export, quantization, validation), each documented.

`transqueue export` and `transqueue validate` take each of them as an option.
"""

from __future__ import annotations

from pathlib import Path

#: Token put before every source sentence when the vocabulary has it: opus-mt-en-zh's model
#: card asks for ``>>cmn_Hans<<`` (Simplified Mandarin), id 5 in its vocabulary.
TARGET_LANG_TOKEN = ">>cmn_Hans<<"

#: The int8 decoder's quantization scheme: "row" (a scale per activation row, symmetric
#: or, after an activation function, shifted; exact int32 products: a sentence's output
#: does not depend on its batch neighbours, so the Translator may batch) or "tensor"
#: (onnxruntime dynamic quantization, one activation scale per tensor across the batch).
#: models/builder/quantize.py and quantize_rows.py describe both.
INT8_SCHEME = "row"

#: Row scheme: weights are rounded to integers in [-W, W], one scale per output channel.
#: Activations are uint8 per row, and 2·255·W must stay within int16 (32767) so that
#: AVX2's saturating u8s8 kernel sums exactly: 64 is the most that fits (2·255·64 = 32640).
ROW_WEIGHT_LEVELS = 64

#: Row scheme: int8 decoding gets an int8 encoder too (token embedding as int8 rows with a
#: scale each, every MatMul in the row scheme with one row per token). The opus-mt-sized
#: encoder drops from 222 MB to 57 MB, which is what lets a worker fit its memory target;
#: bench/results/memory.md and docs/benchmarks.md give the figures.
INT8_ENCODER = True

#: Rows the validation decodes together: small batches keep an opus-mt-sized export's memory
#: down (an fp32 batch of 32 rows at the length cap holds about 300 MB of caches).
VALIDATION_MAX_BATCH = 8

#: Validation fails if any fp32 logit differs from PyTorch's by more than this.
FP32_MAX_DIFF = 1e-3

#: Validation fails if fewer int8 outputs than this share (0..1) equal the fp32 ones.
INT8_MIN_EXACT = 0.5

#: Validation fails if int8/fp32 token agreement is lower than this (0..1).
INT8_MIN_AGREEMENT = 0.8

#: The Tatoeba en-zh corpus beside the checkout (CC BY 2.0 FR, ../shared/data/en-zh): the
#: default tokenizer-parity corpus of the validation and the demo model's training data.
TATOEBA_CORPUS = Path(__file__).resolve().parents[3] / "shared" / "data" / "en-zh" / "cmn_hans.txt"
