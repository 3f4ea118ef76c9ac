"""JSON-lines serving: one request per input line, one result per output line.

Lines are served in chunks, each through one ``Adapters.predict_many`` (one packed
forward; every prediction bitwise what its request gets alone, the cache used as one
at a time would use it). A chunk is at most ``batch_size`` lines and never waits for
input that has not arrived: once the lines read so far are all the input holds for
now, they are served, so a client that sends a line and waits for its answer is
answered. At most one chunk is read ahead, so an endless pipe is served in bounded
memory.

A bad line becomes an error object on its own output line (with its line number
and reason) and the rest of its chunk is served; output order is input order and no
line is lost.
"""

from __future__ import annotations

import io
import json
import select
from typing import IO, TYPE_CHECKING, Any, Iterator

from laya.errors import LayaError, RequestError
from laya.serving.request import Request

if TYPE_CHECKING:  # pragma: no cover — typing only: read by type checkers, never at run time
    from laya.serving.adapters import Adapters

# Lines per chunk by default: `laya predict --batch-size` and docs/decisions.md say why 32.
DEFAULT_BATCH_SIZE = 32
_READ_SIZE = 1 << 16  # bytes asked of the input per read; the most read past a full chunk


def predict_lines(adapters: Adapters, lines: IO[bytes], *,
                  batch_size: int = DEFAULT_BATCH_SIZE) -> Iterator[dict[str, Any]]:
    """Each input line's result object, in order."""
    for chunk in predict_chunks(adapters, lines, batch_size):
        yield from chunk


def predict_chunks(adapters: Adapters, lines: IO[bytes], batch_size: int) -> Iterator[list[dict[str, Any]]]:
    """The result objects chunk by chunk: a chunk is yielded when all its lines are served."""
    first = 1
    for chunk in read_chunks(lines, batch_size):
        yield serve_chunk(adapters, chunk, first)
        first += len(chunk)


def serve_chunk(adapters: Adapters, raws: list[bytes], first: int) -> list[dict[str, Any]]:
    """The result objects of consecutive lines numbered from ``first``; the lines that parse
    are predicted together."""
    parsed = [_parsed(raw) for raw in raws]
    served = iter(adapters.predict_many([p for p in parsed if not isinstance(p, LayaError)]))
    results = [p if isinstance(p, LayaError) else next(served) for p in parsed]
    return [{"line": number, **_outcome(result)} for number, result in enumerate(results, start=first)]


def encode_results(results: list[dict[str, Any]]) -> bytes:
    """The result lines as UTF-8 bytes, one per result, U+0085, U+2028 and U+2029 escaped
    (``_LINE_BREAKS``). A result whose text UTF-8 cannot carry (a lone surrogate, e.g. in an
    adapter id given as undecodable argv bytes) is written with ``\\uXXXX`` escapes
    instead: the same JSON value, so no line is lost."""
    return b"".join(_encoded(result) + b"\n" for result in results)


# Line breaks to some line splitters (Python's str.splitlines, older JavaScript) that JSON
# lets a string hold raw: written as escapes, so a result is one line to any reader.
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _encoded(result: dict[str, Any]) -> bytes:
    try:
        return json.dumps(result, ensure_ascii=False).translate(_LINE_BREAKS).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(result).encode("ascii")


def _outcome(result: Any) -> dict[str, Any]:
    if isinstance(result, LayaError):
        return {"error": {"type": type(result).__name__, "field": getattr(result, "field", None),
                          "message": str(result)}}
    return {"prediction": result.to_json()}


def _parsed(raw: bytes) -> tuple[Any, Request] | LayaError:
    try:
        return parse_line(raw)
    except LayaError as exc:
        return exc


def parse_line(raw: bytes) -> tuple[Any, Request]:
    """A line's ``(adapter id, Request)``; the adapter id is checked when it is served."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RequestError(f"line is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise RequestError(f"line is not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise RequestError("line is JSON nested deeper than the parser's recursion limit") from None
    except ValueError as exc:  # e.g. an integer literal past Python's digit limit
        raise RequestError(f"line is not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise RequestError(f"expected a JSON object, got {type(obj).__name__}")
    if "adapter" not in obj:
        raise RequestError("missing: every line names its adapter", field="adapter")
    adapter_id = obj.pop("adapter")
    return adapter_id, Request.from_json(obj)


def read_chunks(source: IO[bytes], size: int) -> Iterator[list[bytes]]:
    """Consecutive lines of ``source``, ``size`` at a time, or fewer when the next line has
    not arrived yet; each line without its newline (the last one may have had none)."""
    lines = LineReader(source)
    chunk: list[bytes] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == size or not lines.ready():
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class LineReader:
    """The lines of a binary stream, each without its newline, and whether the next one (or
    the end) can be read without waiting: a stream with a file descriptor (a pipe, a
    terminal) is polled for that; one without (bytes in memory) never makes a reader wait."""

    def __init__(self, source: IO[bytes]):
        self._read = getattr(source, "read1", source.read)
        self._fd = _pollable_fd(source)
        self._buffer = bytearray()
        self._scanned = 0  # the buffer's first bytes known to hold no newline
        self._eof = False

    def __iter__(self) -> Iterator[bytes]:
        while True:
            end = self._newline()
            if end < 0 and self._eof:
                if self._buffer:
                    yield bytes(self._buffer)
                return
            if end < 0:
                self._fill()
                continue
            line = bytes(self._buffer[:end])
            del self._buffer[:end + 1]
            self._scanned = 0
            yield line

    def ready(self) -> bool:
        while self._newline() < 0 and not self._eof:
            if self._fd is not None and not select.select([self._fd], [], [], 0)[0]:
                return False
            self._fill()  # data (or the end) is waiting: this read returns at once
        return True

    def _newline(self) -> int:
        end = self._buffer.find(b"\n", self._scanned)
        if end < 0:
            self._scanned = len(self._buffer)
        return end

    def _fill(self) -> None:
        data = self._read(_READ_SIZE)
        self._eof = not data
        self._buffer += data


def _pollable_fd(source: IO[bytes]) -> int | None:
    try:
        return source.fileno()
    except (AttributeError, io.UnsupportedOperation):
        return None
