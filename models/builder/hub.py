"""Find a Marian checkpoint: a local directory, or a HuggingFace hub id downloaded once.

Hub downloads go through huggingface_hub.snapshot_download, which honours HF_HUB_OFFLINE,
HF_ENDPOINT, HF_HOME and HF_TOKEN. Export-time only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import MarianMTModel

#: Files of an opus-mt checkpoint downloaded besides its weights; everything else on the
#: hub repo (the TF and Rust copies of the weights, ONNX exports, subfolders) is skipped.
#: Exact names: huggingface_hub's patterns are fnmatch patterns, whose `*` also matches
#: across folders.
CHECKPOINT_FILES = [
    "config.json",
    "generation_config.json",
    "source.spm",
    "target.spm",
    "vocab.json",
    "target_vocab.json",  # only models with separate vocabularies have one: export refuses them
    "tokenizer_config.json",
    "special_tokens_map.json",
    "README.md",
    "LICENSE",
]
#: The weights files transformers reads, in its order of preference; one is downloaded.
WEIGHTS = ("model.safetensors", "pytorch_model.bin")
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
    weights = [name for name in WEIGHTS if (directory / name).is_file()]
    if missing or not weights:
        missing += [] if weights else [" or ".join(WEIGHTS)]
        raise SourceError(
            f"{source}: not a Marian checkpoint in the opus-mt layout; missing {', '.join(missing)}"
        )


def _json_file(directory: Path, name: str, source: str) -> object:
    try:
        return json.loads((directory / name).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise SourceError(f"{source}: {name} cannot be read as JSON ({error})") from None


def _check_spm(path: Path, source: str) -> None:
    from google.protobuf.message import DecodeError
    from sentencepiece import sentencepiece_model_pb2 as spm_model

    proto = spm_model.ModelProto()
    try:
        proto.ParseFromString(path.read_bytes())
    except (OSError, DecodeError) as error:
        raise SourceError(f"{source}: {path.name} is not a SentencePiece model ({error})") from None
    if not any(piece.type == spm_model.ModelProto.SentencePiece.UNKNOWN for piece in proto.pieces):
        raise SourceError(f"{source}: {path.name} is not a SentencePiece model (it has no <unk> piece)")


def _check_contents(directory: Path, source: str) -> None:
    """SourceError, naming the file, unless the checkpoint's config is a MarianMT model's and
    its vocabulary and SentencePiece models can be read: caught here, before any work, where
    transformers or the tokenizer conversion would fail later with a traceback."""
    config = _json_file(directory, "config.json", source)
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type != "marian":
        raise SourceError(
            f"{source}: config.json is not a MarianMT model's (model_type {model_type!r}, not 'marian')"
        )
    vocab = _json_file(directory, "vocab.json", source)
    if not isinstance(vocab, dict) or not all(
        isinstance(id_, int) and not isinstance(id_, bool) for id_ in vocab.values()
    ):
        raise SourceError(f"{source}: vocab.json is not Marian's vocabulary (an object of piece → id)")
    if (directory / "generation_config.json").is_file():  # transformers would skip it silently
        _json_file(directory, "generation_config.json", source)
    for name in ("source.spm", "target.spm"):
        _check_spm(directory / name, source)


def load_model(directory: Path) -> MarianMTModel:
    """The checkpoint in `directory` as a float32 MarianMTModel in eval mode; SourceError,
    naming the directory, when transformers cannot load its weights (a truncated or corrupt
    file raises whatever its reader raises)."""
    import torch
    from transformers import MarianMTModel

    try:
        model = MarianMTModel.from_pretrained(directory, dtype=torch.float32, attn_implementation="eager")
    except Exception as error:  # noqa: BLE001 - SafetensorError, UnpicklingError, OSError, RuntimeError...
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise SourceError(
            f"{directory}: transformers cannot load this checkpoint ({type(error).__name__}: {reason})"
        ) from error
    return model.eval()


def _weights(source: str, revision: str | None) -> list[str]:
    """The weights file to download for hub repo `source`: the first of WEIGHTS that the
    repo holds at `revision` (opus-mt repos often hold both, 300 MB each). When the repo
    cannot be listed (offline, unreachable), every name: snapshot_download then serves a
    cached snapshot, whichever it holds, or raises the error to report."""
    from huggingface_hub import list_repo_files

    try:
        held = set(list_repo_files(source, revision=revision))
    except Exception:  # noqa: BLE001 - snapshot_download below meets and reports the same failure
        return list(WEIGHTS)
    return [next((name for name in WEIGHTS if name in held), WEIGHTS[0])]


def resolve(source: str, revision: str | None = None) -> Checkpoint:
    """Return the local checkpoint for `source`, a directory or a hub id like org/name."""
    path = Path(source).expanduser()
    if path.is_dir():
        _check_layout(path, source)
        _check_contents(path, source)
        return Checkpoint(path.resolve(), str(path.resolve()), None)
    if path.exists():  # a file: a checkpoint is a directory
        raise SourceError(
            f"{source}: not a directory (a checkpoint is a directory, or a hub id like org/name)"
        )
    if source.startswith((".", "/", "~")) or source.count("/") != 1:
        raise SourceError(f"{source}: no such checkpoint directory (and not a hub id like org/name)")
    from huggingface_hub import snapshot_download

    try:
        files = [*CHECKPOINT_FILES, *_weights(source, revision)]
        directory = Path(snapshot_download(source, revision=revision, allow_patterns=files))
    except Exception as error:  # offline, unreachable endpoint, unknown repo or revision
        said = " ".join(str(error).split())  # the hub's errors run over several lines
        raise SourceError(
            f"could not download {source} from the HuggingFace hub ({type(error).__name__}: "
            f"{said}). Without hub access, download the model elsewhere (e.g. `git clone "
            f"https://huggingface.co/{source}`), copy the directory here and pass it instead: "
            f"transqueue export /path/to/{source.split('/')[-1]} --out DIR"
        ) from error
    _check_layout(directory, source)
    _check_contents(directory, source)
    return Checkpoint(directory, source, directory.name)
