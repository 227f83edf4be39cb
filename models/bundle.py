"""The model bundle: a directory of ONNX graphs, tokenizer files and bundle.json.

bundle.json is the manifest. It records where the model came from, the config values
the runtime needs, the sha256 of every file, the library versions used at export and
the validation results. This module reads and checks it; it imports nothing heavy, so
workers and the producer can use it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models import defaults

MANIFEST = "bundle.json"
#: A graph's weights are stored beside it, in its name plus this suffix (ONNX external data):
#: ONNX Runtime maps that file rather than parsing and copying the weights out of the graph.
EXTERNAL_DATA = ".data"
FORMAT = "transqueue-marian-onnx"
FORMAT_VERSION = 1
DEMO_BUNDLE = Path(__file__).resolve().parent / "demo" / "bundle"
#: The tokenizer files every bundle has; "codec", the saved codec, is optional.
TOKENIZER_ROLES = ("source", "target", "vocab")


class BundleError(RuntimeError):
    """A bundle is missing, corrupt or of an incompatible format."""


@dataclass(frozen=True)
class ModelConfig:
    """The model facts decoding needs, as recorded in the manifest."""

    vocab_size: int
    decoder_layers: int
    decoder_heads: int
    head_dim: int
    eos_token_id: int
    pad_token_id: int
    unk_token_id: int
    decoder_start_token_id: int
    bad_words_ids: tuple[int, ...]
    max_positions: int
    target_lang_token: str | None
    target_lang_token_id: int | None


@dataclass(frozen=True)
class Manifest:
    """A parsed bundle.json."""

    directory: Path
    data: dict[str, Any]
    config: ModelConfig

    @property
    def files(self) -> dict[str, dict[str, Any]]:
        """name → {"sha256", "bytes"} for every file of the bundle."""
        return self.data["files"]

    @property
    def precisions(self) -> tuple[str, ...]:
        """The decoder precisions this bundle ships."""
        return decoder_precisions(self.data["graphs"])

    def batch_invariant(self, precision: str) -> bool:
        """Whether the `precision` decoder computes each row independently of the batch.

        fp32 does; int8 does with the "row" scheme (per-row activation scales), not with
        the per-tensor one of older bundles, whose rows must be decoded one at a time.
        """
        return precision == "fp32" or self.data.get("quantization", {}).get("scheme") == "row"

    def cpu_independent(self, precision: str) -> bool:
        """Whether the `precision` graphs give the same bits on every x86-64 CPU with AVX2,
        with or without AVX-512 (README, "Same output on every CPU"): their attention's
        softmax is decomposed into ops that ONNX Runtime does not pick by instruction set
        (bundles exported since 2026-12-02, `models.builder.portable`), and the int8 ones
        use the row scheme, whose integer products are exact on every CPU."""
        return self.data["graphs"].get("softmax") == "decomposed" and self.batch_invariant(precision)

    def graph(self, role: str, precision: str = "fp32") -> Path:
        """Path of the "encoder" or "decoder" graph for `precision` decoding.

        Older bundles have one fp32 encoder; newer ones map precisions to encoders as they
        do decoders. int8 decoding uses the fp32 encoder where there is no int8 one.
        """
        graphs = self.data["graphs"]
        if isinstance(graphs[role], str):
            return self.directory / graphs[role]
        if role == "encoder" and precision not in graphs[role]:
            precision = "fp32"
        if precision not in graphs[role]:
            raise BundleError(
                f"{self.directory}: this bundle has no {precision} {role} "
                f"(it has {', '.join(graphs['decoder'])}); choose precision "
                f"{' or '.join(graphs['decoder'])} (--precision of translate, or TRANSQUEUE_PRECISION)"
            )
        return self.directory / graphs[role][precision]

    def files_for(self, precision: str) -> list[str]:
        """The files a Translator at `precision` loads: encoder and decoder (with their
        weights, where stored beside them), tokenizer files (and the saved codec, where the
        bundle has one: its tokenizer files are still hashed into the model key)."""
        roles = _tokenizer_roles(self.data["tokenizer"])
        graphs = [self.graph("encoder", precision).name, self.graph("decoder", precision).name]
        weights = [name + EXTERNAL_DATA for name in graphs if name + EXTERNAL_DATA in self.files]
        return [*graphs, *weights, *(self.tokenizer_file(role).name for role in roles)]

    def model_key(self, precision: str) -> str:
        """12 hex digits naming this model at `precision` as this runtime translates with
        it: the files it loads, the precision, and the runtime's decoding and tokenization
        revisions (`models.defaults`). Jobs are routed by it to the workers that translate
        exactly alike (`store.queues.model_queue`)."""
        files = self.fingerprint(*self.files_for(precision))
        identity = "\n".join((files, precision, defaults.DECODING, defaults.TOKENIZATION))
        return hashlib.sha256(identity.encode()).hexdigest()[:12]

    def tokenizer_file(self, role: str) -> Path:
        """Path of the "source", "target", "vocab" or "codec" tokenizer file."""
        return self.directory / self.data["tokenizer"][role]

    def codec_file(self) -> Path | None:
        """The codec `transqueue export` saved (`MarianCodec.save`), None in a bundle
        exported before 2026-12-02, which has none."""
        return self.tokenizer_file("codec") if "codec" in self.data["tokenizer"] else None

    def codec_inputs(self) -> set[str]:
        """The names of the files a codec is read from: the saved codec where the bundle has
        one, else the source and target tokenizers."""
        saved = self.codec_file()
        if saved is not None:
            return {saved.name}
        return {self.tokenizer_file(role).name for role in ("source", "target")}

    def fingerprint(self, *names: str) -> str:
        """A sha256 over the recorded hashes of `names` (all files when none given)."""
        digest = hashlib.sha256()
        for name in sorted(names or self.files):
            digest.update(f"{name}:{self.files[name]['sha256']}\n".encode())
        return digest.hexdigest()


def decoder_precisions(graphs: dict[str, Any]) -> tuple[str, ...]:
    """The precisions of a manifest's ``graphs`` decoder: its keys, or fp32 alone for the one
    fp32 graph path an older bundle names."""
    decoder = graphs["decoder"]
    return ("fp32",) if isinstance(decoder, str) else tuple(decoder)


def default_bundle_dir() -> Path:
    """The bundled demo model's directory (it may be absent in a bare checkout)."""
    return DEMO_BUNDLE


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _tokenizer_roles(table: dict[str, Any]) -> tuple[str, ...]:
    """The roles of a manifest's tokenizer `table`: `TOKENIZER_ROLES`, and "codec" where it has one."""
    return (*TOKENIZER_ROLES, *(["codec"] if "codec" in table else []))


