"""JSON-lines serving: one request per input line, one result per output line.

A bad line becomes an error object on its own output line (with its line number
and reason) and the run goes on; output order is input order and no line is lost.
"""

from __future__ import annotations

import json
from typing import IO, Any, Iterator

from laya.adapters import Adapters
from laya.errors import LayaError, RequestError
from laya.request import Request


def predict_lines(adapters: Adapters, lines: IO[bytes]) -> Iterator[dict[str, Any]]:
    for number, raw in enumerate(lines, start=1):
        try:
            yield {"line": number, **predict_line(adapters, raw)}
        except LayaError as exc:
            yield {"line": number, "error": {"type": type(exc).__name__, "field": getattr(exc, "field", None),
                                             "message": str(exc)}}


def predict_line(adapters: Adapters, raw: bytes) -> dict[str, Any]:
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
    prediction = adapters.predict(adapter_id, Request.from_json(obj))
    return {"prediction": prediction.to_json()}
