"""ListDecoder: items of a list body as they arrive, always equal to decoding the whole body."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeop.client.http import ProtocolError
from kubeop.client.liststream import ListDecoder


def decode(body: bytes, cuts: list[int]) -> tuple[list[Any], dict[str, Any] | None, list[int]]:
    """Feed ``body`` cut at ``cuts``; returns all items, the head, and how many items each feed
    returned."""
    dec = ListDecoder()
    items: list[Any] = []
    counts = []
    start = 0
    for cut in [*sorted(set(cuts)), len(body)]:
        got = dec.feed(body[start:cut])
        counts.append(len(got))
        items += got
        start = cut
    items += dec.finish()
    return items, dec.head, counts


def cm(i: int, **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": f"cm-{i}", "namespace": "ns", "resourceVersion": str(i)},
        "data": {"v": str(i)},
    } | extra


def body_of(items: list[Any], **tail: Any) -> bytes:
    doc = {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": "7", "continue": "c"}}
    doc["items"] = items
    doc.update(tail)
    return orjson.dumps(doc)


def test_items_come_out_as_soon_as_the_next_one_starts() -> None:
    items = [cm(i) for i in range(5)]
    body = body_of(items)
    dec = ListDecoder()
    second = body.index(b'},{"metadata"', body.index(b'"items":[')) + 2
    assert dec.feed(body[:second]) == []  # the first item's end is not known yet
    assert dec.head == {
        "kind": "ConfigMapList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "7", "continue": "c"},
    }
    assert dec.feed(body[second : second + 15]) == [items[0]]
    assert dec.feed(body[second + 15 :]) == items[1:4]
    assert dec.finish() == items[4:]


# Items whose insides look like item boundaries: lists of objects starting with the same key,
# the pattern inside strings (escaped), nested "items" lists, unicode.
tricky = [
    cm(1, spec={"templates": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}),
    cm(2, data={"s": '},{"metadata":{"name":"x"}}', "t": "}]}", "u": "\\", "v": "é\u2028"}),
    cm(3, spec={"items": [{"metadata": {}}, {"metadata": {"items": []}}]}),
    {"metadata": {"name": "odd"}},
    cm(4, spec={"deep": [[{"metadata": 1}, {"metadata": 2}]]}),
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(tricky), max_size=8), st.lists(st.integers(0, 4000), max_size=12), st.booleans()
)
def test_any_cut_of_any_list_decodes_like_the_whole_body(
    items: list[Any], cuts: list[int], with_tail: bool
) -> None:
    body = body_of(items, extra={"after": [{"metadata": 1}]}) if with_tail else body_of(items)
    whole = orjson.loads(body)
    got, head, _ = decode(body, [c % (len(body) + 1) for c in cuts])
    assert got == whole.pop("items")
    assert head == whole


def test_custom_resources_split_on_their_first_key() -> None:
    items = [
        {
            "apiVersion": "x/v1",
            "kind": "W",
            "metadata": {"name": f"w{i}", "ownerReferences": [{"apiVersion": "v1"}, {"apiVersion": "v2"}]},
        }
        for i in range(50)
    ]
    body = body_of(items)
    got, _, counts = decode(body, list(range(0, len(body), 500)))
    assert got == items
    assert sum(counts) == 49  # all but the last came out while feeding


@pytest.mark.parametrize(
    "body",
    [
        b'{"kind":"L","items":[]}',
        b'{"kind":"L","metadata":{},"items":[]}',
        b'{"items":[{"a":1},{"a":2}],"metadata":{"resourceVersion":"5"}}',  # head after the items
        b'{"kind": "L", "items": [ {"a": 1}, {"a": 2} ] }',  # not compact: decoded at the end
        b'{"kind":"L","items":[\n{"a":1},\n{"a":2}]}',
        b'{"metadata":{"x":{"items":[1]}},"items":[{"a":1},{"a":2}]}',  # a nested "items" first
        b'{"kind":"L"}',
    ],
)
def test_other_layouts_still_decode_like_the_whole_body(body: bytes) -> None:
    whole = json.loads(body)
    items = whole.pop("items", [])
    for step in (1, 3, len(body)):
        got, head, _ = decode(body, list(range(0, len(body), step)))
        assert got == items
        assert head == whole


def test_a_truncated_or_wrong_body_raises() -> None:
    body = body_of([cm(1), cm(2)])
    dec = ListDecoder()
    dec.feed(body[:-5])
    with pytest.raises(orjson.JSONDecodeError):
        dec.finish()
    dec = ListDecoder()
    dec.feed(b"[1,2]")
    with pytest.raises(ValueError, match="not a JSON object"):
        dec.finish()
    dec = ListDecoder()
    dec.feed(b'{"items":{"a":1}}')
    with pytest.raises(ValueError, match="not a list"):
        dec.finish()


def test_a_body_over_the_limit_is_refused() -> None:
    dec = ListDecoder(max_body=100)
    dec.feed(b"x" * 100)
    with pytest.raises(ProtocolError, match="larger than 100 bytes"):
        dec.feed(b"x")
