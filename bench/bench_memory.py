"""Resident memory of a Translator with a bundle the size of opus-mt-en-zh.

    python bench/bench_memory.py [--work build/opus-sized] [--record FILE]

The real opus-mt-en-zh cannot be downloaded here, so this builds a random MarianMTModel
with its exact shapes (vocab 65001, d_model 512, 6+6 layers, 8 heads, FFN 2048, tied
embeddings), exports it with `transqueue export --skip-validation` (fp32 + int8), and
then, in fresh processes, loads a Translator and translates a few sentences, reporting
the peak RSS for each precision and session setting. A worker process must stay under
512 MB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from report import publish  # noqa: E402

OPUS_SHAPES = dict(d_model=512, layers=6, heads=8, ffn_dim=2048)
OPUS_VOCAB = 65001

# VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child of this (torch-
# holding) process would report the parent's peak.
PROBE = """
import json, re, sys
from models.translator import Translator
t = Translator(sys.argv[1], precision=sys.argv[2], threads=1)
for r in t.translate(["Hello there, how are you?"] * 3):
    pass
status = open("/proc/self/status").read()
print(json.dumps({"peak_rss_mb": int(re.search(r"VmHWM:\\s+(\\d+)", status)[1]) / 1024}))
"""


def build_checkpoint(directory: Path) -> None:
    """A random opus-mt-en-zh-shaped checkpoint, with the tiny tokenizers padded to 65001."""
    import torch
    from conftest import build_tiny_marian
    from transformers import MarianMTModel

    from models.builder.marian_dir import PAD, marian_config, marian_generation_config

    build_tiny_marian(directory)
    vocab = json.loads((directory / "vocab.json").read_text())
    del vocab[PAD]
    while len(vocab) < OPUS_VOCAB - 1:
        vocab[f"▁filler{len(vocab)}"] = len(vocab)
    vocab[PAD] = len(vocab)
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    torch.manual_seed(0)
    model = MarianMTModel(marian_config(vocab, **OPUS_SHAPES)).eval()
    model.generation_config = marian_generation_config(vocab)
    model.save_pretrained(directory)


def main() -> None:
    """Build (once), export (once) and measure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "opus-sized")
    parser.add_argument("--record", type=Path)
    args = parser.parse_args()
    checkpoint, bundle = args.work / "checkpoint", args.work / "bundle"
    if not (checkpoint / "model.safetensors").exists():
        build_checkpoint(checkpoint)
    if not (bundle / "bundle.json").exists():
        from models.builder.export import ExportOptions, export, size_report

        manifest = export(str(checkpoint), bundle, ExportOptions(validate=False))
        print(size_report(bundle, manifest))
    lines = ["| decoder | peak RSS of one Translator process (MB) |", "| --- | --- |"]
    for precision in ("int8", "fp32"):
        out = subprocess.run(
            [sys.executable, "-c", PROBE, str(bundle), precision],
            check=True,
            capture_output=True,
            text=True,
            cwd=ROOT,
        ).stdout
        lines.append(f"| {precision} | {json.loads(out.splitlines()[-1])['peak_rss_mb']:.0f} |")
    publish("\n".join(lines), args.record)


if __name__ == "__main__":
    main()
