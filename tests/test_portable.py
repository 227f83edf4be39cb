"""models.builder.portable: graphs that give the same bits on every x86-64 CPU."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from models.builder.portable import cpu_dependent_ops, decompose_softmax
from models.bundle import MANIFEST, default_bundle_dir, read_manifest
from store.config import Settings
from worker.runtime import check_bundle

ROOT = Path(__file__).resolve().parents[1]
PROBE = Path(__file__).with_name("cross_cpu_probe.py")
#: An AVX2-only CPU (AMD Zen 2) that qemu-user emulates: what an AVX-512 host is compared with.
AVX2_ONLY_CPU = "EPYC-Rome"


def _run(path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


@pytest.mark.parametrize("log_sum_exp", [True, False])
@pytest.mark.parametrize("axis", [-1, 1])
def test_a_decomposed_softmax_computes_softmax(tmp_path, axis, log_sum_exp):
    shape = [2, 3, 40]
    graph = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["y"], axis=axis, name="attention")],
        "softmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    path = tmp_path / "softmax.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    rows = np.random.default_rng(1).standard_normal(shape).astype(np.float32) * 8
    masked = (0, slice(None), slice(30, None)) if axis == -1 else (0, slice(2, None))
    rows[masked] = np.finfo(np.float32).min  # masked positions, as a padded row's
    expected = _run(path, {"x": rows})

    assert decompose_softmax(path, log_sum_exp=log_sum_exp) == 1
    assert cpu_dependent_ops(path) == []
    got = _run(path, {"x": rows})
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got.sum(axis=axis), 1.0, rtol=1e-6)
    assert not got[masked].any()


def _graph(nodes, shape, opset=17, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        list(initializers),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("log_sum_exp", [True, False])
@pytest.mark.parametrize("opset", [13, 17, 18])
def test_a_softmax_is_decomposed_in_the_graph_s_own_opset(tmp_path, opset, log_sum_exp):
    path = tmp_path / "softmax.onnx"
    onnx.save(_graph([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [2, 40, 3], opset), path)
    rows = np.random.default_rng(2).standard_normal([2, 40, 3]).astype(np.float32) * 8
    expected = _run(path, {"x": rows})

    assert decompose_softmax(path, log_sum_exp=log_sum_exp) == 1
    onnx.checker.check_model(onnx.load(path), full_check=True)
    np.testing.assert_allclose(_run(path, {"x": rows}), expected, rtol=1e-6, atol=1e-7)


def test_an_older_opset_s_softmax_is_refused(tmp_path):
    path = tmp_path / "softmax.onnx"
    onnx.save(_graph([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [2, 3, 40], 11), path)
    with pytest.raises(ValueError, match="opset 11"):
        decompose_softmax(path, log_sum_exp=True)


@pytest.mark.parametrize("log_sum_exp", [True, False])
def test_decomposed_names_do_not_collide_with_the_graph_s(tmp_path, log_sum_exp):
    nodes = [  # unnamed, and tensors already named as an unnamed one's maximum might be
        helper.make_node("Softmax", ["x"], ["softmax0/max"]),
        helper.make_node("Softmax", ["softmax0/max"], ["softmax/max"]),
        helper.make_node("Softmax", ["softmax/max"], ["y"]),
    ]
    path = tmp_path / "softmax.onnx"
    onnx.save(_graph(nodes, [2, 40]), path)
    rows = np.random.default_rng(3).standard_normal([2, 40]).astype(np.float32)
    expected = _run(path, {"x": rows})

    assert decompose_softmax(path, log_sum_exp=log_sum_exp) == 3
    np.testing.assert_allclose(_run(path, {"x": rows}), expected, rtol=1e-6, atol=1e-7)


def test_weights_stored_beside_a_graph_stay_there(tmp_path):
    weights = numpy_helper.from_array(np.eye(40, dtype=np.float32) * 3, "w")
    model = _graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Softmax", ["h"], ["y"])],
        [2, 40],
        initializers=[weights],
    )
    path = tmp_path / "softmax.onnx"
    onnx.save(model, path, save_as_external_data=True, location="softmax.data", size_threshold=0)
    rows = np.random.default_rng(4).standard_normal([2, 40]).astype(np.float32)
    expected = _run(path, {"x": rows})

    assert decompose_softmax(path, log_sum_exp=True) == 1
    stored = onnx.load(path, load_external_data=False).graph.initializer
    assert next(t for t in stored if t.name == "w").data_location == TensorProto.EXTERNAL
    np.testing.assert_allclose(_run(path, {"x": rows}), expected, rtol=1e-6, atol=1e-7)


def test_a_log_softmax_or_a_softmax_inside_a_subgraph_is_found(tmp_path):
    branch = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["t"], name="inner")],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 40])],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 40])],
    )
    flag = numpy_helper.from_array(np.array(True), "flag")
    nodes = [
        helper.make_node("If", ["flag"], ["h"], then_branch=branch, else_branch=other),
        helper.make_node("LogSoftmax", ["h"], ["y"], name="outer"),
    ]
    path = tmp_path / "graph.onnx"
    onnx.save(_graph(nodes, [2, 40], initializers=[flag]), path)

    assert sorted(cpu_dependent_ops(path)) == ["inner", "outer"]


def test_a_softmax_inside_a_local_function_is_found(tmp_path):
    """As torch.onnx's dynamo exporter may write one: decompose_softmax leaves it there."""
    function = helper.make_function(
        "local",
        "Attention",
        ["x"],
        ["y"],
        [helper.make_node("Softmax", ["x"], ["y"], name="inner")],
        [helper.make_opsetid("", 17)],
    )
    graph = helper.make_graph(
        [helper.make_node("Attention", ["x"], ["y"], domain="local")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 40])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 40])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    path = tmp_path / "graph.onnx"
    onnx.save(helper.make_model(graph, functions=[function], opset_imports=opsets), path)

    assert cpu_dependent_ops(path) == ["inner"]


