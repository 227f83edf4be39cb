"""The "row" int8 scheme: each row's activations get their own scale, so batching changes nothing.

onnxruntime's dynamic quantization picks one activation scale and zero point per tensor,
across the whole batch, so a sentence's int8 output depends on its batch neighbours. Here
every MatMul with a constant weight gets, for each row r (one token of one sentence), a
scale of its own, with W_q symmetric per output channel in [-W, W], in one of two forms,
each one MatMulIntegerToFloat (its GEMM subtracts the single zero point exactly in int32
and applies the weight scales in its output stage, then the row scales):

- symmetric rows, for inputs centred on zero (layer-norm outputs, attention contexts, the
  embeddings):

      scale_r = max|x_r| / 127,   q_r = round(x_r / scale_r) + 128        uint8, 1..255
      y_r     = (q_r - 128) · W_q · w_scale · scale_r

- shifted rows, for the outputs of an activation function (the FFN's second input), which
  are mostly positive and would waste half of a symmetric range. Each function has a
  floor f it never goes below (0 for ReLU, 0.2785 for swish, 0.1701 for GELU,
  `ACTIVATION_FLOORS`), so x + f ≥ 0 takes the whole uint8 range with zero point 0:

      scale_r = max(x_r + f) / 255,   q_r = round((x_r + f) / scale_r)     uint8, 0..255
      y_r     = q_r · W_q · w_scale · scale_r − f · colsum(W_q · w_scale)

  the last term is a constant vector, folded into the bias that follows.

The lm_head keeps asymmetric rows (`matmul_rows`: a scale and zero point per row, the
zero points and the bias added by one Gemm of rank 2 after MatMulIntegerToFloat), and
returns each row's logits divided by its scale, which keeps their argmax.

Symmetric rows made an opus-mt-sized decoder step 6% (32 rows) to 14% (1 row) faster and
bulk decoding 8% faster than asymmetric rows everywhere, with the same BLEU on the demo
model (README "The int8 decoder"); shifted rows replaced asymmetric ones after an
activation function (15 nodes to quantize and 6 per MatMul, where they take 6 and 1).
Either way the integer products are exact and every op computes a row from that row
alone, so each row's bits depend on that row alone, on every CPU. Exactness needs care on
AVX2 without VNNI: MLAS's u8s8 kernel sums pairs of u8·s8 products in saturating int16,
so W is kept at 2 · 255 · W ≤ 32767 (W = 64: weights in [-64, 64]). Activations are uint8
rather than int8: MLAS on AVX2 has no prepacked s8s8 kernel (measured 25-30x slower than
u8s8). Export-time only.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

#: Largest sum of two u8·s8 products that the int16 step of vpmaddubsw holds exactly.
INT16_MAX = 32767
#: uint8 activation levels.
ACTIVATION_MAX = 255
#: The zero point of symmetric rows: q = round(x / scale) + 128, in 1..255.
SYMMETRIC_ZERO = 128
#: The domain of ONNX Runtime's contrib ops (MatMulIntegerToFloat).
MICROSOFT = "com.microsoft"
#: Activation ops, and the floor each one's output never goes below (rounded up), which
#: shifted rows add: swish's minimum is -0.27846, GELU's -0.16997 (erf) or -0.17004 (tanh
#: approximation); QuickGelu, x · sigmoid(1.702 x), is covered by swish's.
ACTIVATION_FLOORS = {
    "Relu": 0.0,
    "Sigmoid": 0.0,
    "Softplus": 0.0,
    "Gelu": 0.1701,
    "FastGelu": 0.1701,
    "QuickGelu": 0.2785,
}
#: The ops inside an exported swish (x · sigmoid(x)) or GELU (0.5 · x · (1 + erf(…)) or
#: (1 + tanh(…))): a product with one of them ends the function, whose floor this is.
GATE_FLOORS = {"Sigmoid": 0.2785, "Erf": 0.1701, "Tanh": 0.1701}
#: Mish, x · tanh(softplus(x)), has a Tanh gate too, but its minimum is -0.30884.
MISH_FLOOR = 0.3089
#: Integers up to this magnitude are exact in float32.
FLOAT32_EXACT = 1 << 24


def max_exact_weight_level() -> int:
    """The largest W for which 2 · 255 · W fits int16, so every u8s8 kernel is exact."""
    return INT16_MAX // (2 * ACTIVATION_MAX)


def quantize_columns(matrix: np.ndarray, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 quantization of a [in, out] matrix with one scale per column."""
    scale = np.abs(matrix).max(axis=0) / levels
    scale[scale == 0] = 1.0
    quantized = np.clip(np.rint(matrix / scale), -levels, levels).astype(np.int8)
    return quantized, scale.astype(np.float32)


