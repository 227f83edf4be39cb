import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from models.builder.quantize_rows import RowQuantizer, max_exact_weight_level, quantize_matmuls


def row_quantized_matmul(
    weight: np.ndarray, levels: int, after: str | list | None = None, bias: np.ndarray | None = None
) -> ort.InferenceSession:
    """`row_quantized_model` in an ONNX Runtime session."""
    model = row_quantized_model(weight, levels, after, bias)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def row_quantized_model(
    weight: np.ndarray, levels: int, after: str | list | None = None, bias: np.ndarray | None = None
) -> onnx.ModelProto:
    """A MatMul of input x [batch, 1, K] rewritten by `quantize_matmuls`; with `after` (an op
    type, or nodes computing "h" from "x"), of that activation function's output instead
    (shifted rows); with `bias`, followed by an Add of it, read through an Identity as
    torch's exporter writes shared constants."""
    rows, columns = weight.shape
    nodes = [helper.make_node("MatMul", ["x" if after is None else "h", "w"], ["y" if bias is None else "m"])]
    constants = [numpy_helper.from_array(weight, "w")]
    if isinstance(after, str):
        nodes.insert(0, helper.make_node(after, ["x"], ["h"]))
    elif after is not None:
        nodes[:0] = after
    if bias is not None:
        nodes += [
            helper.make_node("Identity", ["b"], ["b_copy"]),
            helper.make_node("Add", ["b_copy", "m"], ["y"]),
        ]
        constants.append(numpy_helper.from_array(bias, "b"))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, rows])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 1, columns])],
        constants,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model = quantize_matmuls(model, RowQuantizer(model.graph, levels))
    onnx.checker.check_model(model)
    return model


def quantized_weight(weight: np.ndarray, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """(integer weights as int64, per-column scales) as the row scheme makes them."""
    w_scale = (np.abs(weight).max(axis=0) / levels).astype(np.float32)
    return np.clip(np.rint(weight / w_scale), -levels, levels).astype(np.int64), w_scale


def exact_parts(x: np.ndarray, weight: np.ndarray, levels: int) -> tuple[np.ndarray, ...]:
    """Asymmetric rows in numpy: (integer part computed in int64, as float32; row scales;
    weight scales)."""
    w_q, w_scale = quantized_weight(weight, levels)
    low = np.minimum(x.min(axis=-1, keepdims=True), 0)
    high = np.maximum(x.max(axis=-1, keepdims=True), 0)
    scale = np.maximum(high - low, np.float32(2.0**-100)) / np.float32(255)  # the least span
    zero = np.rint(-(low / scale))
    q = np.clip(np.rint(x / scale) + zero, 0, 255).astype(np.int64)
    exact = (q @ w_q - zero.astype(np.int64) * w_q.sum(axis=0)).astype(np.float32)
    return exact, scale, w_scale


def symmetric_reference(x: np.ndarray, weight: np.ndarray, levels: int) -> np.ndarray:
    """Symmetric rows in numpy: the integer part in int64, the scales in float64."""
    w_q, w_scale = quantized_weight(weight, levels)
    scale = np.abs(x).max(axis=-1, keepdims=True) / np.float32(127)
    q = np.clip(np.rint(x / scale), -128, 127).astype(np.int64)
    return (q @ w_q) * w_scale.astype(np.float64) * scale.astype(np.float64)


def shifted_reference(x: np.ndarray, weight: np.ndarray, levels: int, floor: float) -> np.ndarray:
    """Shifted rows in numpy: x + floor in 0..255 with zero point 0, the integer part in
    int64, the scales and the shift's −floor · colsum(W) in float64."""
    w_q, w_scale = quantized_weight(weight, levels)
    shifted = x + np.float32(floor)
    scale = shifted.max(axis=-1, keepdims=True) / np.float32(255)
    q = np.clip(np.rint(shifted / scale), 0, 255).astype(np.int64)
    dequantized = w_q * w_scale.astype(np.float64)
    return (q @ w_q) * w_scale.astype(np.float64) * scale.astype(np.float64) - floor * dequantized.sum(axis=0)


def close_rows(got: np.ndarray, want: np.ndarray) -> bool:
    """Whether every row of `got` is `want` up to float32 rounding of the scales (a saturated
    int16 pair sum would be off by thousands of integer steps)."""
    return bool((np.abs(got - want).max(axis=-1) <= 1e-6 * np.abs(want).max(axis=-1)).all())


def saturating_rows(rng: np.random.Generator, width: int) -> np.ndarray:
    """Rows [40, 1, width] with the largest int16 pair sums in their first two."""
    x = rng.standard_normal((40, 1, width)).astype(np.float32)
    x[0] = 1.0  # a row of 255s (asymmetric) or 255s after the zero point (symmetric)
    x[1, 0, ::2], x[1, 0, 1::2] = 5.0, -1.0
    return x


def test_shifted_rows_are_the_integer_form_up_to_float_rounding():
    """An activation function's output gets shifted rows: after a ReLU (floor 0), q in
    0..255 times the weights, exact in int32 where 255s would saturate int16 pair sums."""
    rng = np.random.default_rng(0)
    levels = max_exact_weight_level()
    weight = rng.standard_normal((256, 96)).astype(np.float32)
    weight[:, 0] = 1.0  # every weight of column 0 at +levels
    x = np.abs(saturating_rows(rng, 256))  # a ReLU leaves them as they are
    got = row_quantized_matmul(weight, levels, after="Relu").run(None, {"x": x})[0]
    assert close_rows(got, shifted_reference(x, weight, levels, 0.0))


def test_symmetric_rows_are_the_integer_form_up_to_float_rounding():
    """An input that is no activation function's output gets symmetric rows: q − 128 in
    −127..127 times the weights, exact in int32, scaled in float32."""
    rng = np.random.default_rng(4)
    levels = max_exact_weight_level()
    weight = rng.standard_normal((256, 96)).astype(np.float32)
    weight[:, 0] = 1.0
    x = saturating_rows(rng, 256) * rng.uniform(0.01, 100, (40, 1, 1)).astype(np.float32)
    got = row_quantized_matmul(weight, levels).run(None, {"x": x})[0]
    assert close_rows(got, symmetric_reference(x, weight, levels))


@pytest.mark.parametrize("swish", [False, True])
def test_a_bias_after_the_matmul_gets_the_shift(swish):
    """After a swish, the shift's −0.2785 · colsum(W) is folded into the bias Add that
    follows (here read through an Identity), so the result is the quantized product of the
    shifted rows plus the bias, with no Add of its own for the shift."""
    rng = np.random.default_rng(6)
    levels = max_exact_weight_level()
    weight = rng.standard_normal((64, 32)).astype(np.float32)
    bias = rng.standard_normal(32).astype(np.float32)
    x = rng.standard_normal((8, 1, 64)).astype(np.float32) * 3
    model = row_quantized_model(weight, levels, SWISH if swish else None, bias)
    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )[0]
    if swish:
        want = shifted_reference(x / (1 + np.exp(-x)), weight, levels, 0.2785)
    else:
        want = symmetric_reference(x, weight, levels)
    assert close_rows(got - bias, want)
    assert sum(node.op_type == "Add" for node in model.graph.node) == 1 + swish  # the bias (and x + floor)


