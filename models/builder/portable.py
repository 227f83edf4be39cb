"""Graphs whose results do not depend on the CPU they run on.

ONNX Runtime picks some CPU kernels by instruction set at run time (MLAS: AVX2, AVX-512,
VNNI...). Run op by op on the same inputs on an AVX-512 EPYC and on the same machine
emulating an AVX2-only one (qemu-user, `-cpu EPYC-Rome`; tests/test_portable.py), every
op of a bundle's graphs gave the same bits on both but one: `Softmax`, whose AVX-512 kernel
sums the exponentials in other partial sums than the AVX2 one from 17 inputs up, so the
last bits of an attention's weights (and then of the logits, and now and then a greedy
token) depended on the CPU of the worker that ran a sentence. MatMulInteger is the same on
both only because the row scheme keeps weights in [−64, 64] (`quantize_rows`).

`decompose_softmax` rewrites each Softmax as ReduceMax, Sub, Exp, ReduceSum and Div, whose
ONNX Runtime CPU kernels are not chosen by instruction set. Export-time only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

#: The op types of ONNX Runtime's CPU provider known to give other bits on other x86-64
#: CPUs for the same inputs: no exported graph may hold one.
CPU_DEPENDENT_OPS = frozenset({"Softmax"})


def decompose_softmax(path: Path) -> int:
    """Rewrite every Softmax of the graph at `path` (weights inside it) in place as
    exp(x − max x) / Σ exp(x − max x) over the same axis; returns how many it rewrote."""
    model = onnx.load(str(path))
    graph = model.graph
    nodes: list[onnx.NodeProto] = []
    rewritten = 0
    for node in graph.node:
        if node.op_type != "Softmax":
            nodes.append(node)
            continue
        axis = next((attribute.i for attribute in node.attribute if attribute.name == "axis"), -1)
        source, target = node.input[0], node.output[0]
        name = node.name or f"softmax{rewritten}"
        axes = f"{name}/axes"
        graph.initializer.append(numpy_helper.from_array(np.array([axis], dtype=np.int64), axes))
        nodes += [
            helper.make_node("ReduceMax", [source], [f"{name}/max"], name=f"{name}/ReduceMax", axes=[axis]),
            helper.make_node("Sub", [source, f"{name}/max"], [f"{name}/shifted"], name=f"{name}/Sub"),
            helper.make_node("Exp", [f"{name}/shifted"], [f"{name}/exp"], name=f"{name}/Exp"),
            helper.make_node("ReduceSum", [f"{name}/exp", axes], [f"{name}/sum"], name=f"{name}/ReduceSum"),
            helper.make_node("Div", [f"{name}/exp", f"{name}/sum"], [target], name=f"{name}/Div"),
        ]
        rewritten += 1
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.save(model, str(path))
    return rewritten


def cpu_dependent_ops(path: Path) -> list[str]:
    """The names of the nodes of the graph at `path` whose op type is in `CPU_DEPENDENT_OPS`."""
    graph = onnx.load(str(path), load_external_data=False).graph
    return [node.name or node.op_type for node in graph.node if node.op_type in CPU_DEPENDENT_OPS]