#: The constants the quantized graphs read, each added to a graph when first used.
CONSTANTS = {
    "rowq.zero": np.array([0.0], np.float32),
    "rowq.unit": np.array(1.0, np.float32),
    "rowq.mid": np.array(SYMMETRIC_ZERO, np.uint8),
    "rowq.bottom": np.array(0, np.uint8),
    "rowq.half_top": np.array([float(SYMMETRIC_ZERO - 1)], np.float32),
    "rowq.top": np.array([float(ACTIVATION_MAX)], np.float32),
    "rowq.tiny": np.array([np.finfo(np.float32).tiny], np.float32),
    # the lm_head's rows: a row scale whose reciprocal (`RowQuantizer.matmul_rows`) is finite
    "rowq.least_span": np.array([2.0**-100], np.float32),
    "rowq.flat": np.array([-1], np.int64),
}


class RowQuantizer:
    """Emits the per-row activation quantization and integer MatMuls into one graph.

    The quantized form of an activation is made once and shared by every MatMul that
    reads it (a layer's q, k and v projections read the same hidden state).
    """

    def __init__(self, graph: onnx.GraphProto, weight_levels: int) -> None:
        if not 0 < weight_levels <= max_exact_weight_level():
            raise ValueError(
                f"row weight levels must be in 1..{max_exact_weight_level()} for exact u8s8 "
                f"products, not {weight_levels}"
            )
        self.graph = graph
        self.weight_levels = weight_levels
        self._activations: dict[str, tuple[str, str, str]] = {}  # x → (uint8, scale, zero point)
        self._scaled: dict[tuple[str, float | None], tuple[str, str, str]] = {}
        self._constants: set[str] = set()

    def constant(self, name: str, value: np.ndarray | None = None) -> str:
        """`name`, a constant (`value`, or `CONSTANTS[name]`) added to the graph when first used."""
        if name not in self._constants:
            self._constants.add(name)
            self.graph.initializer.append(
                numpy_helper.from_array(CONSTANTS[name] if value is None else value, name)
            )
        return name

    def asymmetric_rows(self, x: str) -> tuple[list[onnx.NodeProto], str, str, str]:
        """(nodes, uint8 tensor, per-row scale, per-row zero point as a float) for `x` in
        asymmetric rows (the lm_head's).

        No nodes when `x` was quantized before: its tensors are reused.
        """
        if x in self._activations:
            return [], *self._activations[x]
        p = f"rowq.{len(self._activations)}."
        node = helper.make_node
        nodes = [
            node("ReduceMin", [x], [p + "min_x"], axes=[-1], keepdims=1),
            node("ReduceMax", [x], [p + "max_x"], axes=[-1], keepdims=1),
            node("Min", [p + "min_x", self.constant("rowq.zero")], [p + "low"]),
            node("Max", [p + "max_x", self.constant("rowq.zero")], [p + "high"]),
            node("Sub", [p + "high", p + "low"], [p + "span"]),
            node("Max", [p + "span", self.constant("rowq.least_span")], [p + "range"]),
            node("Div", [p + "range", self.constant("rowq.top")], [p + "scale"]),
            node("Div", [p + "low", p + "scale"], [p + "low_q"]),
            node("Neg", [p + "low_q"], [p + "minus_low_q"]),
            node("Round", [p + "minus_low_q"], [p + "zero_f"]),
            node("Cast", [p + "zero_f"], [p + "zero_u8"], to=TensorProto.UINT8),
            # QuantizeLinear per axis 0: saturate(round(x / scale) + zero), one row each
            node("Reshape", [p + "scale", self.constant("rowq.flat")], [p + "scale_1d"]),
            node("Reshape", [p + "zero_u8", self.constant("rowq.flat")], [p + "zero_1d"]),
            node("QuantizeLinear", [x, p + "scale_1d", p + "zero_1d"], [p + "u8"], axis=0),
        ]
        self._activations[x] = (p + "u8", p + "scale", p + "zero_f")
        return nodes, *self._activations[x]

    def scaled_rows(self, x: str, floor: float | None) -> tuple[list[onnx.NodeProto], str, str, str]:
        """(nodes, uint8 tensor, per-row scale [..., 1], its zero point) for `x` of any rank
        in symmetric rows (`floor` None) or shifted rows over x + `floor` (module docstring).

        No nodes when `x` was quantized so before: its tensors are reused.
        """
        if (x, floor) in self._scaled:
            return [], *self._scaled[(x, floor)]
        p = f"rowq.s{len(self._scaled)}."
        node = helper.make_node
        if floor is None:
            nodes = [node("Abs", [x], [p + "abs"])]
            shifted, span, levels, zero = (
                x,
                p + "abs",
                self.constant("rowq.half_top"),
                self.constant("rowq.mid"),
            )
        else:
            nodes, shifted = [], x
            if floor:
                shift = self.constant(f"rowq.floor_{floor}", np.array([floor], np.float32))
                nodes, shifted = [node("Add", [x, shift], [p + "shifted"])], p + "shifted"
            span, levels, zero = shifted, self.constant("rowq.top"), self.constant("rowq.bottom")
        nodes += [
            node("ReduceMax", [span], [p + "max"], axes=[-1], keepdims=1),
            node("Max", [p + "max", self.constant("rowq.tiny")], [p + "range"]),
            node("Div", [p + "range", levels], [p + "scale"]),
            node("Div", [shifted, p + "scale"], [p + "scaled"]),
            node("QuantizeLinear", [p + "scaled", self.constant("rowq.unit"), zero], [p + "u8"]),
        ]
        self._scaled[(x, floor)] = (p + "u8", p + "scale", zero)
        return nodes, *self._scaled[(x, floor)]

    def matmul_scaled(
        self, x: str, floor: float | None, name: str, scale_name: str, output: str
    ) -> list[onnx.NodeProto]:
        """`output` = x · dequantized weight for `x` of any rank in symmetric rows (`floor`
        None) or x + `floor` in shifted rows (`scaled_rows`), whose −floor · colsum(W)
        the caller adds: one MatMulIntegerToFloat, whose GEMM subtracts the one zero
        point exactly and applies the weight scales in its output stage, then the row
        scales."""
        nodes, quantized, scale, zero = self.scaled_rows(x, floor)
        return [
            *nodes,
            helper.make_node(
                "MatMulIntegerToFloat", [quantized, name, scale, scale_name, zero], [output], domain=MICROSOFT
            ),
        ]

    def matmul_rows(
        self,
        x: str,
        weight: np.ndarray,
        name: str,
        scale: np.ndarray,
        scale_name: str,
        bias: np.ndarray,
        output: str,
    ) -> list[onnx.NodeProto]:
        """`output` = (x · dequantized weight + `bias`) ÷ each row's activation scale, for a
        2-D `x` [rows, K] (the lm_head's) in asymmetric rows (`asymmetric_rows`); `weight`
        is the int8 [K, N] matrix stored as initializer `name`, `scale` its per-column
        scales stored as `scale_name`.

        These are the logits divided by a positive number per row, which only the argmax
        of each row reads: the same next token, in one pass over the [rows, N] output after
        the GEMM where the logits themselves took five (a Cast, the zero-point correction,
        two scales and the bias: as costly as the GEMM itself on CPUs with AMX; bulk
        decoding 10% faster on one). MatMulIntegerToFloat applies the weight scales in its
        output stage to the integer products acc (exact in float32 while |acc| < 2^24:
        K · 255 · W, 512 · 255 · 64 ≈ 8.4M for opus-mt), then one Gemm of rank 2 adds
        ``zero_r · (−colsum(W) · scale) + bias / scale_r``. Every op computes a row from that
        row alone."""
        nodes, quantized, row_scale, zero = self.asymmetric_rows(x)
        largest = weight.shape[0] * ACTIVATION_MAX * int(np.abs(weight.astype(np.int32)).max(initial=0))
        if largest >= FLOAT32_EXACT:
            raise ValueError(f"products up to {largest} are not exact in float32 (2^24)")
        correction = -weight.astype(np.float64).sum(axis=0) * scale
        rank2 = np.stack([correction, bias.astype(np.float64)]).astype(np.float32)
        self.graph.initializer.append(numpy_helper.from_array(rank2, name + ".rank2"))
        p = f"{output}.rowq."
        node = helper.make_node
        return [
            *nodes,
            node(
                "MatMulIntegerToFloat",
                [quantized, name, self.constant("rowq.unit"), scale_name],
                [p + "acc_scaled"],
                domain=MICROSOFT,
            ),
            node("Reciprocal", [row_scale], [p + "inverse_scale"]),
            node("Concat", [zero, p + "inverse_scale"], [p + "zero_and_inverse"], axis=1),
            node("Gemm", [p + "zero_and_inverse", name + ".rank2", p + "acc_scaled"], [output]),
        ]


