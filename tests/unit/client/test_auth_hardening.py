"""Exec plugin timeouts with child processes, and shared credential refresh after 401 (issue #12).

A plugin that is a shell script starting a child used to outlive its timeout: the shell was
killed, the child kept stdout open, and the read waited for it (30 s instead of 1 s, with the
auth lock held). And after a 401 every failed request refreshed on its own: across a token-file
rotation 9 of 10 concurrent requests failed, and an exec plugin ran once per failed request.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp import web

from kubeop.client.auth import (
    Credentials,
    ExecAuth,
    StaticToken,
    TokenFile,
    refresh_after_unauthorized,
)
from kubeop.client.client import Client
from kubeop.client.config import ClientConfig, ConfigError, ExecConfig
from kubeop.client.retry import RetryPolicy
from kubeop.client.transport import HttpTransport
from kubeop.core.errors import Unauthorized
from kubeop.core.resource import ApiResource

from .fakeapi import FakeApi, json, start, status

CM_PATH = "/api/v1/namespaces/default/configmaps/a"
CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")
CM_BODY = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process groups and shell scripts")


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie nobody reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (macOS)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


async def gone(pid: int, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        await asyncio.sleep(0.02)
    return False


@pytest.fixture
def pids(tmp_path: Path) -> Iterator[Path]:
    """Where a script writes the pid of its background child; the child is killed afterwards."""
    path = tmp_path / "child.pid"
    yield path
    pid = read_pid(path)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)


def read_pid(path: Path) -> int | None:
    text = path.read_text().strip() if path.exists() else ""
    return int(text) if text else None


async def child_pid(path: Path) -> int:
    for _ in range(300):
        pid = read_pid(path)
        if pid is not None:
            return pid
        await asyncio.sleep(0.01)
    raise AssertionError("the plugin did not start its child")


def script(tmp_path: Path, body: str) -> ExecConfig:
    path = tmp_path / "plugin.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return ExecConfig(command=str(path), args=(str(tmp_path / "child.pid"),))


CREDENTIAL = (
    '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": "t"}}'
)

# -- defect 4: timeouts reach the plugin's children --------------------------------------------------


async def test_timeout_kills_a_child_that_holds_stdout(tmp_path: Path, pids: Path) -> None:
    # The shell waits for a child that inherited its stdout: killing only the shell left the
    # child holding the pipe, and the read waited 30 s for it.
    auth = ExecAuth(script(tmp_path, 'sleep 30 &\necho $! > "$1"\nwait\n'), timeout=1.0)
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"did not answer within 1 s"):
        await auth.credentials()
    assert time.monotonic() - started < 4.0
    assert await gone(await child_pid(pids)), "the plugin's child survived the timeout"


async def test_timeout_holds_even_if_the_child_ignores_sigterm(tmp_path: Path, pids: Path) -> None:
    body = "(trap '' TERM; exec sleep 30) &\necho $! > \"$1\"\nwhile :; do sleep 1; done\n"
    auth = ExecAuth(script(tmp_path, body), timeout=1.0)
    started = time.monotonic()
    with pytest.raises(ConfigError, match="did not answer"):
        await auth.credentials()
    assert time.monotonic() - started < 4.0
    assert await gone(await child_pid(pids))


async def test_cancelling_the_caller_kills_the_plugin_group(tmp_path: Path, pids: Path) -> None:
    auth = ExecAuth(script(tmp_path, 'sleep 30 &\necho $! > "$1"\nwait\n'), timeout=60.0)
    task = asyncio.create_task(auth.credentials())
    pid = await child_pid(pids)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(pid), "the plugin's child survived the cancellation"


async def test_an_answer_is_not_held_up_by_a_child_left_behind(tmp_path: Path, pids: Path) -> None:
    # The plugin answers and exits, but a child it started still holds stdout.
    body = f"echo '{CREDENTIAL}'\nsleep 30 &\necho $! > \"$1\"\nexit 0\n"
    auth = ExecAuth(script(tmp_path, body), timeout=20.0)
    started = time.monotonic()
    creds = await auth.credentials()
    assert creds.headers == {"Authorization": "Bearer t"}
    assert time.monotonic() - started < 4.0


async def test_stderr_is_kept_but_truncated(tmp_path: Path) -> None:
    body = (
        'i=0\nwhile [ $i -lt 300 ]; do echo "noise line $i" >&2; i=$((i+1)); done\n'
        "echo 'login required' >&2\nexit 2\n"
    )
    with pytest.raises(ConfigError) as info:
        await ExecAuth(script(tmp_path, body)).credentials()
    message = str(info.value)
    assert "exited with status 2" in message and message.endswith("login required")
    assert len(message) < 1400 and "noise line 0\n" not in message


# -- defect 5: one refresh for concurrent 401s ------------------------------------------------------


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    async for fake in start():
        yield fake


def accept_only(api: FakeApi, current: list[str], rejected: list[str], delay: float = 0.1) -> None:
    """The fake API server accepts only ``Bearer current[0]``; a 401 is answered after ``delay``
    seconds so that every concurrent request is sent before any of them is refused."""

    async def handler(request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        if auth != f"Bearer {current[0]}":
            rejected.append(auth)
            await asyncio.sleep(delay)
            return status(401, "Unauthorized", "Unauthorized")
        return json(CM_BODY)

    api.route("GET", CM_PATH, handler)


def client_for(api: FakeApi, **options: object) -> tuple[Client, HttpTransport]:
    config = ClientConfig(server=api.url, qps=None, **options)  # type: ignore[arg-type]
    transport = HttpTransport(config, retry=RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.01))
    return Client(transport=transport), transport


async def test_token_file_rotation_with_concurrent_requests(api: FakeApi, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one\n")
    current, rejected = ["one"], []
    accept_only(api, current, rejected)
    client, transport = client_for(api, token_file=str(token))
    async with client:
        assert await client.get(CM, "a") == CM_BODY  # "one" is cached now
        token.write_text("two\n")  # the kubelet rotates the token...
        current[0] = "two"  # ...and the old one stops working
        results = await asyncio.gather(*(client.get(CM, "a") for _ in range(10)), return_exceptions=True)
    assert results == [CM_BODY] * 10, [r for r in results if r != CM_BODY]
    assert rejected == ["Bearer one"] * 10
    assert isinstance(transport.auth, TokenFile) and transport.auth.generation == 2


PLUGIN = """\
import json, pathlib, sys, time
counter = pathlib.Path(sys.argv[1])
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
time.sleep(0.05)
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": f"token-{n}"}}))
"""


def counting_plugin(tmp_path: Path) -> tuple[ExecConfig, Path]:
    path = tmp_path / "plugin.py"
    path.write_text(PLUGIN)
    counter = tmp_path / "count"
    return ExecConfig(command=sys.executable, args=(str(path), str(counter))), counter


async def test_exec_plugin_runs_once_for_concurrent_401s(api: FakeApi, tmp_path: Path) -> None:
    spec, counter = counting_plugin(tmp_path)
    current, rejected = ["token-1"], []
    accept_only(api, current, rejected)
    client, transport = client_for(api, exec=spec)
    async with client:
        assert await client.get(CM, "a") == CM_BODY
        current[0] = "token-2"  # token-1 is revoked; the plugin's next run gets the new one
        results = await asyncio.gather(*(client.get(CM, "a") for _ in range(20)), return_exceptions=True)
    assert results == [CM_BODY] * 20, [r for r in results if r != CM_BODY]
    assert isinstance(transport.auth, ExecAuth)
    assert transport.auth.runs <= 2 and int(counter.read_text()) <= 2
    assert len(rejected) == 20


async def test_rejected_credentials_fail_after_bounded_refreshes(api: FakeApi, tmp_path: Path) -> None:
    spec, counter = counting_plugin(tmp_path)
    current, rejected = ["nothing the plugin prints"], []
    accept_only(api, current, rejected, delay=0.05)
    client, _ = client_for(api, exec=spec)
    async with client:
        results = await asyncio.gather(*(client.get(CM, "a") for _ in range(20)), return_exceptions=True)
    assert all(isinstance(r, Unauthorized) for r in results)
    # One first run, then at most one refresh per round of retries (two rounds), not one per request.
    assert int(counter.read_text()) <= 3


async def test_refresh_is_shared_and_skipped_for_replaced_credentials(tmp_path: Path) -> None:
    spec, _ = counting_plugin(tmp_path)
    auth = ExecAuth(spec)
    used = await auth.credentials()
    assert used.generation == 1
    # Ten requests failed with the same credentials at once: one plugin run.
    assert all(await asyncio.gather(*(refresh_after_unauthorized(auth, used) for _ in range(10))))
    assert auth.runs == 2 and (await auth.credentials()).generation == 2
    # A late 401 for the old credentials retries with the new ones, no run.
    assert await refresh_after_unauthorized(auth, used)
    assert auth.runs == 2
    # A static token cannot be renewed.
    static = StaticToken("t")
    assert not await refresh_after_unauthorized(static, await static.credentials())


async def test_custom_auth_still_gets_a_plain_refresh() -> None:
    class Custom:
        def __init__(self) -> None:
            self.token = "a"
            self.refreshes = 0

        async def credentials(self) -> Credentials:
            return Credentials({"Authorization": f"Bearer {self.token}"})

        async def refresh(self) -> bool:
            self.refreshes += 1
            return False

    auth = Custom()
    old = await auth.credentials()
    assert not await refresh_after_unauthorized(auth, old)
    auth.token = "b"  # changed by someone else since the request was sent: worth a retry
    assert await refresh_after_unauthorized(auth, old)
    assert auth.refreshes == 2
