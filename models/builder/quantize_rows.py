"""The "row" int8 scheme: each row's activations get their own scale, so batching changes nothing.

onnxruntime's dynamic quantization picks one activation scale and zero point per tensor,
across the whole batch, so a sentence's int8 output depends on its batch neighbours. Here
every MatMul with a constant weight gets, for each row r (one token of one sentence), a
scale of its own, with W_q symmetric per output channel in [-W, W], in one of two forms:

- symmetric rows, for inputs centred on zero (layer-norm outputs, attention contexts, the
  embeddings):

      scale_r = max|x_r| / 127,   q_r = round(x_r / scale_r) + 128        uint8, 1..255
      y_r     = (q_r - 128) · W_q · w_scale · scale_r

  one MatMulIntegerToFloat: its GEMM subtracts the single zero point exactly in int32 and
  applies the weight scales in its output stage, then the row scales (6 nodes to quantize
  an input, 1 per MatMul);
- asymmetric rows, for the outputs of an activation function (the FFN's second input,
  mostly positive, which would waste half of a symmetric range) and for the lm_head
  (`matmul_rows`, faster there when rows are few):

      scale_r = (max(x_r, 0) - min(x_r, 0)) / 255,  zero_r = round(-min(x_r, 0) / scale_r)
      q_r     = clip(round(x_r / scale_r) + zero_r, 0, 255)                 uint8
      y_r     = (q_r · W_q - zero_r · colsum(W_q)) · scale_r · w_scale

  in int32 with MatMulInteger (which takes only one zero point per tensor) and a
  correction, q_r one per-axis QuantizeLinear over rows (15 nodes to quantize, 6 per
  MatMul).

Symmetric rows made an opus-mt-sized decoder step 6% (32 rows) to 14% (1 row) faster and
bulk decoding 8% faster than asymmetric rows everywhere, with the same BLEU on the demo
model (README "The int8 decoder"). Either way the integer products are exact and every
op computes a row from that row alone, so each row's bits depend on that row alone, on
every CPU. Exactness needs care on AVX2 without VNNI: MLAS's u8s8 kernel sums pairs of
u8·s8 products in saturating int16, so W is kept at 2 · 255 · W ≤ 32767 (W = 64: weights
in [-64, 64]). Symmetric rows are uint8 with zero point 128 rather than int8: MLAS on
AVX2 has no prepacked s8s8 kernel (measured 25-30x slower than u8s8). Export-time only.
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
#: Activation ops whose outputs keep asymmetric rows.
ACTIVATION_FUNCTIONS = ("Relu", "Gelu", "FastGelu", "QuickGelu", "Sigmoid", "Softplus", "Elu")
#: The ops inside an exported swish or GELU: a product with one of them ends the function.
GATES = ("Sigmoid", "Erf", "Tanh")
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


def _constants(graph: onnx.GraphProto) -> None:
    graph.initializer.extend(
        numpy_helper.from_array(value, name)
        for name, value in (
            ("rowq.zero", np.array([0.0], np.float32)),
            ("rowq.unit", np.array(1.0, np.float32)),
            ("rowq.mid", np.array(SYMMETRIC_ZERO, np.uint8)),
            ("rowq.half_top", np.array([float(SYMMETRIC_ZERO - 1)], np.float32)),
            ("rowq.top", np.array([float(ACTIVATION_MAX)], np.float32)),
            ("rowq.tiny", np.array([np.finfo(np.float32).tiny], np.float32)),
            ("rowq.flat", np.array([-1], np.int64)),
        )
    )


def _shape_constant(graph: onnx.GraphProto, name: str, values: list[int]) -> str:
    """The name of a constant int64 vector, added to `graph` the first time it is asked for."""
    if all(init.name != name for init in graph.initializer):
        graph.initializer.append(numpy_helper.from_array(np.array(values, np.int64), name))
    return name


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
        self._activations: dict[str, tuple[str, str, str]] = {}
        self._reshaped: set[str] = set()
        self._symmetric: dict[str, tuple[str, str]] = {}
        _constants(graph)

    def activation(self, x: str) -> tuple[list[onnx.NodeProto], str, str, str, str]:
        """(nodes, uint8 tensor, per-row scale, per-row zero point as int32 and as float)
        for `x`.

        No nodes when `x` was quantized before: its tensors are reused.
        """
        if x in self._activations:
            return [], *self._activations[x]
        p = f"rowq.{len(self._activations)}."
        node = helper.make_node
        nodes = [
            node("ReduceMin", [x], [p + "min_x"], axes=[-1], keepdims=1),
            node("ReduceMax", [x], [p + "max_x"], axes=[-1], keepdims=1),
            node("Min", [p + "min_x", "rowq.zero"], [p + "low"]),
            node("Max", [p + "max_x", "rowq.zero"], [p + "high"]),
            node("Sub", [p + "high", p + "low"], [p + "span"]),
            node("Max", [p + "span", "rowq.tiny"], [p + "range"]),
            node("Div", [p + "range", "rowq.top"], [p + "scale"]),
            node("Div", [p + "low", p + "scale"], [p + "low_q"]),
            node("Neg", [p + "low_q"], [p + "minus_low_q"]),
            node("Round", [p + "minus_low_q"], [p + "zero_f"]),
            node("Cast", [p + "zero_f"], [p + "zero"], to=TensorProto.INT32),
            node("Cast", [p + "zero_f"], [p + "zero_u8"], to=TensorProto.UINT8),
            # QuantizeLinear per axis 0: saturate(round(x / scale) + zero), one row each
            node("Reshape", [p + "scale", "rowq.flat"], [p + "scale_1d"]),
            node("Reshape", [p + "zero_u8", "rowq.flat"], [p + "zero_1d"]),
            node("QuantizeLinear", [x, p + "scale_1d", p + "zero_1d"], [p + "u8"], axis=0),
        ]
        self._activations[x] = (p + "u8", p + "scale", p + "zero", p + "zero_f")
        return nodes, *self._activations[x]

    def symmetric_activation(self, x: str) -> tuple[list[onnx.NodeProto], str, str]:
        """(nodes, uint8 tensor, per-row scale [..., 1]) for `x` quantized symmetrically per
        row: scale_r = max|x_r| / 127, q_r = round(x_r / scale_r) + 128.

        No nodes when `x` was quantized before: its tensors are reused.
        """
        if x in self._symmetric:
            return [], *self._symmetric[x]
        p = f"rowq.sym{len(self._symmetric)}."
        node = helper.make_node
        nodes = [
            node("Abs", [x], [p + "abs"]),
            node("ReduceMax", [p + "abs"], [p + "max"], axes=[-1], keepdims=1),
            node("Max", [p + "max", "rowq.tiny"], [p + "range"]),
            node("Div", [p + "range", "rowq.half_top"], [p + "scale"]),
            node("Div", [x, p + "scale"], [p + "scaled"]),
            node("QuantizeLinear", [p + "scaled", "rowq.unit", "rowq.mid"], [p + "u8"]),
        ]
        self._symmetric[x] = (p + "u8", p + "scale")
        return nodes, *self._symmetric[x]

    def matmul_symmetric(self, x: str, name: str, scale_name: str, output: str) -> list[onnx.NodeProto]:
        """`output` = x · dequantized weight for `x` of any rank, its rows quantized
        symmetrically (`symmetric_activation`): one MatMulIntegerToFloat, whose GEMM
        subtracts the one zero point exactly and applies the weight scales in its output
        stage, then the row scales."""
        nodes, quantized, scale = self.symmetric_activation(x)
        return [
            *nodes,
            helper.make_node(
                "MatMulIntegerToFloat",
                [quantized, name, scale, scale_name, "rowq.mid"],
                [output],
                domain=MICROSOFT,
            ),
        ]

    def matmul_any_rank(
        self, x: str, weight: np.ndarray, name: str, scale_name: str, output: str
    ) -> list[onnx.NodeProto]:
        """`matmul` for an `x` of any rank [..., K] (an encoder's [batch, length, K]): every
        token is a row of its own, and the output gets x's leading dimensions back."""
        width, columns = weight.shape
        node = helper.make_node
        rows, lead = f"{x}.rows", f"{x}.lead"
        nodes = []
        if rows not in self._reshaped:  # q, k and v read the same x: reshape it once
            self._reshaped.add(rows)
            rows_shape = _shape_constant(self.graph, f"rowq.rows_of_{width}", [-1, width])
            nodes += [node("Reshape", [x, rows_shape], [rows]), node("Shape", [x], [lead], end=-1)]
        p = f"{output}.rowq."
        columns_name = _shape_constant(self.graph, f"rowq.columns_{columns}", [columns])
        return [
            *nodes,
            *self.matmul(rows, weight, name, scale_name, p + "rows"),
            node("Concat", [lead, columns_name], [p + "shape"], axis=0),
            node("Reshape", [p + "rows", p + "shape"], [output]),
        ]

    def matmul(
        self, x: str, weight: np.ndarray, name: str, scale_name: str, output: str
    ) -> list[onnx.NodeProto]:
        """Nodes computing `output` = x · dequantized weight.

        `weight` is the int8 [in, out] matrix stored as initializer `name`, its
        per-column scales stored as `scale_name`.
        """
        nodes, quantized, scale, zero, _ = self.activation(x)
        column_sums = weight.astype(np.int32).sum(axis=0, dtype=np.int32)
        self.graph.initializer.append(numpy_helper.from_array(column_sums, name + ".colsum"))
        p = f"{output}.rowq."
        node = helper.make_node
        return [
            *nodes,
            node("MatMulInteger", [quantized, name], [p + "acc"]),
            node("Mul", [zero, name + ".colsum"], [p + "offset"]),
            node("Sub", [p + "acc", p + "offset"], [p + "exact"]),
            node("Cast", [p + "exact"], [p + "exact_f"], to=TensorProto.FLOAT),
            node("Mul", [scale, scale_name], [p + "scale"]),
            node("Mul", [p + "exact_f", p + "scale"], [output]),
        ]

    def matmul_rows(
        self, x: str, weight: np.ndarray, name: str, scale_name: str, output: str
    ) -> list[onnx.NodeProto]:
        """`matmul` for a 2-D `x` [rows, K] (the lm_head's), with the zero-point correction
        folded into a Gemm: ``acc − zero_r · colsum(W)`` as ``Gemm(zero, −colsum, C=acc)``,
        exact in float32 while |acc| < 2^24 (K · 255 · W: 512 · 255 · 64 ≈ 8.4M for
        opus-mt). Fewer [rows, N] tensors stay allocated than with `matmul`'s int32
        correction and [rows, N] scale: with N = 65,001 that is the bulk of a decoder step's
        working memory (an opus-mt-sized Translator's peak at max_batch 32: 430 → 390 MB,
        at the same speed)."""
        nodes, quantized, scale, _, zero = self.activation(x)
        largest = weight.shape[0] * ACTIVATION_MAX * int(np.abs(weight.astype(np.int32)).max(initial=0))
        if largest >= FLOAT32_EXACT:
            raise ValueError(f"products up to {largest} are not exact in float32 (2^24)")
        negated = -weight.astype(np.float32).sum(axis=0, keepdims=True)
        self.graph.initializer.append(numpy_helper.from_array(negated, name + ".neg_colsum"))
        p = f"{output}.rowq."
        node = helper.make_node
        return [
            *nodes,
            node("MatMulInteger", [quantized, name], [p + "acc"]),
            node("Cast", [p + "acc"], [p + "acc_f"], to=TensorProto.FLOAT),
            node("Gemm", [zero, name + ".neg_colsum", p + "acc_f"], [p + "exact_f"]),
            node("Mul", [p + "exact_f", scale], [p + "row_scaled"]),
            node("Mul", [p + "row_scaled", scale_name], [output]),
        ]


def quantize_matmuls(
    model: onnx.ModelProto, quantizer: RowQuantizer, any_rank: bool = False
) -> onnx.ModelProto:
    """Replace every MatMul with a constant 2-D weight by its row-scheme int8 form:
    symmetric rows, or asymmetric ones for an activation function's output (module docstring).

    Symmetric rows take inputs of any rank. For asymmetric ones, with `any_rank` inputs may
    have any rank (`RowQuantizer.matmul_any_rank`); otherwise they must hold one row per
    batch index, as a decoder step's do.
    """
    emit = quantizer.matmul_any_rank if any_rank else quantizer.matmul
    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    producers = {output: node for node in graph.node for output in node.output}
    rewritten = []
    for node in graph.node:
        weight = weights.get(node.input[1]) if node.op_type == "MatMul" else None
        if weight is None or len(weight.dims) != 2:
            rewritten.append(node)
            continue
        matrix = numpy_helper.to_array(weight).astype(np.float32)
        quantized, scale = quantize_columns(matrix, quantizer.weight_levels)
        graph.initializer.remove(weight)
        name = weight.name + ".int8"
        graph.initializer.extend(
            [numpy_helper.from_array(quantized, name), numpy_helper.from_array(scale, name + ".scale")]
        )
        if _after_activation_function(producers, node.input[0]):
            rewritten += emit(node.input[0], quantized, name, name + ".scale", node.output[0])
        else:
            rewritten += quantizer.matmul_symmetric(node.input[0], name, name + ".scale", node.output[0])
    del graph.node[:]
    graph.node.extend(rewritten)
    if all(opset.domain != MICROSOFT for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MICROSOFT, 1))
    return model


def _after_activation_function(producers: dict[str, onnx.NodeProto], name: str) -> bool:
    """Whether `name` is an activation function's output, mostly positive: such inputs keep
    asymmetric rows. An activation op itself (ReLU, GELU, ...), or the product that ends an
    exported swish (x · sigmoid(x)) or GELU (0.5 · x · (1 + erf(…)) or (1 + tanh(…))).
    `producers` maps each tensor name to the node that outputs it."""
    node = producers.get(name)
    if node is None or node.op_type in ACTIVATION_FUNCTIONS:
        return node is not None
    if node.op_type != "Mul":
        return False
    # the Sigmoid, Erf or Tanh sits at most two ops above the final product
    frontier = [producers[operand] for operand in node.input if operand in producers]
    for _ in range(2):
        if any(parent.op_type in GATES for parent in frontier):
            return True
        frontier = [
            producers[operand] for parent in frontier for operand in parent.input if operand in producers
        ]
    return any(parent.op_type in GATES for parent in frontier)