def quantize_matmuls(model: onnx.ModelProto, quantizer: RowQuantizer) -> onnx.ModelProto:
    """Replace every MatMul with a constant 2-D weight (its input of any rank) by its
    row-scheme int8 form: shifted rows for an activation function's output, symmetric rows
    otherwise (module docstring). A shift's −floor · colsum(W) goes into the bias Add that
    follows the MatMul, or into an Add of its own where there is none."""
    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    _inline_constant_identities(graph, weights)
    producers = {output: node for node in graph.node for output in node.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    rewritten = []
    done: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # weights quantized, by initializer
    for node in graph.node:
        weight = weights.get(node.input[1]) if node.op_type == "MatMul" else None
        if weight is None or len(weight.dims) != 2:
            rewritten.append(node)
            continue
        name = weight.name + ".int8"
        if weight.name in done:  # torch stores equal weights once, read by several MatMuls
            quantized, scale = done[weight.name]
        else:
            matrix = numpy_helper.to_array(weight).astype(np.float32)
            quantized, scale = done[weight.name] = quantize_columns(matrix, quantizer.weight_levels)
            graph.initializer.remove(weight)
            graph.initializer.extend(
                [numpy_helper.from_array(quantized, name), numpy_helper.from_array(scale, name + ".scale")]
            )
        floor = _activation_floor(producers, node.input[0])
        output, shifts = node.output[0], []
        if floor:  # the shift's constants are the MatMul's own: named after its output
            offset = (-floor * (quantized.astype(np.float64) * scale).sum(axis=0)).astype(np.float32)
            if not _fold_into_bias(graph, weights, consumers, output, offset, output + ".bias"):
                graph.initializer.append(numpy_helper.from_array(offset, output + ".shift"))
                output = node.output[0] + ".unshifted"
                shifts = [helper.make_node("Add", [output, node.output[0] + ".shift"], [node.output[0]])]
        rewritten += [*quantizer.matmul_scaled(node.input[0], floor, name, name + ".scale", output), *shifts]
    del graph.node[:]
    graph.node.extend(rewritten)
    if all(opset.domain != MICROSOFT for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MICROSOFT, 1))
    return model


