"""What the benchmarks build (checkpoints, bundles, converted models), cached under build/.

Each thing lives in a directory named by a hash of the parameters that made it, so a change
of parameters builds anew and a rerun with the same ones only measures.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

#: Bumped when the way bundles are built changes, so that cached bundles are remade.
BUNDLE_VERSION = 17


def cached(work: Path, kind: str, parameters: dict) -> Path:
    """WORK/KIND-HASH, the hash over the parameters."""
    text = json.dumps(parameters, sort_keys=True)
    return work / f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def build_once(path: Path, make: Callable[[Path], None]) -> Path:
    """`path`, made by `make(staging)` into PATH.partial and renamed unless it exists already.

    A build stopped half way leaves only the .partial directory, which the next call remakes.
    """
    if not path.exists():
        staging = path.with_name(path.name + ".partial")
        if staging.exists():
            shutil.rmtree(staging)
        make(staging)
        staging.rename(path)
    return path


def bundle(work: Path, kind: str, checkpoint: Path, parameters: dict, quantize) -> Path:
    """`checkpoint` exported (not validated) with `quantize` (QuantizeOptions) into
    WORK/KIND-HASH, the hash over `parameters` (what identifies the checkpoint), the
    quantization options and `BUNDLE_VERSION`."""
    from models.builder.export import ExportOptions, export

    path = cached(work, kind, {**parameters, **quantize.as_dict(), "version": BUNDLE_VERSION})
    if not (path / "bundle.json").exists():
        export(str(checkpoint), path, ExportOptions(validate=False, quantize=quantize))
    return path


def padded_source(bundle_dir: Path, pieces: int) -> Path:
    """`bundle_dir` beside itself as BUNDLE-sourcePIECES, its source tokenizer's unigram
    model padded to `pieces` pieces (the stand-in's tiny source.spm has a few hundred; an
    opus-mt source.spm has tens of thousands, which a Translator's load parses and maps).
    The added pieces are vocab.json pieces it lacks, each scored below every existing piece,
    so they hardly change how text is cut; the saved codec, where the bundle has one, is
    saved again from the padded tokenizer, every other file is hard-linked, and the
    manifest's sha256 of the changed files are updated. For load times only: outputs may
    change."""
    bundle_dir = Path(bundle_dir).resolve()
    path = bundle_dir.with_name(f"{bundle_dir.name}-source{pieces}")

    def make(staging: Path) -> None:
        manifest = json.loads((bundle_dir / "bundle.json").read_text())
        name = manifest["tokenizer"]["source"]
        source = json.loads((bundle_dir / name).read_text(encoding="utf-8"))
        vocab = source["model"]["vocab"]
        floor = min(score for _, score in vocab) - 1.0
        held = {piece for piece, _ in vocab}
        vocab_json = json.loads((bundle_dir / manifest["tokenizer"]["vocab"]).read_text(encoding="utf-8"))
        extra = [piece for piece in vocab_json if piece not in held][: max(0, pieces - len(vocab))]
        vocab += [[piece, floor - i * 1e-4] for i, piece in enumerate(extra)]
        codec = manifest["tokenizer"].get("codec")
        staging.mkdir(parents=True)
        for file in bundle_dir.iterdir():
            if file.name not in (name, codec, "bundle.json"):
                os.link(file, staging / file.name)  # the same bytes, no copy
        (staging / name).write_text(json.dumps(source, ensure_ascii=False), encoding="utf-8")
        if codec:  # saved again from the padded source tokenizer, as an export would
            from models.builder.export import save_codec

            save_codec(staging, manifest["tokenizer"], manifest["config"])
        for changed in (name, codec) if codec else (name,):
            data = (staging / changed).read_bytes()
            manifest["files"][changed] = {
                **manifest["files"][changed],
                "sha256": hashlib.sha256(data).hexdigest(),
            }
            if "bytes" in manifest["files"][changed]:
                manifest["files"][changed]["bytes"] = len(data)
        (staging / "bundle.json").write_text(json.dumps(manifest, indent=2) + "\n")

    return build_once(path, make)


def page_in(path: Path | str) -> None:
    """Read every file under `path` (a model directory or file), so that a start-up
    measured next finds them in the page cache: a start right after other benchmarks had
    written hundreds of MB took 3.8-7.3 s instead of 0.4-0.6, the disk's time, not the
    code's."""
    path = Path(path)
    for file in [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()):
        with file.open("rb") as handle:
            while handle.read(1 << 24):
                pass


#: transqueue's packages, compiled by `compile_package`.
PACKAGES = ("cli", "models", "producer", "store", "worker")


def compile_package() -> None:
    """Compile transqueue's modules to bytecode (__pycache__, ignored by git), as `pip
    install` does for an installed package (the Dockerfile's): a process started from this
    checkout, where PYTHONDONTWRITEBYTECODE is set (as on this machine), would otherwise
    compile every module of transqueue's own at each start, 0.1 s of CPU holding the GIL
    that no installed worker spends. Start-up measurements call it first."""
    import compileall

    root = Path(__file__).resolve().parents[1]
    for package in PACKAGES:
        compileall.compile_dir(root / package, quiet=1)
