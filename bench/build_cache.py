"""What the benchmarks build (checkpoints, bundles, converted models), cached under build/.

Each thing lives in a directory named by a hash of the parameters that made it, so a change
of parameters builds anew and a rerun with the same ones only measures.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

#: Bumped when the way bundles are built changes, so that cached bundles are remade.
BUNDLE_VERSION = 15


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
