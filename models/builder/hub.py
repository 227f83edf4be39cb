"""Find a Marian checkpoint: a local directory, or a HuggingFace hub id downloaded once.

Hub downloads go through huggingface_hub.snapshot_download, which honours HF_HUB_OFFLINE,
HF_ENDPOINT, HF_HOME and HF_TOKEN. Export-time only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: Files an opus-mt checkpoint needs; everything else on the hub repo is skipped.
CHECKPOINT_PATTERNS = [
    "config.json",
    "generation_config.json",
    "source.spm",
    "target.spm",
    "vocab.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "*.safetensors",
    "pytorch_model.bin",
    "README.md",
    "LICENSE",
]
REQUIRED = ("config.json", "source.spm", "target.spm", "vocab.json")


class SourceError(RuntimeError):
    """The checkpoint cannot be found or fetched."""


@dataclass(frozen=True)
class Checkpoint:
    """A resolved checkpoint: where its files are and where they came from."""

    directory: Path
    source: str
    revision: str | None


def _check_layout(directory: Path, source: str) -> None:
    missing = [name for name in REQUIRED if not (directory / name).is_file()]
    weights = list(directory.glob("*.safetensors")) + list(directory.glob("pytorch_model.bin"))
    if missing or not weights:
        missing += [] if weights else ["model.safetensors or pytorch_model.bin"]
        raise SourceError(
            f"{source}: not a Marian checkpoint in the opus-mt layout; missing {', '.join(missing)}"
        )


def resolve(source: str, revision: str | None = None) -> Checkpoint:
    """Return the local checkpoint for `source`, a directory or a hub id like org/name."""
    path = Path(source).expanduser()
    if path.is_dir():
        _check_layout(path, source)
        return Checkpoint(path.resolve(), str(path.resolve()), None)
    if path.exists() or source.startswith((".", "/", "~")) or source.count("/") != 1:
        raise SourceError(f"{source}: no such checkpoint directory (and not a hub id like org/name)")
    from huggingface_hub import snapshot_download

    try:
        directory = Path(snapshot_download(source, revision=revision, allow_patterns=CHECKPOINT_PATTERNS))
    except Exception as error:  # offline, unreachable endpoint, unknown repo or revision
        raise SourceError(
            f"could not download {source} from the HuggingFace hub ({type(error).__name__}: "
            f"{error}). Without hub access, download the model elsewhere (e.g. `git clone "
            f"https://huggingface.co/{source}`), copy the directory here and pass it instead: "
            f"transqueue export /path/to/{source.split('/')[-1]} --out DIR"
        ) from error
    _check_layout(directory, source)
    return Checkpoint(directory, source, directory.name)
