"""int8 decoder: the row scheme (default) or onnxruntime dynamic quantization.

Two schemes, `QuantizeOptions.scheme`:
- "row" (`models.builder.quantize_rows`): one scale per activation row (symmetric, or
  shifted after an activation function), per-channel weights, exact int32 products; a
  sentence's output does not depend on what it is batched with, which lets the
  Translator batch.
- "tensor": `onnxruntime.quantization.quantize_dynamic`, one uint8 scale and zero point
  per activation tensor (across the batch), as transqueue did before batching.

Either way the tied embedding/lm_head matrix is stored once, as int8 with one scale per
vocabulary row, laid out [vocab, d_model]: the embedding lookup gathers its rows, and the
lm_head reads it through a Transpose that ONNX Runtime folds into a constant when the
session is created, then prepacks for MatMulInteger and frees. So a decoder session holds
one prepacked copy plus the looked-up rows of the mapped file, where a [d_model, vocab]
layout (the lookup gathering columns) kept the whole matrix resident a second time: 31 MB
less at opus-mt size (for "tensor", `quantize_embeddings=False` keeps it fp32 instead).
Export-time only.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from models.builder import defaults
from models.builder.quantize_rows import RowQuantizer, quantize_matmuls

EMBEDDING = "embed_tokens.weight"
EMBEDDING_ROWS, EMBEDDING_SCALE = "embed_tokens.int8", "embed_tokens.row_scale"
#: The [d_model, vocab] view of EMBEDDING_ROWS that the lm_head reads (a folded Transpose).
EMBEDDING_INT8 = "embed_tokens.int8_t"
#: The int8 schemes `QuantizeOptions.scheme` accepts.
SCHEMES = ("row", "tensor")

#: Emits the lm_head: (hidden, the int8 [d_model, vocab] matrix, the bias initializer,
#: logits) → nodes that compute hidden · dequantized matrix + bias into logits (or, the row
#: scheme's, logits that keep the argmax of each row: `RowQuantizer.matmul_rows`).
LmHead = Callable[[str, np.ndarray, str, str], list[onnx.NodeProto]]


@dataclass(frozen=True)
class QuantizeOptions:
    """How the int8 decoder is made; recorded in bundle.json.

    `scheme` picks "row" or "tensor" (module docstring). `row_weight_levels` and
    `encoder` (an int8 encoder for int8 decoding, `quantize_encoder`) apply to "row";
    `per_channel`, `reduce_range`, `op_types` and `quantize_embeddings` to "tensor".
    """

    scheme: str = defaults.INT8_SCHEME
    row_weight_levels: int = defaults.ROW_WEIGHT_LEVELS
    per_channel: bool = True
    reduce_range: bool = False
    op_types: tuple[str, ...] = ("MatMul",)
    quantize_embeddings: bool = True
    encoder: bool = defaults.INT8_ENCODER

    def as_dict(self) -> dict:
        """The options as JSON-ready values."""
        return {**asdict(self), "op_types": list(self.op_types)}


def _consumers(graph, name: str) -> list:
    return [node for node in graph.node if name in node.input]


def dynamic_lm_head(hidden: str, matrix: np.ndarray, bias: str, logits: str) -> list[onnx.NodeProto]:
    """The "tensor" scheme's lm_head: one uint8 scale and zero point for the whole input."""
    node = helper.make_node
    return [
        node("DynamicQuantizeLinear", [hidden], ["lm.h_q", "lm.h_scale", "lm.h_zp"]),
        node("MatMulInteger", ["lm.h_q", EMBEDDING_INT8, "lm.h_zp"], ["lm.acc"]),
        node("Cast", ["lm.acc"], ["lm.acc_f"], to=TensorProto.FLOAT),
        node("Mul", ["lm.h_scale", EMBEDDING_SCALE], ["lm.scale"]),
        node("Mul", ["lm.acc_f", "lm.scale"], ["lm.scaled"]),
        node("Add", ["lm.scaled", bias], [logits]),
    ]


