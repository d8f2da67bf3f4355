"""EtcdStorage against a real etcd (the control plane's binary, one etcd per test, started here):
the storage suite MemoryStorage and SQLiteStorage pass (tests/unit/apiserver/test_storage.py),
then what only etcd does: versions are etcd's revisions, two storages on one etcd see each
other's writes and conflicts, compaction is 410 for lists and watches, a put etcd refuses is a
clear error."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubeop.apiserver import ListOptions, StatusError, WatchOptions
from kubeop.apiserver import etcd as etcd_storage
from kubeop.apiserver.etcd import _CHUNK, EtcdStorage
from kubeop.core.selectors import FieldSelector, LabelSelector
from kubeop.testing.binaries import locate_binaries
from kubeop.testing.controlplane import free_port
from kubeop.testing.process import Process
from tests.unit.apiserver.test_storage import (
    R,
    obj,
    take,
    test_a_watcher_that_falls_behind_is_ended,
    test_close_ends_every_watch,
    test_list_filters_by_namespace_and_selectors,
    test_pages_come_from_the_first_pages_snapshot,
    test_returned_objects_are_copies,
    test_versions_increase_and_conflicts_are_409,
    test_watch_from_a_compacted_version_is_410,
    test_watch_replays_then_follows_and_sees_selector_transitions,
    test_watch_without_version_starts_with_the_objects_and_sends_bookmarks,
)

pytestmark = pytest.mark.controlplane

__all__ = [  # the shared suite, run here with the `make` below
    "test_a_watcher_that_falls_behind_is_ended",
    "test_close_ends_every_watch",
    "test_list_filters_by_namespace_and_selectors",
    "test_pages_come_from_the_first_pages_snapshot",
    "test_returned_objects_are_copies",
    "test_versions_increase_and_conflicts_are_409",
    "test_watch_from_a_compacted_version_is_410",
    "test_watch_replays_then_follows_and_sees_selector_transitions",
    "test_watch_without_version_starts_with_the_objects_and_sends_bookmarks",
]


def _post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.loads(resp.read())


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[str]:
    """A fresh etcd (compaction is etcd-wide, so each test has its own); fails if it cannot start."""
    client, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    process = Process(
        "etcd",
        [
            str(locate_binaries(full=False).etcd),
            "--name=test",
            f"--data-dir={tmp_path / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=test={peer}",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ],
        tmp_path / "etcd.log",
    )
    process.start()
    try:
        for _ in range(200):
            try:
                _post(client + "/v3/kv/range", {"key": base64.b64encode(b"/").decode()})
                break
            except OSError:
                if not process.alive():
                    break
                time.sleep(0.05)
        else:
            pytest.fail(f"etcd did not answer in 10 s:\n{process.log_tail()}")
        if not process.alive():
            pytest.fail(f"etcd exited:\n{process.log_tail()}")
        yield client
    finally:
        process.stop()


class _TestEtcdStorage(EtcdStorage):
    """The shared suite compacts with a plain call, as MemoryStorage's ``compact()``."""

    def compact(self, revision: int | None = None) -> int:  # type: ignore[override]
        latest = int(
            _post(self.url + "/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"]
        )
        _post(self.url + "/v3/kv/compaction", {"revision": str(latest), "physical": True})
        return latest


@pytest.fixture
async def make(etcd: str) -> AsyncIterator[Any]:
    made: list[EtcdStorage] = []

    def build(**options: Any) -> EtcdStorage:
        storage = _TestEtcdStorage(etcd, prefix=f"/test/{uuid.uuid4().hex}/", **options)
        made.append(storage)
        return storage

    yield build
    for storage in made:
        await storage.close()


