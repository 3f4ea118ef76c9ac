"""laya: a small runtime serving many calibrated task heads on one verified, frozen,
shared bidirectional encoder."""

from laya import errors
from laya.adapters import Adapters, open_adapters
from laya.base import BaseOptions, VerifiedBase
from laya.cache import CacheStats
from laya.config import TaskInfo
from laya.model import Head, Model, load_artifact, load_artifact_base, load_artifact_with_base
from laya.request import Prediction, Request

__version__ = "0.1.0"

__all__ = [
    "Adapters", "BaseOptions", "CacheStats", "Head", "Model", "Prediction", "Request", "TaskInfo", "VerifiedBase", "errors",
    "load_artifact", "load_artifact_base", "load_artifact_with_base", "open_adapters",
]
