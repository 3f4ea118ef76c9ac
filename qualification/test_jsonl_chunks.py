"""jsonl.chunks: `laya predict --batch-size N` cuts its input into chunks of up to N lines,
and a chunk never waits for a line that has not arrived (docs/serving.md, "Request and
result lines").

Oracle: the lines written into a real pipe, cut by hand into consecutive groups of N. With
the writer still open, the chunks that come without waiting are exactly those groups (the
last one shorter, blank lines counted); a last line written without its newline, then the
end of input, is a chunk of its own.
"""

from __future__ import annotations

import itertools
import os
import threading

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from laya.serving.jsonl import read_chunks
from laya_qual.synth.wire import stream_line, stream_lines

DEADLINE_S = 10.0  # turns a reader that waits for an unsent line into a failure; not a speed claim


def groups(lines: list[bytes], size: int) -> list[list[bytes]]:
    return [lines[i:i + size] for i in range(0, len(lines), size)]


@pytest.mark.laya_claim("jsonl.chunks")
@given(lines=stream_lines(), size=st.integers(1, 8), last=stream_line())
@example(lines=[b"{}", b"", b"{}"], size=4, last=b"")  # a blank line inside a chunk is one of its lines
@example(lines=[b"{}", b""], size=8, last=b"{}")      # ... and as the last line that has arrived
@example(lines=[b""] * 3, size=1, last=b"")
@example(lines=[], size=1, last=b"{}")
def test_a_chunk_takes_the_lines_that_have_arrived_and_never_waits(lines, size, last):
    read_end, write_end = os.pipe()
    os.write(write_end, b"".join(line + b"\n" for line in lines))
    expected, got = groups(lines, size), []
    with open(read_end, "rb") as source:
        chunks = read_chunks(source, size)
        taker = threading.Thread(target=lambda: got.extend(itertools.islice(chunks, len(expected))), daemon=True)
        taker.start()
        taker.join(DEADLINE_S)
        waited = taker.is_alive()
        os.write(write_end, last)
        os.close(write_end)  # the end of input; also frees a reader that waited (wrongly)
        taker.join(DEADLINE_S)
        assert not waited, f"a chunk waited for a line that had not arrived (got {got})"
        assert got == expected
        assert list(chunks) == ([[last]] if last else [])
