"""kopf's ``--namespace`` repeated and its patterns on the real control plane: plain names get an
informer each (objects elsewhere are not handled), patterns one cluster-wide informer filtered by
them (a matching namespace created after the start is handled too, a negated one is not)."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import kubeop.kopf as kopf
from kubeop.kopf.running import build_manager
from kubeop.testing import ControlPlane

pytestmark = pytest.mark.controlplane


@pytest.fixture
def prefix(control_plane: ControlPlane) -> Iterator[tuple[str, list[str]]]:
    """A unique name prefix, and the namespaces made with it (deleted afterwards)."""
    made: list[str] = []
    yield f"kns-{secrets.token_hex(3)}", made
    for name in made:
        control_plane.delete_namespace(name)


def registry(handled: list[tuple[str, str]]) -> kopf.Registry:
    reg = kopf.Registry()

    @kopf.on.create("configmaps", labels={"kopf-ns-test": "yes"}, registry=reg)
    def created(namespace: str, name: str, **_: Any) -> None:
        handled.append((namespace, name))

    return reg


@contextlib.asynccontextmanager
async def operator(reg: kopf.Registry, namespaces: list[str]) -> AsyncIterator[None]:
    stop, ready = asyncio.Event(), asyncio.Event()
    running = asyncio.create_task(
        kopf.operator(registry=reg, namespaces=namespaces, stop_flag=stop, ready_flag=ready)
    )
    try:
        await asyncio.wait_for(ready.wait(), 30)
        yield
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)


def make(cp: ControlPlane, made: list[str], namespace: str, cm: str = "cm") -> None:
    if namespace not in made:
        cp.create_namespace(namespace)
        made.append(namespace)
    cp.api.call(
        "POST",
        f"/api/v1/namespaces/{namespace}/configmaps",
        {"metadata": {"name": cm, "labels": {"kopf-ns-test": "yes"}}},
    )


async def settle(handled: list[tuple[str, str]], expected: set[tuple[str, str]], quiet: float = 1.0) -> None:
    """Wait for ``expected`` to be handled, then ``quiet`` seconds more for anything extra."""
    deadline = time.monotonic() + 20
    while not expected <= set(handled):
        assert time.monotonic() < deadline, f"handled {handled}, expected {expected}"
        await asyncio.sleep(0.05)
    await asyncio.sleep(quiet)
    assert sorted(handled) == sorted(expected)


async def test_several_plain_namespaces_get_an_informer_each(
    control_plane: ControlPlane, prefix: tuple[str, list[str]], kubeconfig_path: str, monkeypatch: Any
) -> None:
    monkeypatch.setenv("KUBECONFIG", kubeconfig_path)
    base, made = prefix
    a, b, other = f"{base}-a", f"{base}-b", f"{base}-other"
    for ns in (a, b, other):
        make(control_plane, made, ns, "before")
    handled: list[tuple[str, str]] = []
    reg = registry(handled)
    manager = build_manager(registry=reg, namespaces=[a, b])
    assert sorted(c.name for c in manager.controllers) == [f"kopf-configmaps@{a}", f"kopf-configmaps@{b}"]
    async with operator(reg, [a, b]):
        for ns in (a, b, other):
            make(control_plane, made, ns, "after")
        await settle(handled, {(a, "before"), (b, "before"), (a, "after"), (b, "after")})


async def test_patterns_serve_matching_namespaces_also_created_later(
    control_plane: ControlPlane, prefix: tuple[str, list[str]], kubeconfig_path: str, monkeypatch: Any
) -> None:
    monkeypatch.setenv("KUBECONFIG", kubeconfig_path)
    base, made = prefix
    team1, skipped, other = f"{base}-team-1", f"{base}-team-skip", f"{base}-other"
    for ns in (team1, skipped, other):
        make(control_plane, made, ns)
    handled: list[tuple[str, str]] = []
    async with operator(registry(handled), [f"{base}-team-*,!*-skip"]):
        await settle(handled, {(team1, "cm")}, quiet=0.2)
        make(control_plane, made, f"{base}-team-2")
        make(control_plane, made, f"{base}-other-2")
        await settle(handled, {(team1, "cm"), (f"{base}-team-2", "cm")})
