"""The line splitter and event decoder behind watches."""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeop.client.watch import WatchEvent, decode_event, split_lines
from kubeop.core.errors import ApiError, Expired


async def _chunks(data: bytes, cuts: list[int]) -> AsyncIterator[bytes]:
    last = 0
    for cut in sorted(set(cuts)):
        yield data[last:cut]
        last = cut
    yield data[last:]


async def _collect(data: bytes, cuts: list[int]) -> list[bytes]:
    return [line async for line in split_lines(_chunks(data, cuts))]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(min_size=1, max_size=50).map(lambda b: b.replace(b"\n", b"x")), max_size=8),
    st.lists(st.integers(min_value=0, max_value=500), max_size=20),
    st.booleans(),
)
async def test_any_chunking_gives_the_same_lines(
    lines: list[bytes], cuts: list[int], trailing_newline: bool
) -> None:
    lines = [line for line in lines if line.strip()]
    data = b"\n".join(lines) + (b"\n" if trailing_newline else b"")
    cuts = [c for c in cuts if c <= len(data)]
    assert await _collect(data, cuts) == lines


async def test_blank_lines_are_skipped() -> None:
    assert await _collect(b"\n\na\n \nb", [1, 3]) == [b"a", b"b"]


def test_decode_event() -> None:
    event = decode_event(orjson.dumps({"type": "ADDED", "object": {"metadata": {"resourceVersion": "5"}}}))
    assert event == WatchEvent("ADDED", {"metadata": {"resourceVersion": "5"}})
    assert event.resource_version == "5" and not event.is_initial_events_end
    end = decode_event(
        orjson.dumps(
            {
                "type": "BOOKMARK",
                "object": {
                    "metadata": {"resourceVersion": "9", "annotations": {"k8s.io/initial-events-end": "true"}}
                },
            }
        )
    )
    assert end.is_initial_events_end
    with pytest.raises(Expired):
        decode_event(
            orjson.dumps(
                {
                    "type": "ERROR",
                    "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"},
                }
            )
        )
    with pytest.raises(ApiError, match="malformed watch event"):
        decode_event(b"{not json")