def quantize_tied_embedding(
    model: onnx.ModelProto, lm_head: LmHead = dynamic_lm_head, levels: int = 127
) -> onnx.ModelProto:
    """Replace the fp32 tied embedding and its Gather + Gemm users by one int8 matrix.

    The matrix gets one scale per vocabulary row and integers in [-levels, levels];
    `lm_head` emits the product of the decoder output with it.
    """
    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    if EMBEDDING not in weights:
        raise ValueError(f"decoder graph has no initializer {EMBEDDING}")
    matrix = numpy_helper.to_array(weights[EMBEDDING]).astype(np.float32)
    scale = np.abs(matrix).max(axis=1) / levels
    scale[scale == 0] = 1.0
    rows = np.clip(np.rint(matrix / scale[:, None]), -levels, levels).astype(np.int8)

    users = _consumers(graph, EMBEDDING)
    gathers = [node for node in users if node.op_type == "Gather"]
    gemms = [node for node in users if node.op_type == "Gemm"]
    if len(gathers) != 1 or len(gemms) != 1 or len(users) != 2:
        raise ValueError("expected the tied embedding to feed exactly one Gather and one Gemm")
    gather, gemm = gathers[0], gemms[0]
    if any(a.name == "transB" and a.i == 1 for a in gemm.attribute) is False:
        raise ValueError("expected the lm_head Gemm to read the embedding with transB=1")

    graph.initializer.remove(weights[EMBEDDING])
    graph.initializer.extend(
        [
            numpy_helper.from_array(rows, EMBEDDING_ROWS),
            numpy_helper.from_array(scale.astype(np.float32), EMBEDDING_SCALE),
        ]
    )
    ids, lookup_out = gather.input[1], gather.output[0]
    hidden, bias, logits = gemm.input[0], gemm.input[2], gemm.output[0]
    lookup = [
        # embedding: gather rows of the [vocab, d_model] int8 matrix, rescale per row
        helper.make_node("Gather", [EMBEDDING_ROWS, ids], ["emb.rows_i8"], axis=0),
        helper.make_node("Cast", ["emb.rows_i8"], ["emb.rows"], to=TensorProto.FLOAT),
        helper.make_node("Gather", [EMBEDDING_SCALE, ids], ["emb.scale"], axis=0),
        helper.make_node("Unsqueeze", ["emb.scale", "emb.axis"], ["emb.scale_col"]),
        helper.make_node("Mul", ["emb.rows", "emb.scale_col"], [lookup_out]),
    ]
    head = [
        # lm_head: u8 activations × s8 weights, scales applied after, then the bias
        helper.make_node("Transpose", [EMBEDDING_ROWS], [EMBEDDING_INT8], perm=[1, 0]),
        *lm_head(hidden, np.ascontiguousarray(rows.T), bias, logits),
    ]
    graph.initializer.append(numpy_helper.from_array(np.array([1], np.int64), "emb.axis"))
    for old, new in ((gather, lookup), (gemm, head)):
        position = list(graph.node).index(old)
        graph.node.remove(old)
        for offset, node in enumerate(new):
            graph.node.insert(position + offset, node)
    return model


def restore_tied_gemm(model: onnx.ModelProto, gemm_name: str) -> onnx.ModelProto:
    """Undo the quantizer's Gemm→MatMul rewrite of the fp32 lm_head.

    onnxruntime's dynamic quantization turns every Gemm into a MatMul on a transposed
    copy of its weight. For an lm_head left in fp32 that copy duplicates the tied
    embedding, so the MatMul goes back to a Gemm reading the one shared matrix.
    """
    graph = model.graph
    matmul = next(node for node in graph.node if node.name == f"{gemm_name}_MatMul")
    transposed = matmul.input[1]
    gemm = helper.make_node(
        "Gemm", [matmul.input[0], EMBEDDING], list(matmul.output), name=gemm_name, transB=1
    )
    position = list(graph.node).index(matmul)
    graph.node.remove(matmul)
    graph.node.insert(position, gemm)
    copy = next(init for init in graph.initializer if init.name == transposed)
    graph.initializer.remove(copy)
    return model


def quantize_rows(model: onnx.ModelProto, weight_levels: int) -> onnx.ModelProto:
    """The "row" scheme: the tied embedding and every constant-weight MatMul."""
    quantizer = RowQuantizer(model.graph, weight_levels)

    def lm_head(hidden: str, matrix: np.ndarray, bias: str, logits: str) -> list[onnx.NodeProto]:
        initializers = {init.name: init for init in model.graph.initializer}
        if bias not in initializers:
            raise ValueError(f"expected the lm_head's bias {bias!r} to be a constant")
        model.graph.initializer.remove(initializers[bias])  # folded into the lm_head's Gemm
        scale = numpy_helper.to_array(initializers[EMBEDDING_SCALE])
        values = numpy_helper.to_array(initializers[bias]).reshape(-1)
        return quantizer.matmul_rows(hidden, matrix, EMBEDDING_INT8, scale, EMBEDDING_SCALE, values, logits)

    model = quantize_tied_embedding(model, lm_head, weight_levels)
    return quantize_matmuls(model, quantizer)