def _inline_constant_identities(graph: onnx.GraphProto, weights: dict[str, onnx.TensorProto]) -> None:
    """Read initializers directly where an Identity passes them on (torch's exporter stores
    equal constants once, say all-zero biases, and copies them with Identity nodes), so that
    every bias Add reads its bias as an initializer."""
    graph_outputs = {output.name for output in graph.output}
    copies = {
        node.output[0]: node.input[0]
        for node in graph.node
        if node.op_type == "Identity" and node.input[0] in weights and node.output[0] not in graph_outputs
    }
    if not copies:
        return
    kept = [node for node in graph.node if not (node.op_type == "Identity" and node.output[0] in copies)]
    for node in kept:
        node.input[:] = [copies.get(name, name) for name in node.input]
    del graph.node[:]
    graph.node.extend(kept)


def _fold_into_bias(
    graph: onnx.GraphProto,
    weights: dict[str, onnx.TensorProto],
    consumers: dict[str, list[onnx.NodeProto]],
    output: str,
    offset: np.ndarray,
    folded_name: str,
) -> bool:
    """Add `offset` to the constant bias that an Add alone adds to `output`, as a new
    initializer `folded_name` (the old one dropped when nothing else reads it); False if
    there is none."""
    readers = consumers.get(output, [])
    if len(readers) != 1 or readers[0].op_type != "Add":
        return False
    add = readers[0]
    operand = 1 if add.input[0] == output else 0
    bias = weights.get(add.input[operand])
    if bias is None or list(bias.dims) != list(offset.shape):
        return False
    folded = numpy_helper.to_array(bias).astype(np.float32) + offset
    graph.initializer.append(numpy_helper.from_array(folded, folded_name))
    consumers[bias.name].remove(add)
    if not consumers[bias.name]:
        graph.initializer.remove(bias)
    add.input[operand] = folded_name
    return True


def _activation_floor(producers: dict[str, onnx.NodeProto], name: str) -> float | None:
    """The floor of the activation function whose output `name` is (`ACTIVATION_FLOORS`,
    `GATE_FLOORS`), or None if it is none: an activation op itself (ReLU, GELU, ...), or
    the product that ends an exported swish (x · sigmoid(x)) or GELU (0.5 · x · (1 +
    erf(…)) or (1 + tanh(…))). `producers` maps each tensor name to the node that outputs it."""
    node = producers.get(name)
    if node is None:
        return None
    if node.op_type in ACTIVATION_FLOORS:
        return ACTIVATION_FLOORS[node.op_type]
    if node.op_type != "Mul":
        return None
    # the Sigmoid, Erf or Tanh sits at most three ops above the final product
    frontier = [producers[operand] for operand in node.input if operand in producers]
    for _ in range(3):
        gates = [parent for parent in frontier if parent.op_type in GATE_FLOORS]
        if gates:
            gate = gates[0]
            feeding = producers.get(gate.input[0])
            if gate.op_type == "Tanh" and feeding is not None and feeding.op_type == "Softplus":
                return MISH_FLOOR
            return GATE_FLOORS[gate.op_type]
        frontier = [
            producers[operand] for parent in frontier for operand in parent.input if operand in producers
        ]
    return None
