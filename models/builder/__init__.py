"""Model building: export of MarianMT checkpoints to validated ONNX bundles.

The only part of transqueue that imports torch, transformers, sentencepiece and onnx (the
optional ``[export]`` extra). The runtime (`models.translator` and its helpers) never
imports anything from here.
"""
