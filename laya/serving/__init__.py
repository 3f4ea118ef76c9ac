"""Serving: the verified frozen encoder, heads and their calibration, requests rendered
into token sequences, batches, the encoder-state cache, the gate, cancellation and JSONL.

The public names (``laya.load_artifact``, ``laya.open_adapters``, ``laya.Request`` ...) are
re-exported by ``laya`` itself: import them from there.
"""
