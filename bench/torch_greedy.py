"""PyTorch's own greedy decoding of a MarianMT checkpoint, as the benchmarks run it.

It imports torch and transformers only, never ONNX Runtime, so that a fresh process
measuring PyTorch's start-up and memory (bench_ct2.py, W3) holds nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

#: Rows per `generate` call, length-sorted, as in the #13 issue's PyTorch measurement.
BATCH = 16


def load(checkpoint: str | Path, threads: int):
    """The fp32 MarianMTModel at `checkpoint`, in eval mode, torch using `threads` threads
    (transformers' progress bars and notes silenced: they would fill the benchmark's output)."""
    import torch
    from transformers import MarianMTModel
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()
    torch.set_num_threads(threads)
    return MarianMTModel.from_pretrained(checkpoint, dtype=torch.float32).eval()


def generate(model, rows: Sequence[Sequence[int]], cap: Callable[[int], int], batch: int = BATCH) -> int:
    """Greedy-decode source id rows (each ending with eos) in length-sorted batches of
    `batch`, right-padded and masked, each batch to at most `cap(its longest row)` new
    tokens (`model.generate(num_beams=1, do_sample=False)`, without Marian's forced eos at
    the cap, as transqueue stops there); the target tokens generated, eos and padding not
    counted, as transqueue's `target_tokens`."""
    import torch

    pad, eos = model.config.pad_token_id, model.config.eos_token_id
    ordered = sorted(rows, key=len)
    tokens = 0
    for start in range(0, len(ordered), batch):
        group = ordered[start : start + batch]
        width = max(map(len, group))
        ids = torch.full((len(group), width), pad, dtype=torch.long)
        mask = torch.zeros((len(group), width), dtype=torch.long)
        for number, row in enumerate(group):
            ids[number, : len(row)] = torch.tensor(list(row), dtype=torch.long)
            mask[number, : len(row)] = 1
        with torch.inference_mode():
            output = model.generate(
                input_ids=ids,
                attention_mask=mask,
                num_beams=1,
                do_sample=False,
                max_new_tokens=cap(width),
                forced_eos_token_id=None,
            )
        generated = output[:, 1:]  # after the decoder start token
        tokens += int(((generated != pad) & (generated != eos)).sum())
    return tokens
