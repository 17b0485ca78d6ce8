"""Server-sent events read as a client reads them: a stream split into frames. Apart from
the ASGI app that writes them, so that a reader (the checker, in process) does not import
asyncio."""

from __future__ import annotations

import json as _json
import re
from typing import Any

import attrs


@attrs.frozen
class SseFrame:
    """One server-sent event: its `id:`, `event:` and the joined `data:` lines."""

    id: str | None
    event: str
    data: str

    def json(self) -> Any:
        return _json.loads(self.data)


_LINE_END = re.compile(r"\r\n|\r|\n")


def parse_sse(text: str) -> list[SseFrame]:
    """Split a `text/event-stream` body into frames; comments and empty frames drop out.
    As the WHATWG event-stream parser reads it: a line ends at CRLF, LF or a lone CR, and
    one leading byte-order mark is not part of the stream, and a frame whose data is
    empty is not an event."""
    frames: list[SseFrame] = []
    event_id: str | None = None
    event, data = "message", list[str]()
    for line in [*_LINE_END.split(text.removeprefix("\ufeff")), ""]:
        if line == "":
            if data and "\n".join(data):  # an empty data buffer dispatches nothing
                frames.append(SseFrame(event_id, event, "\n".join(data)))
            event_id, event, data = None, "message", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "id":
            event_id = value
        elif name == "event":
            event = value
        elif name == "data":
            data.append(value)
    return frames
