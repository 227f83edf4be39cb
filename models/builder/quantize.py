"""int8 decoder: onnxruntime dynamic quantization, plus the tied embedding done once.

`onnxruntime.quantization.quantize_dynamic` quantizes the decoder's MatMuls. It does
not quantize the lm_head Gemm, and quantizing the embedding Gather alone would leave a
second, fp32 copy of the tied matrix for the lm_head. With `quantize_embeddings` the
tied matrix is instead stored once, as int8 with one scale per vocabulary row, laid out
[d_model, vocab]: the lm_head reads it through MatMulInteger and the embedding lookup
gathers its columns. Export-time only.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

EMBEDDING = "embed_tokens.weight"


@dataclass(frozen=True)
class QuantizeOptions:
    """How the int8 decoder is made; recorded in bundle.json."""

    per_channel: bool = True
    reduce_range: bool = False
    op_types: tuple[str, ...] = ("MatMul",)
    quantize_embeddings: bool = True

    def as_dict(self) -> dict:
        """The options as JSON-ready values."""
        return {**asdict(self), "op_types": list(self.op_types)}


def _consumers(graph, name: str) -> list:
    return [node for node in graph.node if name in node.input]


def quantize_tied_embedding(model: onnx.ModelProto) -> onnx.ModelProto:
    """Replace the fp32 tied embedding and its Gather + Gemm users by one int8 matrix."""
    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    if EMBEDDING not in weights:
        raise ValueError(f"decoder graph has no initializer {EMBEDDING}")
    matrix = numpy_helper.to_array(weights[EMBEDDING]).astype(np.float32)
    scale = np.abs(matrix).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    quantized = np.clip(np.rint(matrix / scale[:, None]), -127, 127).astype(np.int8)

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
            numpy_helper.from_array(np.ascontiguousarray(quantized.T), "embed_tokens.int8_t"),
            numpy_helper.from_array(scale.astype(np.float32), "embed_tokens.row_scale"),
        ]
    )
    ids, lookup_out = gather.input[1], gather.output[0]
    hidden, bias, logits = gemm.input[0], gemm.input[2], gemm.output[0]
    nodes = [
        # embedding: gather columns of the [d_model, vocab] int8 matrix, rescale per row
        helper.make_node("Gather", ["embed_tokens.int8_t", ids], ["emb.cols"], axis=1),
        helper.make_node("Transpose", ["emb.cols"], ["emb.rows_i8"], perm=[1, 0]),
        helper.make_node("Cast", ["emb.rows_i8"], ["emb.rows"], to=TensorProto.FLOAT),
        helper.make_node("Gather", ["embed_tokens.row_scale", ids], ["emb.scale"], axis=0),
        helper.make_node("Unsqueeze", ["emb.scale", "emb.axis"], ["emb.scale_col"]),
        helper.make_node("Mul", ["emb.rows", "emb.scale_col"], [lookup_out]),
        # lm_head: u8 activations × s8 weights, then activation scale × row scale + bias
        helper.make_node("DynamicQuantizeLinear", [hidden], ["lm.h_q", "lm.h_scale", "lm.h_zp"]),
        helper.make_node("MatMulInteger", ["lm.h_q", "embed_tokens.int8_t", "lm.h_zp"], ["lm.acc"]),
        helper.make_node("Cast", ["lm.acc"], ["lm.acc_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["lm.h_scale", "embed_tokens.row_scale"], ["lm.scale"]),
        helper.make_node("Mul", ["lm.acc_f", "lm.scale"], ["lm.scaled"]),
        helper.make_node("Add", ["lm.scaled", bias], [logits]),
    ]
    graph.initializer.append(numpy_helper.from_array(np.array([1], np.int64), "emb.axis"))
    position = list(graph.node).index(gather)
    graph.node.remove(gather)
    for offset, node in enumerate(nodes[:6]):
        graph.node.insert(position + offset, node)
    position = list(graph.node).index(gemm)
    graph.node.remove(gemm)
    for offset, node in enumerate(nodes[6:]):
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


def quantize_decoder(source: Path, target: Path, options: QuantizeOptions) -> None:
    """Write the int8 version of the fp32 decoder graph `source` to `target`."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(source)
    gemm = next(n.name for n in _consumers(model.graph, EMBEDDING) if n.op_type == "Gemm")
    if options.quantize_embeddings:
        model = quantize_tied_embedding(model)
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
            nodes_to_exclude=[f"{gemm}_MatMul"],
        )
        model = onnx.load(staged_out)
    if not options.quantize_embeddings:
        model = restore_tied_gemm(model, gemm)
    onnx.checker.check_model(model)
    onnx.save(model, target)
