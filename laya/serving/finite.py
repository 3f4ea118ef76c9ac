"""Non-finite numbers are refused where they appear, before anything serves or caches them.

Weights that are finite can still overflow float32 for some inputs (a huge embedding
row, a temperature near zero); the answer is a ``NumericError`` naming the stage and
the artifact, never a NaN probability or a NaN entry in the encoder-state cache.
"""

from __future__ import annotations

import torch

from laya.errors import NumericError


def require_finite(values: torch.Tensor, stage: str, source: str) -> None:
    if not bool(torch.isfinite(values).all()):
        raise NumericError("are not finite (NaN or ±inf): the weights overflow float32 for this input",
                           stage=stage, source=source)
