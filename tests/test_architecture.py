"""The import graph keeps the architecture: data flows producer → Redis (store) → worker →
models, the model runtime never reaches the build tools, and the runtime never loads the
export-time libraries."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cli", "producer", "store", "worker", "models")
RUNTIME = "models"  # the top-level modules of models/: what a worker loads
LAYERS = ("models.builder", "models.demo")

#: Which of our layers each layer may import (itself always).
ALLOWED = {
    "cli": {"producer", "store", "worker", RUNTIME, *LAYERS},
    "producer": {"store", RUNTIME},
    "store": {RUNTIME},
    "worker": {"store", RUNTIME},
    RUNTIME: set(),
    "models.builder": {RUNTIME},
    "models.demo": {RUNTIME, "models.builder"},
}


def layer(module: str) -> str | None:
    """The layer a dotted module name belongs to, or None for a third-party module."""
    for name in LAYERS:
        if module == name or module.startswith(name + "."):
            return name
    top = module.split(".")[0]
    return top if top in PACKAGES else None


def imports(path: Path) -> set[str]:
    """Every module `path` imports, at any depth (function-level imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def edges() -> list[tuple[str, str, str]]:
    """(file, its layer, the layer it imports) for every import across layers."""
    result = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            source = layer(module)
            for imported in imports(path):
                target = layer(imported)
                if target is not None and target != source:
                    result.append((str(path.relative_to(ROOT)), source, target))
    return result


def test_every_import_between_layers_goes_the_one_way():
    wrong = sorted({(f, s, t) for f, s, t in edges() if t not in ALLOWED[s]})
    assert not wrong, "\n".join(f"{f}: {s} must not import {t}" for f, s, t in wrong)


def test_the_store_uses_only_the_runtimes_constants_and_manifest_reader():
    # a model's queue is named from its bundle's manifest; the store never loads a model
    used = {
        module
        for path in sorted((ROOT / "store").rglob("*.py"))
        for module in imports(path)
        if layer(module) == RUNTIME and module != RUNTIME
    }
    assert {module.rsplit(".", 1)[0] if module.count(".") > 1 else module for module in used} <= {
        "models.defaults",
        "models.bundle",
    }, used


def test_the_graph_is_what_the_readme_draws():
    seen = {(s, t) for _, s, t in edges()}
    assert ("producer", "store") in seen and ("worker", "store") in seen
    assert ("worker", RUNTIME) in seen and ("cli", "producer") in seen
    assert not {("worker", "producer"), ("producer", "worker"), (RUNTIME, "models.builder")} & seen


@pytest.mark.parametrize(
    "modules",
    [
        "models.translator, worker.tasks, worker.celery, worker.metrics",
        "cli, producer.pipeline, producer.jobs, producer.scheduler, store.queues",
    ],
)
def test_the_runtime_imports_no_export_library(modules):
    code = (
        f"import sys, {modules}\n"
        "heavy = {'torch', 'transformers', 'sentencepiece', 'onnx'} & set(sys.modules)\n"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
