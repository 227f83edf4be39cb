"""Score the demo model on its held-out dev split and refresh its regression set.

    python -m models.demo.evaluate

Exports models/demo/checkpoint to build/demo-full (fp32 + int8 decoders) if needed,
translates the dev split that models.demo.train held out (re-derived from the corpus
with the same seed), and prints BLEU and chrF (sacrebleu, `--tokenize zh`) for both
decoders, the int8/fp32 exact-match rate and ten examples. With --write it also writes
models/demo/EVAL.md and the committed regression set models/regression/demo_expected.tsv
used by tests/test_demo_model.py. Export-time only (needs the export extra).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from models.demo.train import DEFAULT_CORPUS, DEFAULT_OUT, TrainOptions, read_pairs, split_dev

FULL_BUNDLE = Path("build/demo-full")
EVAL_REPORT = Path(__file__).resolve().parent / "EVAL.md"
REGRESSION = Path(__file__).resolve().parents[1] / "regression" / "demo_expected.tsv"
REGRESSION_SIZE = 40
#: The int8 exact-match floor is the measured rate minus this margin.
FLOOR_MARGIN = 0.05


def _export_full(checkpoint: Path, bundle: Path) -> None:
    from models.builder.export import ExportOptions, export

    if not (bundle / "bundle.json").exists():
        export(str(checkpoint), bundle, ExportOptions())


def evaluate(corpus: Path, checkpoint: Path, bundle: Path) -> dict:
    """Translate the dev split with both decoders; return scores, outputs and examples."""
    import sacrebleu

    from models.translator import Translator

    _export_full(checkpoint, bundle)
    _, dev = split_dev(read_pairs(corpus), TrainOptions().dev_pairs)
    sources = [en for en, _ in dev]
    references = [zh for _, zh in dev]
    outputs = {}
    scores = {}
    for precision in ("fp32", "int8"):
        translator = Translator(bundle, precision=precision)
        outputs[precision] = [result.text for result in translator.translate(sources)]
        scores[precision] = {
            "bleu": sacrebleu.corpus_bleu(outputs[precision], [references], tokenize="zh").score,
            "chrf": sacrebleu.corpus_chrf(outputs[precision], [references]).score,
        }
    exact = sum(a == b for a, b in zip(outputs["fp32"], outputs["int8"], strict=True)) / len(dev)
    return {
        "dev_pairs": len(dev),
        "scores": scores,
        "int8_exact_match": exact,
        "dev": dev,
        "outputs": outputs,
    }


def _report(result: dict) -> str:
    scores = result["scores"]
    lines = [
        "# Demo model: scores on the held-out dev split",
        "",
        f"{result['dev_pairs']} Tatoeba pairs never seen in training "
        "(sacrebleu, BLEU with `--tokenize zh`, chrF). Reproduce: `python -m models.demo.evaluate`.",
        "",
        "| decoder | BLEU | chrF |",
        "| --- | --- | --- |",
    ]
    for precision in ("fp32", "int8"):
        lines.append(f"| {precision} | {scores[precision]['bleu']:.1f} | {scores[precision]['chrf']:.1f} |")
    lines += [
        "",
        f"int8 output identical to fp32 on {result['int8_exact_match']:.1%} of the dev sentences.",
        "",
        "| English | demo model (int8) | reference |",
        "| --- | --- | --- |",
    ]
    for (en, zh), out in list(zip(result["dev"], result["outputs"]["int8"], strict=True))[::100][:10]:
        lines.append(f"| {en} | {out} | {zh} |")
    lines += ["", "Data: Tatoeba (tatoeba.org) via www.manythings.org/anki, CC BY 2.0 FR."]
    return "\n".join(lines) + "\n"


def write_regression(result: dict, path: Path = REGRESSION) -> None:
    """Write the first dev sentences with their fp32 and int8 outputs and the floor."""
    fp32, int8 = result["outputs"]["fp32"], result["outputs"]["int8"]
    exact = sum(fp32[i] == int8[i] for i in range(REGRESSION_SIZE)) / REGRESSION_SIZE
    floor = max(0.0, round(exact - FLOOR_MARGIN, 2))
    rows = [
        "# English dev sentences: Tatoeba (tatoeba.org) via www.manythings.org/anki, CC BY 2.0 FR",
        "# columns: English, fp32 output, int8 output",
        f"# int8_exact_match_floor\t{floor}",
    ]
    for index in range(REGRESSION_SIZE):
        en = result["dev"][index][0]
        rows.append(f"{en}\t{result['outputs']['fp32'][index]}\t{result['outputs']['int8'][index]}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--bundle", type=Path, default=FULL_BUNDLE)
    parser.add_argument("--write", action="store_true", help="Write EVAL.md and the regression set.")
    args = parser.parse_args()
    result = evaluate(args.corpus, args.checkpoint, args.bundle)
    report = _report(result)
    print(report)
    print(json.dumps({"scores": result["scores"], "int8_exact_match": result["int8_exact_match"]}))
    if args.write:
        EVAL_REPORT.write_text(report, encoding="utf-8")
        write_regression(result)


if __name__ == "__main__":
    main()