def test_exported_graphs_hold_no_op_picked_by_instruction_set(tiny_bundle):
    manifest = read_manifest(tiny_bundle)
    graphs = [tiny_bundle / name for name in manifest.files if name.endswith(".onnx")]
    assert len(graphs) == 4
    for graph in graphs:
        ops = {node.op_type for node in onnx.load(graph, load_external_data=False).graph.node}
        # the decoder step's softmax as exp(x - log sum exp x), the encoder's as exp / sum
        form = {"ReduceLogSumExp"} if graph.name.startswith("decoder") else {"ReduceMax", "ReduceSum", "Div"}
        assert "Softmax" not in ops and form | {"Exp"} <= ops, graph.name
        assert cpu_dependent_ops(graph) == []
    assert manifest.data["graphs"]["softmax"] == "decomposed"
    assert manifest.cpu_independent("fp32") and manifest.cpu_independent("int8")


@pytest.fixture
def older_bundle(tiny_bundle, tmp_path) -> Path:
    """A copy of the tiny bundle whose manifest reads as exported before 2026-12-02."""
    older = tmp_path / "older"
    shutil.copytree(tiny_bundle, older)
    data = json.loads((older / MANIFEST).read_text())
    del data["graphs"]["softmax"]
    (older / MANIFEST).write_text(json.dumps(data))
    return older


def test_a_worker_is_warned_about_a_bundle_whose_outputs_depend_on_the_cpu(tiny_bundle, older_bundle):
    assert check_bundle(Settings(bundle=str(tiny_bundle), precision="int8")) == []
    older = older_bundle
    for precision in ("int8", "fp32"):
        (warning,) = check_bundle(Settings(bundle=str(older), precision=precision), hashes=False)
        assert str(older) in warning and "AVX-512" in warning and "export it again" in warning


