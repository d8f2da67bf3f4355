"""SQLiteStorage survives a restart: the objects, the versions (continued, never reused) and the
history a watch resumes from; one process per file; a write SQLite refuses changes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kubeop.apiserver import APIServer, StatusError, WatchOptions
from kubeop.apiserver.sqlite import SQLiteStorage
from tests.unit.apiserver.conftest import Env, Widget
from tests.unit.apiserver.test_http import NS, call, widget
from tests.unit.apiserver.test_storage import R, obj


async def test_a_restart_keeps_objects_versions_and_history(tmp_path: Path) -> None:
    path = tmp_path / "widgets.db"
    first = SQLiteStorage(path)
    a = await first.create(R, "default", "a", obj("a"))
    await first.create(R, "default", "b", obj("b"))
    await first.delete(R, "default", "b")
    version = first.resource_version
    await first.close()

    second = SQLiteStorage(path)
    assert second.resource_version == version
    assert await second.get(R, "default", "a") == a
    with pytest.raises(StatusError):
        await second.get(R, "default", "b")
    c = await second.create(R, "default", "c", obj("c"))
    assert int(c["metadata"]["resourceVersion"]) == version + 1
    events = second.watch(R, WatchOptions(resource_version=int(a["metadata"]["resourceVersion"])))
    async with asyncio.timeout(2):
        seen = [(e.type, e.object["metadata"]["name"]) for e in [await anext(events) for _ in range(3)]]
    assert seen == [("ADDED", "b"), ("DELETED", "b"), ("ADDED", "c")]
    await events.aclose()
    await second.close()


async def test_the_history_kept_is_bounded_and_older_versions_stay_410(tmp_path: Path) -> None:
    path = tmp_path / "widgets.db"
    first = SQLiteStorage(path, history=2)
    for name in "abcd":
        await first.create(R, "default", name, obj(name))
    await first.close()
    second = SQLiteStorage(path, history=2)
    with pytest.raises(StatusError) as expired:
        await anext(second.watch(R, WatchOptions(resource_version=1)))
    assert expired.value.code == 410
    assert second._db.execute("SELECT COUNT(*) FROM changes").fetchone()[0] == 2
    await second.close()


async def test_one_process_per_file(tmp_path: Path) -> None:
    first = SQLiteStorage(tmp_path / "widgets.db")
    with pytest.raises(RuntimeError, match="cannot open"):
        SQLiteStorage(tmp_path / "widgets.db")
    await first.close()


async def test_a_refused_write_changes_nothing(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "widgets.db")
    await storage.create(R, "default", "a", obj("a"))
    version = storage.resource_version
    storage._db.execute(
        "CREATE TRIGGER no_b BEFORE INSERT ON objects WHEN NEW.name = 'b' "
        "BEGIN SELECT RAISE(ABORT, 'no'); END"
    )
    with pytest.raises(StatusError) as refused:
        await storage.create(R, "default", "b", obj("b"))
    assert refused.value.code == 500
    assert storage.resource_version == version
    with pytest.raises(StatusError):
        await storage.get(R, "default", "b")
    await storage.close()


async def test_a_restarted_server_serves_the_same_objects(env: Env, tmp_path: Path) -> None:
    """The server over HTTPS, stopped and started again on the same SQLite file."""
    path = tmp_path / "served.db"
    config, review = env.server._authn.config, env.reviews  # type: ignore[union-attr]
    url = env.base.rsplit(":", 1)[0]
    made: dict[str, Any] = {}
    for attempt in range(2):
        server = APIServer(
            [Widget],
            SQLiteStorage(path),
            address="127.0.0.1:0",
            cert_dir=env.server.cert_dir,
            requestheader=config,
            review=review,
        )
        await server.start()
        try:
            async with env.as_user("alice") as s:
                base = f"{url}:{server.port}{NS}"
                if attempt == 0:
                    code, made = await call(s, "POST", base, widget("kept", 7))
                    assert code == 201
                else:
                    code, got = await call(s, "GET", base + "/kept")
                    assert code == 200 and got == made
                    code, moved = await call(
                        s, "PATCH", base + "/kept", {"spec": {"size": 8}}, "application/merge-patch+json"
                    )
                    assert int(moved["metadata"]["resourceVersion"]) > int(
                        made["metadata"]["resourceVersion"]
                    )
        finally:
            await server.stop()