@pytest.mark.parametrize("after", [None, "Relu"])
def test_rows_do_not_depend_on_their_neighbours(after):
    rng = np.random.default_rng(1)
    weight = rng.standard_normal((128, 64)).astype(np.float32)
    session = row_quantized_matmul(weight, max_exact_weight_level(), after)
    x = (rng.standard_normal((64, 1, 128)) * rng.uniform(0.01, 100, (64, 1, 1))).astype(np.float32)
    together = session.run(None, {"x": x})[0]
    for row in range(64):
        assert session.run(None, {"x": x[row : row + 1]})[0].tobytes() == together[row : row + 1].tobytes()


def test_weight_levels_beyond_exact_int16_sums_are_refused():
    graph = helper.make_graph([], "g", [], [])
    assert max_exact_weight_level() == 64
    with pytest.raises(ValueError, match="exact u8s8"):
        RowQuantizer(graph, 65)


def lm_head_session(weight: np.ndarray, bias: np.ndarray, levels: int) -> ort.InferenceSession:
    """`RowQuantizer.matmul_rows` (the lm_head's form) over a 2-D input."""
    rows, columns = weight.shape
    w_q, w_scale = quantized_weight(weight, levels)
    w_q = w_q.astype(np.int8)
    graph = helper.make_graph(
        [],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", rows])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", columns])],
        [numpy_helper.from_array(w_q, "w"), numpy_helper.from_array(w_scale, "w.scale")],
    )
    quantizer = RowQuantizer(graph, levels)
    graph.node.extend(quantizer.matmul_rows("x", w_q, "w", w_scale, "w.scale", bias, "y"))
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    onnx.checker.check_model(model)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_the_lm_head_form_gives_the_logits_over_the_row_scale_with_rows_independent():
    rng = np.random.default_rng(2)
    levels = max_exact_weight_level()
    weight = rng.standard_normal((512, 300)).astype(np.float32)
    weight[:, 0] = 1.0  # the widest integer sums: 512 · 255 · 64
    bias = rng.standard_normal(300).astype(np.float32)
    x = (rng.standard_normal((34, 512)) * rng.uniform(0.01, 100, (34, 1))).astype(np.float32)
    x[0], x[1] = 1.0, 0.0  # a constant row; a row of zeros, whose logits are the bias
    session = lm_head_session(weight, bias, levels)
    together = session.run(None, {"x": x})[0]
    exact, scale, w_scale = exact_parts(x, weight, levels)
    logits = exact.astype(np.float64) * w_scale * scale + bias
    assert np.allclose(together * scale, logits, rtol=1e-5, atol=1e-6 * np.abs(logits).max())
    assert np.array_equal(together.argmax(axis=1), logits.argmax(axis=1))
    assert np.isfinite(together).all() and together[1].argmax() == bias.argmax()
    for row in range(34):
        assert session.run(None, {"x": x[row : row + 1]})[0].tobytes() == together[row : row + 1].tobytes()