def test_a_worker_logs_the_warning_however_it_is_started(older_bundle, monkeypatch, caplog):
    from store.config import env_settings
    from worker import tasks

    older = older_bundle
    monkeypatch.setenv("TRANSQUEUE_BUNDLE", str(older))
    env_settings.cache_clear()
    try:  # worker_init, as `transqueue worker` and `celery -A worker worker` both send it
        with caplog.at_level("WARNING", logger="worker.tasks"):
            tasks._load_the_model(sender=None)
    finally:
        env_settings.cache_clear()
    assert any(
        "AVX-512" in record.getMessage() and str(older) in record.getMessage() for record in caplog.records
    )


def test_a_solo_worker_warns_from_the_manifest_its_model_was_loaded_with(older_bundle, monkeypatch, caplog):
    import models.bundle
    import models.translator
    from store.config import env_settings
    from worker import runtime, tasks

    reads: list[Path] = []

    def read_counted(directory: Path) -> models.bundle.Manifest:
        reads.append(directory)
        return read_manifest(directory)

    monkeypatch.setattr(models.bundle, "read_manifest", read_counted)
    monkeypatch.setattr(models.translator, "read_manifest", read_counted)
    monkeypatch.setattr(runtime, "_state", {})  # no model loaded in this process yet
    monkeypatch.setenv("TRANSQUEUE_BUNDLE", str(older_bundle))
    env_settings.cache_clear()
    try:  # the solo pool loads the model in the worker's own process, on worker_init
        with caplog.at_level("WARNING", logger="worker.tasks"):
            tasks._load_the_model(sender=SimpleNamespace(pool_cls="solo"))
    finally:
        env_settings.cache_clear()
    assert any("AVX-512" in record.getMessage() for record in caplog.records)
    assert len(reads) == 1  # the Translator's: bundle.json is not read again for the warning


def _has_avx512() -> bool:
    cpuinfo = Path("/proc/cpuinfo")
    return cpuinfo.is_file() and " avx512f" in cpuinfo.read_text()


#: What the emulated CPU offers, as numpy reads it from CPUID there.
FEATURES = (
    "import numpy as np; f = (getattr(np, '_core', None) or np.core)._multiarray_umath.__cpu_features__; "
    "print(f['AVX2'] and f['FMA3'], f['AVX512F'])"
)


def _emulates_an_avx2_only_cpu() -> bool:
    """Whether qemu-user runs code as on an AVX2 and FMA CPU without AVX-512: not before
    QEMU 7.2, whose TCG had no AVX (an SSE-only CPU would be compared, not the one claimed)."""
    ran = subprocess.run(
        ["qemu-x86_64", "-cpu", AVX2_ONLY_CPU, sys.executable, "-c", FEATURES],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return ran.returncode == 0 and ran.stdout.split() == ["True", "False"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="needs qemu-user (apt-get install qemu-user)")
@pytest.mark.skipif(
    not _has_avx512(), reason="needs an AVX-512 host to compare with an emulated AVX2-only CPU"
)
def test_the_demo_bundle_gives_the_same_bits_on_an_avx2_only_cpu(tmp_path):
    if not _emulates_an_avx2_only_cpu():
        pytest.skip(f"this qemu-user does not emulate {AVX2_ONLY_CPU} with AVX2 and FMA (QEMU 7.2 on)")
    assert read_manifest(default_bundle_dir()).cpu_independent("int8")
    native, emulated = tmp_path / "native.npz", tmp_path / "emulated.npz"
    subprocess.run([sys.executable, PROBE, native], check=True, cwd=ROOT, timeout=300)
    subprocess.run(
        ["qemu-x86_64", "-cpu", AVX2_ONLY_CPU, sys.executable, PROBE, emulated],
        check=True,
        cwd=ROOT,
        timeout=600,
        stderr=subprocess.DEVNULL,  # qemu's warnings about CPU features TCG lacks
    )
    here, there = np.load(native), np.load(emulated)
    # the control: ONNX Runtime's own Softmax did run another kernel there
    assert not np.array_equal(here["softmax"], there["softmax"])
    assert sorted(here.files) == sorted(there.files) and len(here.files) == 25
    for name in here.files:
        if name != "softmax":
            assert np.array_equal(here[name], there[name]), name
