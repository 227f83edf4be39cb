"""Graphs whose results do not depend on the CPU they run on.

ONNX Runtime picks some CPU kernels by instruction set at run time (MLAS: AVX2, AVX-512,
VNNI...). Run op by op on the same inputs on an AVX-512 EPYC and on the same machine
emulating an AVX2-only one (qemu-user, `-cpu EPYC-Rome`; tests/test_portable.py), every
op of a bundle's graphs gave the same bits on both but one: `Softmax`, whose AVX-512 kernel
sums the exponentials in other partial sums than the AVX2 one from 17 inputs up, so the
last bits of an attention's weights (and then of the logits, and now and then a greedy
token) depended on the CPU of the worker that ran a sentence. MatMulInteger is the same on
both only because the row scheme keeps weights in [−64, 64] (`quantize_rows`).

`decompose_softmax` rewrites each (top-level) Softmax as ops whose ONNX Runtime CPU kernels
are not chosen by instruction set: the decoder step's as ReduceLogSumExp, Sub and Exp, the
encoder's as ReduceMax, Sub, Exp, ReduceSum and Div, each form as fast as Softmax where it
is used (README, "Same output on every CPU"). Export-time only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

#: The op types of ONNX Runtime's CPU provider known to give other bits on other x86-64
#: CPUs for the same inputs: no exported graph may hold one. (LogSoftmax shares Softmax's
#: kernels: it differs the same way, measured, though no exported graph holds one.)
CPU_DEPENDENT_OPS = frozenset({"Softmax", "LogSoftmax"})


def _opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def decompose_softmax(path: Path, *, log_sum_exp: bool) -> int:
    """Rewrite every Softmax of the graph at `path` in place, over the same axis, as
    exp(x − log Σ exp x) with `log_sum_exp` (ReduceLogSumExp, Sub, Exp: ONNX Runtime's
    ReduceLogSumExp subtracts the maximum first, so large scores do not overflow), else as
    exp(x − max x) / Σ exp(x − max x) (ReduceMax, Sub, Exp, ReduceSum, Div); returns how many
    it rewrote. Three nodes suit a decoder step's softmax over one query row (five cost its
    steps 3–8%); over an encoder's [rows, heads, length, length] scores ReduceLogSumExp's
    one exp at a time costs up to 9% of the encoder, where Exp and ReduceSum are vectorized.
    With `log_sum_exp`, a row whose every value is masked (float32's lowest), which no
    exported graph feeds, gets weights of 1 instead of 1/n. Weights stored beside the graph
    stay there (a graph over 2 GB cannot be written inline). Opset 13 and later: ValueError
    for an older one, whose Softmax flattens the axes from `axis` on."""
    model = onnx.load(str(path), load_external_data=False)
    graph = model.graph
    opset = _opset(model)
    if opset < 13 and any(node.op_type == "Softmax" for node in graph.node):
        raise ValueError(f"{path}: opset {opset}: Softmax is decomposed from opset 13 on")
    taken = {name for node in graph.node for name in (node.name, *node.input, *node.output)}
    taken |= {tensor.name for tensor in (*graph.initializer, *graph.input, *graph.output)}

    def fresh(name: str) -> str:
        unique, number = name, 1
        while unique in taken:
            unique, number = f"{name}_{number}", number + 1
        taken.add(unique)
        return unique

    def node_(op: str, inputs: list[str], output: str, name: str, axis: int | None = None) -> onnx.NodeProto:
        """A node of `op`; for a reduction over `axis`, its axes as the graph's opset takes
        them (an attribute up to opset 17, an input from 18; ReduceSum's an input from 13)."""
        if axis is None:
            return helper.make_node(op, inputs, [output], name=fresh(f"{name}/{op}"))
        if opset < (13 if op == "ReduceSum" else 18):
            return helper.make_node(op, inputs, [output], name=fresh(f"{name}/{op}"), axes=[axis])
        axes = fresh(f"{name}/axes")
        graph.initializer.append(numpy_helper.from_array(np.array([axis], dtype=np.int64), axes))
        return helper.make_node(op, [*inputs, axes], [output], name=fresh(f"{name}/{op}"))

    nodes: list[onnx.NodeProto] = []
    rewritten = 0
    for node in graph.node:
        if node.op_type != "Softmax":
            nodes.append(node)
            continue
        axis = next((attribute.i for attribute in node.attribute if attribute.name == "axis"), -1)
        x, y = node.input[0], node.output[0]
        name = node.name or "softmax"
        shifted, reduced = fresh(f"{name}/shifted"), fresh(f"{name}/reduced")
        if log_sum_exp:
            nodes += [
                node_("ReduceLogSumExp", [x], reduced, name, axis),
                node_("Sub", [x, reduced], shifted, name),
                node_("Exp", [shifted], y, name),
            ]
        else:
            exp, total = fresh(f"{name}/exp"), fresh(f"{name}/sum")
            nodes += [
                node_("ReduceMax", [x], reduced, name, axis),
                node_("Sub", [x, reduced], shifted, name),
                node_("Exp", [shifted], exp, name),
                node_("ReduceSum", [exp], total, name, axis),
                node_("Div", [exp, total], y, name),
            ]
        rewritten += 1
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.save(model, str(path))
    return rewritten


def _nodes(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.NodeProto]:
    """`nodes` and the nodes of their subgraphs (If, Loop, Scan bodies), depth first."""
    for node in nodes:
        yield node
        for attribute in node.attribute:
            subgraphs = [attribute.g] if attribute.HasField("g") else []
            for subgraph in [*subgraphs, *attribute.graphs]:
                yield from _nodes(subgraph.node)


def cpu_dependent_ops(path: Path) -> list[str]:
    """The names of the nodes of the graph at `path` (subgraphs and the model's local
    functions included, which `decompose_softmax` does not rewrite) whose op type is in
    `CPU_DEPENDENT_OPS`."""
    model = onnx.load(str(path), load_external_data=False)
    functions = (node for function in model.functions for node in _nodes(function.node))
    return [
        node.name or node.op_type
        for node in (*_nodes(model.graph.node), *functions)
        if node.op_type in CPU_DEPENDENT_OPS
    ]
