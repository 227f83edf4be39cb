"""Model bundles: export (torch, optional extra) and the ONNX Runtime Translator."""
