"""The cache claims' oracle for entry sizes, written from docs/decisions.md, never read
from laya.serving.cache: float32 state bytes + 512 bytes + 8 bytes a token id."""

from __future__ import annotations


def documented_bytes(tokens: int, hidden: int) -> int:
    return 4 * tokens * hidden + 512 + 8 * tokens