def test_the_lm_head_form_refuses_sums_float32_cannot_hold_exactly():
    levels = max_exact_weight_level()
    graph = helper.make_graph([], "g", [], [])
    too_wide = np.full((1100, 4), levels, dtype=np.int8)  # 1100 · 255 · 64 > 2^24
    with pytest.raises(ValueError, match="not exact in float32"):
        scale, bias = np.ones(4, np.float32), np.zeros(4, np.float32)
        RowQuantizer(graph, levels).matmul_rows("x", too_wide, "w", scale, "w.scale", bias, "y")


CONSTANTS = {"half": 0.5, "one": 1.0, "root2": 2**0.5}
SWISH = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["h"])]
GELU = [  # as torch exports nn.GELU(): 0.5 · x · (1 + erf(x / √2))
    helper.make_node("Div", ["x", "root2"], ["d"]),
    helper.make_node("Erf", ["d"], ["e"]),
    helper.make_node("Add", ["e", "one"], ["a"]),
    helper.make_node("Mul", ["x", "a"], ["m"]),
    helper.make_node("Mul", ["m", "half"], ["h"]),
]
MISH = [  # as torch exports nn.Mish(): x · tanh(softplus(x))
    helper.make_node("Softplus", ["x"], ["p"]),
    helper.make_node("Tanh", ["p"], ["t"]),
    helper.make_node("Mul", ["x", "t"], ["h"]),
]
ERF = np.vectorize(math.erf)


@pytest.mark.parametrize(
    ("activation", "function", "floor"),
    [
        ([], lambda x: x, None),
        ([helper.make_node("Relu", ["x"], ["h"])], lambda x: np.maximum(x, 0), 0.0),
        (SWISH, lambda x: x / (1 + np.exp(-x)), 0.2785),
        (GELU, lambda x: 0.5 * x * (1 + ERF(x / 2**0.5)), 0.1701),
        (MISH, lambda x: x * np.tanh(np.log1p(np.exp(x))), 0.3089),  # not GELU's Tanh floor
        ([helper.make_node("Mul", ["x", "half"], ["h"])], lambda x: 0.5 * x, None),
    ],
    ids=["input", "relu", "swish", "gelu", "mish", "scaled input"],
)
def test_activation_function_outputs_get_shifted_rows_over_their_floor(activation, function, floor):
    """A MatMul reading an activation function's output (the op, or the product that ends
    an exported swish or GELU) quantizes x + the function's floor, anything else symmetric
    rows; each is its reference up to float rounding."""
    rng = np.random.default_rng(5)
    levels = max_exact_weight_level()
    weight = rng.standard_normal((16, 4)).astype(np.float32)
    constants = [
        numpy_helper.from_array(np.array(value, np.float32), name) for name, value in CONSTANTS.items()
    ]
    graph = helper.make_graph(
        [*activation, helper.make_node("MatMul", ["h" if activation else "x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 1, 4])],
        [numpy_helper.from_array(weight, "w"), *constants],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model = quantize_matmuls(model, RowQuantizer(model.graph, levels))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = (rng.standard_normal((12, 1, 16)) * 2).astype(np.float32)
    hidden = function(x.astype(np.float64)).astype(np.float32)
    if floor is None:
        want = symmetric_reference(hidden, weight, levels)
    else:
        want = shifted_reference(hidden, weight, levels, floor)
    assert close_rows(session.run(None, {"x": x})[0], want)


def test_matmuls_sharing_one_weight_are_each_quantized():
    # torch's exporter stores equal weights once (say two identical layers) and copies them
    # with Identity nodes; each MatMul then reads the same initializer
    rng = np.random.default_rng(7)
    levels = max_exact_weight_level()
    weight = rng.standard_normal((16, 16)).astype(np.float32)
    bias = rng.standard_normal(16).astype(np.float32)
    nodes = [
        helper.make_node("Identity", ["w"], ["w_copy"]),
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("MatMul", ["r", "w"], ["m1"]),
        helper.make_node("Add", ["m1", "b"], ["y1"]),
        helper.make_node("Relu", ["y1"], ["r2"]),
        helper.make_node("MatMul", ["r2", "w_copy"], ["m2"]),
        helper.make_node("Add", ["m2", "b"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 1, 16])],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model = quantize_matmuls(model, RowQuantizer(model.graph, levels))
    onnx.checker.check_model(model)
    names = [init.name for init in model.graph.initializer]
    assert len(names) == len(set(names)) and names.count("w.int8") == 1
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = rng.standard_normal((6, 1, 16)).astype(np.float32)
    first = shifted_reference(np.maximum(x, 0), weight, levels, 0.0) + bias
    want = shifted_reference(np.maximum(first, 0).astype(np.float32), weight, levels, 0.0) + bias
    assert np.abs(session.run(None, {"x": x})[0] - want).max() < 1e-3
