"""Benchmarks: side-by-side timing in interleaved rounds, the serving benchmark's arms
(laya, PyTorch, ONNX Runtime) and the machine's limit they are compared with.
"""
