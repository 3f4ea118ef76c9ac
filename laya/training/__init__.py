"""Making artifacts: datasets, the frozen feature store, zero-layer head training,
temperature calibration, certified thresholds, export (``laya train``), and bases imported
from Hugging Face checkpoints (``laya base import``).

Builds on ``laya.serving`` and ``laya.artifact``; serving imports nothing from here.
"""
