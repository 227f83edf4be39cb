"""Run by tests/test_portable.py, natively and under qemu-user emulating another CPU:

    python tests/cross_cpu_probe.py OUT.npz

saves ONNX Runtime's own Softmax over 32 inputs (whose kernel is picked by instruction set:
the control) and, for the demo bundle's int8 graphs, the cross K/V and every step's logits
of the regression sentences with the most source ids (attention over 17 and more).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from models.builder.validate import regression_sentences  # noqa: E402
from models.translator import Translator  # noqa: E402

SENTENCES = 12


def softmax_control() -> np.ndarray:
    """ONNX Runtime's Softmax over seeded random rows of 32."""
    node = helper.make_node("Softmax", ["x"], ["y"], axis=-1)
    shape = [2, 4, 5, 32]
    graph = helper.make_graph(
        [node],
        "softmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rows = np.random.default_rng(0).standard_normal(shape).astype(np.float32) * 4
    return session.run(None, {"x": rows})[0]


def main() -> None:
    """Write the control and the demo bundle's outputs to sys.argv[1]."""
    translator = Translator(threads=1, warmup=False)
    longest = sorted(regression_sentences(), key=lambda s: -len(translator.codec.encode(s)))[:SENTENCES]
    saved = {"softmax": softmax_control()}
    for number, sentence in enumerate(longest):
        ids = translator.codec.encode(sentence)
        saved[f"cross{number}"] = np.stack(translator.start([ids]).cross)
        tokens, _ = translator.generate(ids)
        steps = translator.step_logits(ids, [translator.config.decoder_start_token_id, *tokens])
        saved[f"logits{number}"] = np.stack(list(steps))
    np.savez(sys.argv[1], **saved)


if __name__ == "__main__":
    main()
