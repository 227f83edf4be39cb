"""Prove a bundle equal to its PyTorch MarianMTModel.

Four checks, each recorded in bundle.json:
- numeric: fp32 logits at every decoding step against PyTorch (max abs diff, cosine);
- greedy: fp32 bundle token ids identical to PyTorch greedy decoding
  (`model.generate(num_beams=1, do_sample=False)`: its argmax at every step, checked on
  its logits teacher-forced on the bundle's ids) on the regression set shipped in
  models/regression/sentences.txt;
- int8: exact-match rate and token agreement of the int8 decoder against fp32;
- tokenizer: source ids equal to MarianTokenizer's on a corpus and on hard strings,
  and detokenization equal to MarianTokenizer.decode(skip_special_tokens=True).

A failed check names the sentence and the step. Export-time only.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from models.builder import defaults
from models.builder.hub import load_model
from models.bundle import read_manifest

REGRESSION_SET = Path(__file__).resolve().parents[1] / "regression" / "sentences.txt"
HARD_STRINGS = (
    "",
    " ",
    "“Curly” ‘quotes’ and «guillemets»",
    "ＦＵＬＬ－ｗｉｄｔｈ　ｌｅｔｔｅｒｓ　１２３！",
    "emoji 😀😀 👍🏽 🇨🇳 done",
    "https://example.com/a/b?c=d&e=f#g and www.example.org",
    "12,345.67 3.14 007 1e-9 ½ ² Ⅻ",
    "control\x01\x02\x7f chars",
    "zero\u200bwidth\u200cjoin\u200d\ufeffbom",
    "tab\there\nnew line\r\nand  double   spaces ",
    "▁a literal space symbol first, and last ▁",
    "</s> inside <unk> text <pad>",
    "struck <s>$20</s> now $15, <s>old</s>",
    "東京 你好 中文 汉字",
    "naïve café résumé e\u0301",
    "clusters: Ａ\u0301 e\u0323\u0302 ｶﾞ \u1100\u1161 a\r\nb",
    "\u3000ideographic space and\u00a0nbsp",
    "ﬁ ligature ㍻ ㌀",
    "Pneumonoultramicroscopicsilicovolcanoconiosis" * 8,
    "a" * 600,
)


class ValidationError(RuntimeError):
    """A bundle failed validation; the message names the sentence and the step."""


@dataclass(frozen=True)
class ValidateOptions:
    """Thresholds of the validation; recorded in bundle.json."""

    fp32_max_abs_diff: float = defaults.FP32_MAX_DIFF
    int8_min_exact: float = defaults.INT8_MIN_EXACT
    int8_min_agreement: float = defaults.INT8_MIN_AGREEMENT
    parity_corpus: Path | None = defaults.TATOEBA_CORPUS


def regression_sentences(path: Path = REGRESSION_SET) -> list[str]:
    """The shipped regression set, one sentence a line."""
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _corpus_sentences(path: Path | None) -> list[str]:
    if path is None or not path.is_file():
        return []
    with path.open(encoding="utf-8") as handle:
        return [line.split("\t", 1)[0] for line in handle]


def _agreement(a: Sequence[int], b: Sequence[int]) -> float:
    """Share of positions where two id sequences agree, over the longer one (1.0 for two
    empty ones: they agree)."""
    if not a and not b:
        return 1.0
    return sum(x == y for x, y in zip(a, b, strict=False)) / max(len(a), len(b))


def generate_all(translator, rows: Sequence[np.ndarray]) -> list[tuple[list[int], bool]]:
    """`Translator.generate` of every id row, in order, decoded in the Translator's batches
    (rows grouped by padded length): the production path, which batching never changes."""
    from models.batching import Row, group

    outputs: list[tuple[list[int], bool]] = [([], False)] * len(rows)
    batches = group(
        [Row(number, 0, ids) for number, ids in enumerate(rows)],
        translator.max_batch,
        translator.padded_length,
    )
    for batch in batches:
        decoded = translator.generate_batch([row.ids for row in batch.rows])
        for row, output in zip(batch.rows, decoded, strict=True):
            outputs[row.sentence] = output
    return outputs


def _greedy_divergence(
    theirs: np.ndarray, got: list[int], capped: bool, banned: list[int], eos: int
) -> tuple[int, int] | None:
    """(the first step where `got` is not PyTorch's greedy choice, PyTorch's choice), or None.

    `theirs` holds PyTorch's logits teacher-forced on `got` (one row per step: one more than
    `got`, or as many when `got` stopped at its length cap). Greedy decoding picks the
    argmax over unbanned ids at every step, and a causal decoder's step depends only on the
    ids before it, so `got` is exactly what `model.generate(num_beams=1, do_sample=False)`
    yields iff every step's argmax is `got`'s id, and the step after it picks eos (unless
    `got` stopped at its length cap).
    """
    choices = theirs.copy()
    choices[:, banned] = -np.inf
    picked = choices.argmax(axis=1).tolist()
    expected = got if capped else [*got, eos]
    return next(
        ((step, a) for step, (a, b) in enumerate(zip(picked, expected, strict=False)) if a != b), None
    )


def check_greedy(model, tokenizer, fp32, sentences: Sequence[str], options: ValidateOptions):
    """Numeric and greedy parity of the fp32 bundle with PyTorch; returns a report dict.

    The bundle decodes every sentence (in batches, as it does in production); PyTorch then
    runs once per sentence, teacher-forced on the bundle's ids, which gives both its logits
    at every step (compared numerically) and its greedy choice at every step.
    """
    import torch

    prefix = fp32.manifest.config.target_lang_token
    sources = []
    for number, sentence in enumerate(sentences, 1):
        source_ids = fp32.codec.encode(sentence)
        reference_text = f"{prefix} {sentence}" if prefix and fp32.codec.prefix_ids else sentence
        reference_ids = tokenizer(reference_text).input_ids
        if source_ids.tolist() != reference_ids:
            raise ValidationError(
                f"sentence {number} ({sentence!r}): source ids differ from MarianTokenizer: "
                f"{source_ids.tolist()} != {reference_ids}"
            )
        sources.append(source_ids)
    generated = generate_all(fp32, sources)
    banned = sorted({ids[0] for ids in model.generation_config.bad_words_ids or [] if len(ids) == 1})
    banned = banned or [fp32.config.pad_token_id]
    worst_diff, worst_cos, checked = 0.0, 1.0, 0
    for number, (sentence, source_ids, (got, capped)) in enumerate(
        zip(sentences, sources, generated, strict=True), 1
    ):
        # teacher-forced on the start and every id; a row stopped at its length cap has no
        # step after its last id to check (and may fill every position)
        tokens = [fp32.config.decoder_start_token_id, *got][: len(got) + (not capped)]
        with torch.no_grad():
            theirs = (
                model(
                    input_ids=torch.tensor([source_ids.tolist()]),
                    decoder_input_ids=torch.tensor([tokens]),
                )
                .logits[0]
                .numpy()
            )
        divergence = _greedy_divergence(theirs, got, capped, banned, fp32.config.eos_token_id)
        if divergence is not None:
            step, choice = divergence
            raise ValidationError(
                f"sentence {number} ({sentence!r}): greedy ids diverge from PyTorch at step "
                f"{step}: bundle {got[step : step + 5] or 'eos'} vs PyTorch's choice {choice}"
            )
        ours = np.stack(list(fp32.step_logits(source_ids, tokens)))
        for step, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            diff = float(np.abs(a - b).max())
            cosine = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
            worst_diff, worst_cos = max(worst_diff, diff), min(worst_cos, cosine)
            if diff > options.fp32_max_abs_diff:
                raise ValidationError(
                    f"sentence {number} ({sentence!r}), step {step}: fp32 logits differ from "
                    f"PyTorch by {diff:.2e} > {options.fp32_max_abs_diff:.0e}"
                )
        checked += 1
    outputs = [got for got, _ in generated]
    report = {
        "sentences": checked,
        "greedy_identical": checked,
        "max_abs_diff": worst_diff,
        "min_cosine": worst_cos,
        "threshold": options.fp32_max_abs_diff,
    }
    return report, outputs


def check_int8(int8, sentences: Sequence[str], fp32_outputs, options: ValidateOptions) -> dict:
    """Exact-match rate and token agreement of the int8 decoder against fp32."""
    exact, agreement = 0, 0.0
    generated = generate_all(int8, [int8.codec.encode(sentence) for sentence in sentences])
    for (got, _), reference in zip(generated, fp32_outputs, strict=True):
        exact += got == reference
        agreement += _agreement(got, reference)
    report = {
        "sentences": len(sentences),
        "exact_match": exact / len(sentences),
        "token_agreement": agreement / len(sentences),
        "min_exact_match": options.int8_min_exact,
        "min_token_agreement": options.int8_min_agreement,
    }
    if report["exact_match"] < options.int8_min_exact:
        raise ValidationError(
            f"int8 decoder: exact match {report['exact_match']:.1%} with fp32 is below "
            f"--int8-min-exact {options.int8_min_exact:.1%}"
        )
    if report["token_agreement"] < options.int8_min_agreement:
        raise ValidationError(
            f"int8 decoder: token agreement {report['token_agreement']:.1%} with fp32 is below "
            f"--int8-min-agreement {options.int8_min_agreement:.1%}"
        )
    return report


def check_tokenizer(codec, tokenizer, sentences: Sequence[str], vocab_size: int) -> dict:
    """Source-id and detokenization parity of the converted tokenizer with MarianTokenizer."""
    for number, text in enumerate(sentences, 1):
        ours = [*codec.pieces_and_ids(text)[1], codec.eos_id]
        theirs = tokenizer(text).input_ids
        if ours != theirs:
            raise ValidationError(
                f"tokenizer parity, string {number} ({text[:80]!r}): ids {ours[:20]} differ "
                f"from MarianTokenizer {theirs[:20]}"
            )
    rng = random.Random(0)
    decoded = 0
    for number in range(2000):
        ids = [rng.randrange(vocab_size) for _ in range(rng.randrange(1, 30))]
        ours, theirs = codec.decode(ids), tokenizer.decode(ids, skip_special_tokens=True)
        if ours != theirs:
            raise ValidationError(
                f"detokenization parity, random sequence {number} {ids}: {ours!r} differs "
                f"from MarianTokenizer.decode {theirs!r}"
            )
        decoded += 1
    return {"source_strings": len(sentences), "decoded_sequences": decoded}


def validate(bundle_dir: Path, model_dir: Path, options: ValidateOptions) -> dict:
    """Run every check of `bundle_dir` against the checkpoint in `model_dir`; return the report."""
    import torch
    from transformers import MarianTokenizer

    from models.translator import BatchOptions, Translator

    batches = BatchOptions(max_batch=defaults.VALIDATION_MAX_BATCH)
    manifest = read_manifest(bundle_dir)
    if "fp32" not in manifest.precisions:
        validation = manifest.data.get("validation")  # null or absent: no report recorded
        skipped = isinstance(validation, dict) and validation.get("skipped")
        raise ValidationError(
            f"{bundle_dir}: this bundle ships only int8 (exported with --int8-only), and its int8 "
            "outputs are checked against its fp32 ones: "
            + (
                "exported with --skip-validation too, it was never validated; "
                if skipped
                else "it was validated at export (bundle.json records the report); "
            )
            + "export again without --int8-only to validate it here"
        )

    torch.manual_seed(0)
    model = load_model(model_dir)
    tokenizer = MarianTokenizer.from_pretrained(model_dir)
    sentences = regression_sentences()
    fp32 = Translator(bundle_dir, precision="fp32", threads=1, batching=batches, warmup=False)
    corpus = _corpus_sentences(options.parity_corpus)
    report = {
        "tokenizer": check_tokenizer(
            fp32.codec, tokenizer, [*corpus, *sentences, *HARD_STRINGS], fp32.config.vocab_size
        )
    }
    report["tokenizer"]["corpus"] = str(options.parity_corpus) if corpus else None
    # decoded whole: a sentence longer than the model's positions is split by the Translator
    whole = [
        sentence for sentence in sentences if len(fp32.codec.encode(sentence)) <= fp32.config.max_positions
    ]
    report["fp32"], outputs = check_greedy(model, tokenizer, fp32, whole, options)
    precisions = fp32.manifest.precisions
    del fp32, model  # the int8 check needs neither: free their memory first
    if "int8" in precisions:
        int8 = Translator(bundle_dir, precision="int8", threads=1, batching=batches, warmup=False)
        report["int8"] = check_int8(int8, whole, outputs, options)
    report["options"] = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(options).items()}
    return report
