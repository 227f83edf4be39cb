"""Score the demo model on its clean dev and test splits and refresh its regression set.

    python -m models.demo.evaluate

Exports models/demo/checkpoint to build/demo-full (fp32 + int8 decoders) if needed,
translates the clean dev and test splits of models.demo.split (no pair shares a
normalised side with training), and prints BLEU (`--tokenize zh`) and chrF (sacrebleu)
for both decoders on both splits, the int8/fp32 exact-match rate on test and ten test
examples. With --write it also writes
models/demo/EVAL.md and the committed regression set models/regression/demo_expected.tsv
used by tests/test_demo_model.py. Export-time only (needs the export extra).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from models.demo.split import clean_split
from models.demo.train import DEFAULT_CORPUS, DEFAULT_OUT, read_pairs

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


def _scores(outputs: list[str], pairs: list[tuple[str, str]]) -> dict[str, float]:
    import sacrebleu

    references = [[zh for _, zh in pairs]]
    return {
        "bleu": sacrebleu.corpus_bleu(outputs, references, tokenize="zh").score,
        "chrf": sacrebleu.corpus_chrf(outputs, references).score,
    }


def evaluate(corpus: Path, checkpoint: Path, bundle: Path) -> dict:
    """Translate the clean dev and test splits with both decoders; return scores and outputs."""
    from models.translator import Translator

    _export_full(checkpoint, bundle)
    split = clean_split(read_pairs(corpus))
    outputs: dict[str, list[str]] = {}
    scores: dict[str, dict[str, dict[str, float]]] = {}
    for precision in ("fp32", "int8"):
        translator = Translator(bundle, precision=precision)
        scores[precision] = {}
        for name, pairs in (("dev", split.dev), ("test", split.test)):
            texts = [result.text for result in translator.translate([en for en, _ in pairs])]
            scores[precision][name] = _scores(texts, pairs)
            if name == "test":
                outputs[precision] = texts
    same = sum(a == b for a, b in zip(outputs["fp32"], outputs["int8"], strict=True))
    return {
        "sizes": {"train": len(split.train), "dev": len(split.dev), "test": len(split.test)},
        "dropped": split.dropped,
        "scores": scores,
        "int8_exact_match": same / len(split.test),
        "test": split.test,
        "outputs": outputs,
    }


def _report(result: dict) -> str:
    scores, sizes = result["scores"], result["sizes"]
    lines = [
        "# Demo model: scores on the clean dev and test splits",
        "",
        f"Tatoeba pairs held out from training ({sizes['train']:,} pairs) with no exact or "
        "near-duplicate overlap: no dev or test pair's English or Chinese, case-folded and "
        "stripped of punctuation and whitespace, occurs in training "
        f"({result['dropped']} held-out pairs that did were dropped; see `models/demo/split.py`). "
        f"Dev: {sizes['dev']} pairs, test: {sizes['test']} pairs. sacrebleu, BLEU with "
        "`--tokenize zh`, chrF. Reproduce: `python -m models.demo.evaluate`.",
        "",
        "| decoder | test BLEU | test chrF | dev BLEU | dev chrF |",
        "| --- | --- | --- | --- | --- |",
    ]
    for precision in ("fp32", "int8"):
        test, dev = scores[precision]["test"], scores[precision]["dev"]
        lines.append(
            f"| {precision} | {test['bleu']:.1f} | {test['chrf']:.1f} "
            f"| {dev['bleu']:.1f} | {dev['chrf']:.1f} |"
        )
    lines += [
        "",
        f"int8 output identical to fp32 on {result['int8_exact_match']:.1%} of the test sentences.",
        "",
        "| English | demo model (int8) | reference |",
        "| --- | --- | --- |",
    ]
    examples = list(zip(result["test"], result["outputs"]["int8"], strict=True))
    for (en, zh), out in examples[:: len(examples) // 10][:10]:
        lines.append(f"| {en} | {out} | {zh} |")
    lines += ["", "Data: Tatoeba (tatoeba.org) via www.manythings.org/anki, CC BY 2.0 FR."]
    return "\n".join(lines) + "\n"


def write_regression(result: dict, path: Path = REGRESSION) -> None:
    """Write the first test sentences with their fp32 and int8 outputs and the floor."""
    fp32, int8 = result["outputs"]["fp32"], result["outputs"]["int8"]
    exact = sum(fp32[i] == int8[i] for i in range(REGRESSION_SIZE)) / REGRESSION_SIZE
    floor = max(0.0, round(exact - FLOOR_MARGIN, 2))
    rows = [
        "# English test sentences: Tatoeba (tatoeba.org) via www.manythings.org/anki, CC BY 2.0 FR",
        "# columns: English, fp32 output, int8 output",
        f"# int8_exact_match_floor\t{floor}",
    ]
    for index in range(REGRESSION_SIZE):
        en = result["test"][index][0]
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
