"""The one exception family that every refusal in laya belongs to.

Every error names what it refuses: the file, the field, the pin or the adapter.
Callers catch ``LayaError``; nothing from deep inside torch, json or safetensors
escapes the public API unwrapped.
"""

from __future__ import annotations


class LayaError(Exception):
    """Base of every error laya raises on purpose."""


class ArtifactError(LayaError):
    """An artifact directory or one of its files is malformed, missing or tampered with.

    ``file`` is the artifact-relative path (or the directory) and ``field`` the
    JSON field or tensor name at fault, when there is one.
    """

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None):
        self.file = file
        self.field = field
        where = ", ".join(part for part in (f"file {file}" if file else "", f"field {field}" if field else "") if part)
        super().__init__(f"{where}: {message}" if where else message)


class OutputExists(LayaError):
    """An output would replace something already at its path; ``file`` names the path."""

    def __init__(self, path):
        self.file = str(path)
        super().__init__(f"{path}: already exists (refusing to overwrite it)")

    def __reduce__(self):  # rebuilt from the path, not the message, when it crosses processes
        return type(self), (self.file,)


class DigestMismatch(ArtifactError):
    """A pinned file's bytes do not hash to the sha256 its manifest records."""


class PinMismatch(LayaError):
    """A head was offered to a base whose pinned identity differs from the head's own."""

    def __init__(self, message: str, *, pin: str, file: str | None = None):
        self.pin = pin
        self.file = file
        super().__init__(f"pin {pin}" + (f" (file {file})" if file else "") + f": {message}")


class UnsupportedAdapter(LayaError):
    """An artifact carries a non-null ``adapter`` payload, which no loader accepts."""


class RequestError(LayaError):
    """A prediction request is malformed; ``field`` names the offending request field."""

    def __init__(self, message: str, *, field: str | None = None):
        self.field = field
        super().__init__(f"request field {field}: {message}" if field else message)


class BudgetExceeded(RequestError):
    """A rendered request is longer than the head's sequence budget, or has more
    options than its option budget. Requests are refused, never clipped."""


class UnknownAdapter(RequestError):
    """``Adapters.predict`` was asked for an adapter id that was never opened."""


class NumericError(LayaError):
    """A forward produced a NaN or an infinity: finite weights can still overflow float32
    for some inputs. ``stage`` names where (encoder states, scores, probabilities) and
    ``source`` the artifact or base directory; nothing from that forward is served or cached."""

    def __init__(self, message: str, *, stage: str, source: str):
        self.stage = stage
        self.source = source
        super().__init__(f"{source}: {stage} {message}")


class Cancelled(LayaError):
    """The caller's cancel token fired; nothing computed so far was published."""


class FeaturePacketError(LayaError):
    """A frozen-feature packet does not match what it is being used for.

    ``field`` names the binding field that differed (labels, padding, ...).
    """

    def __init__(self, message: str, *, field: str | None = None, file: str | None = None):
        self.field = field
        self.file = file
        where = ", ".join(p for p in (f"file {file}" if file else "", f"field {field}" if field else "") if p)
        super().__init__(f"{where}: {message}" if where else message)


class DistributedError(LayaError):
    """A rank of a multi-process run died, raised, timed out or disagreed.

    ``phase`` names what the group was doing (``rendezvous`` or the job) and ``ranks``
    the rank(s) held responsible; the message names both.
    """

    def __init__(self, message: str, *, phase: str | None = None, ranks: tuple[int, ...] | list[int] = ()):
        self.phase = phase
        self.ranks = tuple(ranks)
        super().__init__(message)