async def test_versions_are_etcds_revisions_and_replicas_share_them(etcd: str) -> None:
    one, two = EtcdStorage(etcd, prefix="/shared/"), EtcdStorage(etcd, prefix="/shared/")
    try:
        watching = two.watch(R, WatchOptions())
        made = await one.create(R, "default", "a", obj("a"))
        header = _post(etcd + "/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]
        assert made["metadata"]["resourceVersion"] == header["revision"]
        (seen,) = await take(watching, 1)
        assert (seen.type, seen.object) == ("ADDED", made)
        assert await two.get(R, "default", "a") == made
        moved = await two.update(R, "default", "a", {**made, "spec": {"size": 2}}, resource_version=None)
        with pytest.raises(StatusError) as stale:
            await one.update(
                R, "default", "a", made, resource_version=int(made["metadata"]["resourceVersion"])
            )
        assert stale.value.code == 409
        (modified,) = await take(watching, 1)
        assert (modified.type, modified.object) == ("MODIFIED", moved)
        with pytest.raises(StatusError) as exists:
            await two.create(R, "default", "a", obj("a"))
        assert exists.value.reason == "AlreadyExists"
        await watching.aclose()
    finally:
        await one.close()
        await two.close()


async def test_compaction_is_410_and_a_fresh_list_works(etcd: str) -> None:
    storage = EtcdStorage(etcd, prefix="/compacted/")
    try:
        first = await storage.create(R, "default", "a", obj("a"))
        for name in "bc":
            await storage.create(R, "default", name, obj(name))
        page = await storage.list(R, ListOptions(limit=1))
        version = page.resource_version
        await storage.create(R, "default", "d", obj("d"))
        await storage.compact()
        with pytest.raises(StatusError) as expired:
            await storage.list(R, ListOptions(limit=1, continue_token=page.continue_token))
        assert (expired.value.code, expired.value.reason) == (410, "Expired")
        with pytest.raises(StatusError) as old:
            await storage.list(R, ListOptions(resource_version=version, exact=True))
        assert old.value.code == 410
        with pytest.raises(StatusError) as watch:
            await take(
                storage.watch(R, WatchOptions(resource_version=int(first["metadata"]["resourceVersion"]))), 1
            )
        assert watch.value.code == 410
        assert [i["metadata"]["name"] for i in (await storage.list(R, ListOptions())).items] == list("abcd")
        with pytest.raises(StatusError) as future:
            await storage.list(R, ListOptions(resource_version=storage.resource_version + 100))
        assert future.value.code == 504
        with pytest.raises(StatusError) as ahead:  # not served as "now": the client relists
            await take(storage.watch(R, WatchOptions(resource_version=storage.resource_version + 100)), 1)
        assert ahead.value.code == 504
        token = base64.urlsafe_b64encode(
            json.dumps({"v": storage.resource_version + 100, "ns": "default", "name": "a"}).encode()
        ).decode()
        with pytest.raises(StatusError) as forged:
            await storage.list(R, ListOptions(limit=1, continue_token=token.rstrip("=")))
        assert forged.value.code == 400
    finally:
        await storage.close()


async def test_refusals_name_the_cause(etcd: str) -> None:
    storage = EtcdStorage(etcd, prefix="/refused/")
    try:
        with pytest.raises(StatusError) as large:
            await storage.create(R, "default", "big", {**obj("big"), "data": "x" * (2 << 20)})
        assert large.value.code == 413 and "etcd" in str(large.value)
        with pytest.raises(StatusError) as missing:
            await storage.update(R, "default", "none", obj("none"), resource_version=None)
        assert missing.value.code == 404
    finally:
        await storage.close()
    unreachable = EtcdStorage(f"http://127.0.0.1:{free_port()}", timeout=2)
    with pytest.raises(StatusError) as down:
        await unreachable.get(R, "default", "a")
    assert down.value.code == 503 and "did not answer" in str(down.value)
    await unreachable.close()
    with pytest.raises(ValueError, match="url must be"):
        EtcdStorage("127.0.0.1:2379")
    await asyncio.sleep(0)


async def test_lists_span_several_etcd_ranges(etcd: str) -> None:
    """More objects than one range answer holds (and answers over aiohttp's read buffer)."""
    storage = EtcdStorage(etcd, prefix="/many/")
    try:
        names = [f"w{i:03d}" for i in range(230)]
        await asyncio.gather(
            *(storage.create(R, "default", n, {**obj(n), "data": "x" * 2000}) for n in names)
        )
        await storage.create(R, "other", "elsewhere", obj("elsewhere", "other"))
        listed = await storage.list(R, ListOptions(namespace="default"))
        assert [i["metadata"]["name"] for i in listed.items] == names
        first = await storage.list(R, ListOptions(namespace="default", limit=150))
        assert len(first.items) == 150 and first.remaining == 80
        rest = await storage.list(
            R, ListOptions(namespace="default", limit=150, continue_token=first.continue_token)
        )
        assert [i["metadata"]["name"] for i in first.items + rest.items] == names
        assert rest.continue_token is None
        odd = await storage.list(R, ListOptions(fields=FieldSelector.parse("metadata.namespace=other")))
        assert [i["metadata"]["name"] for i in odd.items] == ["elsewhere"]
    finally:
        await storage.close()


def _range_limits(storage: EtcdStorage, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ``limit`` of every range request ``storage`` makes from now on, in order."""
    asked: list[int] = []
    call = storage._call

    async def counted(path: str, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
        if path == "/v3/kv/range" and "limit" in body:
            asked.append(int(body["limit"]))
        return await call(path, body)

    monkeypatch.setattr(storage, "_call", counted)
    return asked


async def test_a_limit_larger_than_one_range_reads_etcd_in_bounded_ranges(
    etcd: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A list with a limit far above the objects there are (limit=100000) asks etcd for at most
    _CHUNK keys a range, never limit+1 at once: with the response cap at 4 MiB, each range of
    _CHUNK objects of 20 kB fits and all of them at once would not. The pages (and continue
    tokens) are those of a list read in one range: a limit above _CHUNK gathers items over several
    ranges, the token continuing from the same revision."""
    monkeypatch.setattr(etcd_storage, "_MAX_RESPONSE", 4 << 20)
    storage = EtcdStorage(etcd, prefix="/large-limit/")
    asked = _range_limits(storage, monkeypatch)
    try:
        names = [f"l{i:03d}" for i in range(2 * _CHUNK + 50)]
        labelled = [{"even": "yes"} if i % 2 == 0 else {} for i in range(len(names))]
        await asyncio.gather(
            *(
                storage.create(R, "default", n, {**obj(n, **labels), "data": "x" * 20_000})
                for n, labels in zip(names, labelled, strict=True)
            )
        )
        everything = await storage.list(R, ListOptions(limit=100_000))
        assert [i["metadata"]["name"] for i in everything.items] == names
        assert everything.continue_token is None and everything.remaining is None
        assert asked and max(asked) <= _CHUNK and len(asked) >= 3
        even = await storage.list(R, ListOptions(limit=100_000, labels=LabelSelector.parse("even=yes")))
        assert [i["metadata"]["name"] for i in even.items] == names[::2]
        first = await storage.list(R, ListOptions(limit=_CHUNK + 50))
        assert len(first.items) == _CHUNK + 50 and first.remaining == len(names) - _CHUNK - 50
        await storage.create(R, "default", "l999", obj("l999"))  # after the snapshot: not in its pages
        rest = await storage.list(R, ListOptions(limit=_CHUNK + 50, continue_token=first.continue_token))
        assert [i["metadata"]["name"] for i in first.items + rest.items] == names
        assert rest.resource_version == first.resource_version and rest.continue_token is None
        assert max(asked) <= _CHUNK
    finally:
        await storage.close()


def _compactions(etcd: str) -> int:
    """How many compactions etcd ran (its compaction-duration histogram's count)."""
    with urllib.request.urlopen(etcd + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    counts = [
        int(float(line.split()[-1]))
        for line in text.splitlines()
        if not line.startswith("#") and "db_compaction_total_duration_milliseconds_count" in line
    ]
    assert len(counts) == 1, "etcd's /metrics has no compaction-duration histogram"
    return counts[0]


async def test_history_compacts_once_per_history_writes_and_keeps_at_least_history(etcd: str) -> None:
    n = 5
    storage = EtcdStorage(etcd, prefix="/history/", history=n)
    try:
        before = _compactions(etcd)
        made = [await storage.create(R, "default", f"c{i}", obj(f"c{i}")) for i in range(3 * n)]
        assert 1 <= _compactions(etcd) - before <= 3
        first, last = (int(m["metadata"]["resourceVersion"]) for m in (made[0], made[-1]))
        with pytest.raises(StatusError) as old:
            await storage.list(R, ListOptions(resource_version=first, exact=True))
        assert old.value.code == 410
        kept = await storage.list(R, ListOptions(resource_version=last - n, exact=True))
        assert len(kept.items) == 3 * n - n
    finally:
        await storage.close()


async def test_a_range_of_large_objects_is_read_again_in_smaller_ranges(
    etcd: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Objects large enough that _CHUNK of them are over the response cap (near etcd's 1.5 MiB
    request limit, 100 would be 200 MiB of base64) are read in smaller ranges, not refused: a
    list of them must not fail for good. Here the cap is 300 kB and the objects 20 kB."""
    monkeypatch.setattr(etcd_storage, "_MAX_RESPONSE", 300_000)
    storage = EtcdStorage(etcd, prefix="/large-objects/")
    asked = _range_limits(storage, monkeypatch)
    try:
        names = [f"b{i:03d}" for i in range(60)]
        await asyncio.gather(
            *(storage.create(R, "default", n, {**obj(n), "data": "x" * 20_000}) for n in names)
        )
        listed = await storage.list(R, ListOptions())
        assert [i["metadata"]["name"] for i in listed.items] == names
        assert asked[0] == _CHUNK and min(asked) < _CHUNK and asked[-1] == min(asked)
        paged = await storage.list(R, ListOptions(limit=25))
        rest = await storage.list(R, ListOptions(continue_token=paged.continue_token))
        assert [i["metadata"]["name"] for i in paged.items + rest.items] == names
        await storage.create(R, "default", "huge", {**obj("huge"), "data": "x" * 400_000})
        with pytest.raises(StatusError, match=r"over 300000 bytes|too large"):
            await storage.list(R, ListOptions())  # one object over the cap is the server's error
    finally:
        await storage.close()
