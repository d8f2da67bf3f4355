"""Property: whatever the server does and however the connection fails, an informer converges to
the server's state, and its handlers see a consistent story (no update or delete of an object
they were never told about, no second add)."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeop.cache import BackoffConfig, Informer, WatcherConfig, object_key

from .fakes import FakeListWatch, FakeServer, server_probe

CONFIG = WatcherConfig(backoff=BackoffConfig(initial=0.005, cap=0.02, jitter=0.5), stall_timeout=0.08)

names = st.sampled_from(["a", "b", "c", "d", "e"])
steps = st.lists(
    st.one_of(
        st.tuples(st.just("create"), names),
        st.tuples(st.just("update"), names),
        st.tuples(st.just("delete"), names),
        st.tuples(st.just("break"), st.none()),
        st.tuples(st.just("end"), st.none()),
        st.tuples(st.just("compact"), st.none()),
        st.tuples(st.just("outage"), st.none()),
        st.tuples(st.just("freeze"), st.none()),
        st.tuples(st.just("wait"), st.integers(0, 3)),
    ),
    max_size=25,
)


class Replica:
    """Rebuilds the cache from handler events, checking that they make sense."""

    def __init__(self) -> None:
        self.objects: dict[str, Any] = {}

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        key = object_key(obj)
        assert key not in self.objects, f"second add of {key}"
        self.objects[key] = obj

    def on_update(self, old: Any, new: Any) -> None:
        key = object_key(new)
        assert self.objects.get(key) is old, f"update of {key} from a state never delivered"
        self.objects[key] = new

    def on_delete(self, obj: Any) -> None:
        key = object_key(obj)
        assert key in self.objects, f"delete of unknown {key}"
        del self.objects[key]


async def scenario(ops: list[tuple[str, Any]], streaming: bool) -> None:
    server = FakeServer(streaming=streaming, bookmark_interval=0.02)
    for name in "abc":
        server.create(name, k="0")
    informer = Informer(FakeListWatch(server, probe=server_probe(server, interval=0.005)), config=CONFIG)
    replica = Replica()
    informer.add_event_handler(replica)
    informer.start()
    try:
        assert await informer.wait_for_sync(5)
        # Stall detection is armed by the server's first bookmark (sent about every minute by a
        # real API server, every 20 ms here); a connection frozen before that is only ended by
        # the transport's deadline, minutes later: not what this test is about.
        for _ in range(1000):
            if informer.watcher.stats.bookmarks:
                break
            await asyncio.sleep(0.005)
        for version, (op, arg) in enumerate(ops, 1):
            key = f"default/{arg}"
            if op == "create" and key not in server.objects:
                server.create(arg, k=str(version))
            elif op == "update" and key in server.objects:
                server.update(arg, k=str(version))
            elif op == "delete" and key in server.objects:
                server.delete(arg)
            elif op == "break":
                server.break_streams()
            elif op == "end":
                server.end_streams()
            elif op == "compact":
                server.compact()
                server.break_streams()
            elif op == "outage":
                server.go_down()
                await asyncio.sleep(0.02)
                server.down = False
            elif op == "freeze":
                server.freeze_streams()
            elif op == "wait":
                await asyncio.sleep(arg * 0.01)
        # A final change proves the watch is live again, then everything must match.
        server.create("zz-final", k="end")
        deadline = asyncio.get_running_loop().time() + 5
        while True:
            cached = {object_key(o): o for o in informer.store.list()}
            if {k: v["data"] for k, v in cached.items()} == {k: v["data"] for k, v in server.objects.items()}:
                break
            assert asyncio.get_running_loop().time() < deadline, (
                cached.keys(),
                server.objects.keys(),
                informer.watcher.stats,
                server.requests,
                len(server.streams),
                informer.watcher.resource_version,
                server.rv,
                server.compacted,
            )
            await asyncio.sleep(0.01)
        assert replica.objects == cached
        for key, obj in cached.items():
            assert obj["metadata"]["resourceVersion"] == server.objects[key]["metadata"]["resourceVersion"]
    finally:
        await informer.stop()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, st.booleans())
def test_informer_converges_through_any_faults(ops: list[tuple[str, Any]], streaming: bool) -> None:
    asyncio.run(scenario(ops, streaming))