def quantize_embedding_rows(model: onnx.ModelProto, levels: int = 127) -> onnx.ModelProto:
    """Replace an encoder's fp32 token embedding (its only use a Gather) by int8 rows, one
    scale per vocabulary row: a quarter of the memory, and each token's vector depends on
    its own row alone."""
    graph = model.graph
    weight = next(init for init in graph.initializer if init.name.endswith(EMBEDDING))
    users = _consumers(graph, weight.name)
    if len(users) != 1 or users[0].op_type != "Gather":
        raise ValueError(f"expected {weight.name} to feed exactly one Gather")
    matrix = numpy_helper.to_array(weight).astype(np.float32)
    scale = np.abs(matrix).max(axis=1, keepdims=True) / levels
    scale[scale == 0] = 1.0
    quantized = np.clip(np.rint(matrix / scale), -levels, levels).astype(np.int8)
    graph.initializer.remove(weight)
    graph.initializer.extend(
        [
            numpy_helper.from_array(quantized, EMBEDDING_ROWS),
            numpy_helper.from_array(scale.astype(np.float32), EMBEDDING_SCALE),
        ]
    )
    gather = users[0]
    ids, lookup_out = gather.input[1], gather.output[0]
    nodes = [
        helper.make_node("Gather", [EMBEDDING_ROWS, ids], ["emb.rows_i8"], axis=0),
        helper.make_node("Cast", ["emb.rows_i8"], ["emb.rows"], to=TensorProto.FLOAT),
        helper.make_node("Gather", [EMBEDDING_SCALE, ids], ["emb.scale"], axis=0),
        helper.make_node("Mul", ["emb.rows", "emb.scale"], [lookup_out]),
    ]
    position = list(graph.node).index(gather)
    graph.node.remove(gather)
    for offset, node in enumerate(nodes):
        graph.node.insert(position + offset, node)
    return model


def quantize_encoder(source: Path, target: Path, options: QuantizeOptions) -> None:
    """Write the int8 version of the fp32 encoder graph `source` to `target` ("row" scheme
    only: every token row quantized on its own, so batching changes nothing)."""
    if options.scheme != "row":
        raise ValueError(f"only the row scheme quantizes the encoder, not {options.scheme!r}")
    model = quantize_embedding_rows(onnx.load(source))
    model = quantize_matmuls(model, RowQuantizer(model.graph, options.row_weight_levels))
    onnx.checker.check_model(model)
    onnx.save(model, target)


def quantize_decoder(source: Path, target: Path, options: QuantizeOptions) -> None:
    """Write the int8 version of the fp32 decoder graph `source` to `target`."""
    if options.scheme not in SCHEMES:
        raise ValueError(f"int8 scheme must be one of {SCHEMES}, not {options.scheme!r}")
    model = onnx.load(source)
    if options.scheme == "row":
        model = quantize_rows(model, options.row_weight_levels)
    else:
        model = quantize_tensors(model, options)
    onnx.checker.check_model(model)
    onnx.save(model, target)


def quantize_tensors(model: onnx.ModelProto, options: QuantizeOptions) -> onnx.ModelProto:
    """The "tensor" scheme: onnxruntime dynamic quantization, embedding as options say."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    users = _consumers(model.graph, EMBEDDING)
    gemm = next(n.name for n in users if n.op_type == "Gemm")
    excluded = [f"{gemm}_MatMul"]
    if options.quantize_embeddings:
        model = quantize_tied_embedding(model)
    else:  # the matrix stays fp32 for both its users, even where op_types names Gather
        excluded += [n.name for n in users if n.op_type == "Gather"]
    with tempfile.TemporaryDirectory() as scratch:
        staged_in, staged_out = Path(scratch) / "in.onnx", Path(scratch) / "out.onnx"
        onnx.save(model, staged_in)
        quantize_dynamic(
            staged_in,
            staged_out,
            op_types_to_quantize=list(options.op_types),
            per_channel=options.per_channel,
            reduce_range=options.reduce_range,
            weight_type=QuantType.QInt8,
            nodes_to_exclude=excluded,
        )
        model = onnx.load(staged_out)
    if not options.quantize_embeddings:
        model = restore_tied_gemm(model, gemm)
    return model