def _config(data: dict[str, Any]) -> ModelConfig:
    values = dict(data)
    values["bad_words_ids"] = tuple(values["bad_words_ids"])
    return ModelConfig(**values)


def read_manifest(directory: str | Path) -> Manifest:
    """Parse `directory`/bundle.json and check its format, without hashing the files."""
    directory = Path(directory)
    path = directory / MANIFEST
    if not directory.is_dir():
        what = "not a directory" if directory.exists() else "no such directory"
        raise BundleError(f"{directory}: {what} (a bundle is a directory made by `transqueue export`)")
    if not path.is_file():
        raise BundleError(
            f"{directory}: not a transqueue model bundle (no {MANIFEST}). Make one with "
            "`transqueue export Helsinki-NLP/opus-mt-en-zh --out DIR`."
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BundleError(f"{path}: unreadable manifest: {error}") from error
    if not isinstance(data, dict):
        raise BundleError(f"{path}: not a {FORMAT} manifest (not a JSON object)")
    if data.get("format") != FORMAT:
        raise BundleError(f"{path}: not a {FORMAT} manifest (format={data.get('format')!r})")
    if data.get("format_version") != FORMAT_VERSION:
        raise BundleError(
            f"{path}: bundle format version {data.get('format_version')} is not supported "
            f"by this transqueue (it reads version {FORMAT_VERSION}); re-export the model"
        )
    _check_files(path, data)
    try:
        return Manifest(directory, data, _config(data["config"]))
    except (KeyError, TypeError) as error:
        raise BundleError(f"{path}: incomplete manifest: {error}") from error


def _check_files(path: Path, data: dict[str, Any]) -> None:
    """BundleError unless the manifest's `files` are plain names inside the bundle, each with
    a sha256, and every graph and tokenizer it names is one of them: a manifest can make the
    runtime open no file outside its bundle, nor one whose hash is not checked."""
    files, graphs, tokenizer = data.get("files"), data.get("graphs"), data.get("tokenizer")
    if not isinstance(files, dict) or not isinstance(graphs, dict) or not isinstance(tokenizer, dict):
        raise BundleError(f"{path}: incomplete manifest: it needs files, graphs and tokenizer tables")
    for name, entry in files.items():
        if name in ("", ".", "..") or "/" in name or "\\" in name or name == MANIFEST:
            raise BundleError(f"{path}: file name {name!r} is not a plain name inside the bundle")
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            raise BundleError(f"{path}: file {name!r} has no sha256")
    named = [("tokenizer " + role, tokenizer.get(role)) for role in _tokenizer_roles(tokenizer)]
    for role in ("encoder", "decoder"):
        graph = graphs.get(role)
        by_precision = graph.items() if isinstance(graph, dict) else [("", graph)]
        named += [(f"{precision} {role}".strip(), name) for precision, name in by_precision]
    for what, name in named:
        if not isinstance(name, str) or name not in files:
            raise BundleError(f"{path}: the {what} ({name!r}) is not one of the bundle's files")


def verify_files(manifest: Manifest, names: list[str] | None = None, hashes: bool = True) -> None:
    """Check that `names` (default: every file) are there and, with `hashes`, that their
    sha256 match the manifest."""
    for name in names if names is not None else list(manifest.files):
        path = manifest.directory / name
        if not path.is_file():
            raise BundleError(f"{manifest.directory}: missing bundle file {name}")
        if hashes and sha256_file(path) != manifest.files[name]["sha256"]:
            raise BundleError(
                f"{path}: sha256 does not match bundle.json; the bundle is corrupt or was "
                "modified; re-export it"
            )
