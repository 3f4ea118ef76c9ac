"""The one exception family that every refusal in laya belongs to.

Every error names what it refuses: the file, the field, the pin or the adapter.
Callers catch ``LayaError``; nothing from deep inside torch, json or safetensors
escapes the public API unwrapped.
"""

from __future__ import annotations

import unicodedata

# What a name may not hold (laya.artifact.text says why): control characters, lone surrogates, and the
# line and paragraph separators.
NAME_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})


def shown(text: str) -> str:
    """``text`` as a message prints it: each character a name may not hold written as its
    Python escape (``\\n``, ``\\x00``, ``\\ud800``), everything else as it is."""
    if all(unicodedata.category(c) not in NAME_FORBIDDEN_CATEGORIES for c in text):
        return text
    return "".join(c.encode("unicode_escape").decode("ascii") if unicodedata.category(c) in NAME_FORBIDDEN_CATEGORIES
                   else c for c in text)


def _located(message: str, *where: str | None) -> str:
    """``"where, where: message"`` naming what is at fault (file, line, field, pin), or the bare
    message when nothing is named: the one spelling of every located refusal. What is named
    is shown with its control characters and lone surrogates escaped (``shown``), so the
    message is one printable line whatever a file or request called it."""
    prefix = ", ".join(shown(part) for part in where if part)
    return f"{prefix}: {message}" if prefix else message


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
        super().__init__(_located(message, file and f"file {file}", field and f"field {field}"))


class OutputExists(LayaError):
    """An output would replace something already at its path; ``file`` names the path."""

    def __init__(self, path):
        self.file = str(path)
        super().__init__(_located("already exists (refusing to overwrite it)", self.file))

    def __reduce__(self):  # rebuilt from the path, not the message, when it crosses processes
        return type(self), (self.file,)


class WriteFailed(LayaError, OSError):
    """An output could not be written (a full disk, no permission, a file where a directory
    should be); ``file`` names the output and ``errno`` is the OS's. Nothing of it was left
    behind (laya.artifact.atomic). Still an OSError, for code that catches those."""

    def __init__(self, path, strerror: str, error_number: int | None = None):
        self.file = str(path)
        self.message = _located(f"cannot be written ({strerror})", self.file)
        super().__init__(self.message)
        self.errno, self.strerror = error_number, strerror

    def __str__(self) -> str:  # OSError's own says "[Errno N] strerror" and drops the path
        return self.message

    def __reduce__(self):
        return type(self), (self.file, self.strerror, self.errno)


class DigestMismatch(ArtifactError):
    """A pinned file's bytes do not hash to the sha256 its manifest records."""


class BindingMismatch(LayaError):
    """Bytes offered for a use they were not made for: a head's base pins, a feature store's
    identity. ``field`` names the first bound field that differs, ``file`` where it was read;
    each subclass passes its message already located, in its own words (laya.artifact.binding.require)."""

    def __init__(self, located: str, *, field: str, file: str | None):
        self.field = field
        self.file = file
        super().__init__(located)


class PinMismatch(BindingMismatch):
    """A head was offered to a base whose pinned identity differs from the head's own."""

    def __init__(self, message: str, *, pin: str, file: str | None = None):
        super().__init__(_located(message, f"pin {pin}" + (f" (file {file})" if file else "")), field=pin, file=file)

    @property
    def pin(self) -> str:
        """The pin that differs (a base role, or ``depth``): this binding's ``field``."""
        return self.field


class FeatureStoreMismatch(BindingMismatch):
    """A feature store does not belong to this base, process or dataset; ``field`` names what differs."""

    def __init__(self, message: str, *, field: str, file: str | None = None):
        super().__init__(_located(message, "feature store" + (f" {file}" if file else ""), f"field {field}"),
                         field=field, file=file)


class UnsupportedAdapter(LayaError):
    """An artifact carries a non-null ``adapter`` payload, which no loader accepts."""


class RequestError(LayaError):
    """A prediction request is malformed; ``field`` names the offending request field."""

    def __init__(self, message: str, *, field: str | None = None):
        self.field = field
        super().__init__(_located(message, field and f"request field {field}"))


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
        super().__init__(_located(f"{stage} {message}", source))


class Cancelled(LayaError):
    """The caller's cancel token fired; nothing computed so far was published."""


class FeaturePacketError(LayaError):
    """A frozen-feature packet does not match what it is being used for, or is no packet at all.

    ``field`` names the binding field that differed (labels, padding, ...). Not a
    ``BindingMismatch``: it also refuses an unreadable or foreign manifest, a missing
    certificate and token weights that define no loss (docs/decisions.md).
    """

    def __init__(self, message: str, *, field: str | None = None, file: str | None = None):
        self.field = field
        self.file = file
        super().__init__(_located(message, file and f"file {file}", field and f"field {field}"))


class DatasetError(LayaError):
    """A dataset line is malformed, or the splits overlap; names line and field."""

    def __init__(self, message: str, *, line: int | None = None, field: str | None = None):
        self.line = line
        self.field = field
        super().__init__(_located(message, line and f"line {line}", field and f"field {field}"))


class TrainingError(LayaError):
    """Training inputs do not fit together; ``field`` names what is wrong."""

    def __init__(self, message: str, *, field: str | None = None):
        self.field = field
        super().__init__(_located(message, field and f"field {field}"))


class DistributedError(LayaError):
    """A rank of a multi-process run died, raised, timed out or disagreed.

    ``phase`` names what the group was doing (``rendezvous`` or the job) and ``ranks``
    the rank(s) held responsible; the message names both.
    """

    def __init__(self, message: str, *, phase: str | None = None, ranks: tuple[int, ...] | list[int] = ()):
        self.phase = phase
        self.ranks = tuple(ranks)
        super().__init__(message)


class DeviceError(LayaError):
    """The device a run asks for (``cuda``) is not available to the process that would compute on it."""
