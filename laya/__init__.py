"""laya: a small runtime serving many calibrated task heads on one verified, frozen,
shared bidirectional encoder.

The public names are imported on first use, so that `import laya` (and `laya --help`,
and loading the laya_qual pytest plugin) does not pay for importing torch.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from laya import errors

__version__ = "0.1.0"

_HOME = {
    "Adapters": "laya.serving.adapters", "open_adapters": "laya.serving.adapters",
    "BaseOptions": "laya.serving.base", "VerifiedBase": "laya.serving.base",
    "CacheStats": "laya.serving.cache",
    "TaskInfo": "laya.serving.config",
    "Head": "laya.serving.loading", "Model": "laya.serving.loading", "load_artifact": "laya.serving.loading",
    "load_artifact_base": "laya.serving.loading", "load_artifact_with_base": "laya.serving.loading",
    "Prediction": "laya.serving.request", "Request": "laya.serving.request",
}

__all__ = [
    "Adapters", "BaseOptions", "CacheStats", "Head", "Model", "Prediction", "Request", "TaskInfo", "VerifiedBase", "errors",
    "load_artifact", "load_artifact_base", "load_artifact_with_base", "open_adapters",
]

if TYPE_CHECKING:  # pragma: no cover — typing only: type checkers read these; at run time __getattr__ imports lazily
    from laya.serving.adapters import Adapters, open_adapters
    from laya.serving.base import BaseOptions, VerifiedBase
    from laya.serving.cache import CacheStats
    from laya.serving.config import TaskInfo
    from laya.serving.loading import Head, Model, load_artifact, load_artifact_base, load_artifact_with_base
    from laya.serving.request import Prediction, Request


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'laya' has no attribute {name!r}")
    value = getattr(import_module(_HOME[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
