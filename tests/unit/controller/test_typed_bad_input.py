"""Bad input on the typed path: an object that does not fit its model is a clear, terminal error
that leaves the worker running; a model written through a handle of another kind is a TypeError
at the call, before any request."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest
from pydantic import ConfigDict, Field

from kubeop.client import Client
from kubeop.controller import Context, Controller, Request, set_controller_reference
from kubeop.core.model import ModelMismatch, from_dict
from kubeop.crd import CamelModel, CustomResource
from kubeop.kinds import ConfigMap, Deployment, Secret
from kubeop.kinds.meta_v1 import ObjectMeta
from kubeop.manager import Manager, Serving
from kubeop.testing import FakeCluster

T = TypeVar("T")


class LooseSpec(CamelModel):
    model_config = ConfigDict(extra="allow")
    size: int | None = None


class Loose(CustomResource, group="typed.kubeop.dev", version="v1", kind="Thing", plural="things"):
    """What the CRD serves: any spec."""

    spec: LooseSpec = Field(default_factory=LooseSpec)


class StrictSpec(CamelModel):
    model_config = ConfigDict(extra="forbid")
    size: int


class Thing(CustomResource, group="typed.kubeop.dev", version="v1", plural="things"):
    """What the operator reads: a spec with exactly one required field."""

    spec: StrictSpec


def _thing(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": Thing.api_version,
        "kind": "Thing",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def test_a_missing_field_names_the_kind_the_object_and_the_field() -> None:
    with pytest.raises(ModelMismatch) as err:
        from_dict(Thing, _thing("small", {}))
    text = str(err.value)
    assert "Thing default/small does not fit the model Thing: spec.size: Field required" in text
    assert "make it optional" in text
    assert (err.value.kind, err.value.namespace, err.value.name) == ("Thing", "default", "small")
    assert err.value.errors == [("spec.size", "Field required")]


def test_an_extra_field_names_it_and_the_fix() -> None:
    with pytest.raises(ModelMismatch, match=r"spec\.colour: Extra inputs are not permitted.*extra='allow'"):
        from_dict(Thing, _thing("red", {"size": 1, "colour": "red"}))


def test_a_built_in_kind_names_the_nested_field() -> None:
    bad = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{"image": "nginx"}]}}},
    }
    with pytest.raises(
        ModelMismatch, match=r"Deployment shop/web .*spec\.template\.spec\.containers\[0\]\.name"
    ):
        from_dict(Deployment, bad)


async def eventually(probe: Callable[[], Awaitable[T | None]], timeout: float = 5.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout} s")
        await asyncio.sleep(0.001)


async def reconcile(req: Request, ctx: Context) -> None:
    thing = await ctx.client.get(Thing, req.name, namespace=req.namespace)
    if thing is None:
        return
    cm = ConfigMap(
        metadata=ObjectMeta(name=req.name, namespace=req.namespace), data={"size": str(thing.spec.size)}
    )
    set_controller_reference(thing, cm)
    await ctx.client.create_or_update(cm)


@contextlib.asynccontextmanager
async def running(cluster: FakeCluster) -> AsyncIterator[Client]:
    manager = Manager(
        cluster.client(),
        clock=cluster.clock,
        name="things",
        serving=Serving(metrics_address=None, health_address=None),
    )
    manager.add(Controller.for_(Thing).owns(ConfigMap).max_concurrent(1).reconcile(reconcile))
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    api = cluster.client()
    try:
        yield api
    finally:
        stop.set()
        await task
        await api.close()


async def test_a_mismatch_is_logged_terminal_and_the_worker_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    cluster = FakeCluster()
    cluster.add_crd(Loose)
    caplog.set_level(logging.ERROR, logger="kubeop")
    async with running(cluster) as api:
        await api.create(_thing("broken", {"colour": "red"}))
        await api.create(_thing("fine", {"size": 3}))

        async def made(name: str) -> Any:
            return await api.get_or_none(ConfigMap, name, namespace="default")

        cm = await eventually(lambda: made("fine"))
        assert cm.data == {"size": "3"}
        owner = cm.metadata.owner_references[0]
        assert (owner.kind, owner.name, owner.controller) == ("Thing", "fine", True)

        async def logged() -> bool:
            return any("broken" in r.getMessage() and "terminal" in r.getMessage() for r in caplog.records)

        await eventually(logged)
        text = next(r.getMessage() for r in caplog.records if "broken" in r.getMessage())
        assert "Thing default/broken does not fit the model Thing" in text and "spec.size" in text
        # The single worker survived: a later object is reconciled, and fixing the broken one heals it.
        await api.create(_thing("later", {"size": 5}))
        await eventually(lambda: made("later"))
        await api.patch(Thing, "broken", {"spec": {"colour": None, "size": 1}}, namespace="default")
        assert (await eventually(lambda: made("broken"))).data == {"size": "1"}


async def test_writing_a_model_through_another_kind_is_a_type_error() -> None:
    cluster = FakeCluster()
    async with cluster.client() as api:
        cm = ConfigMap(metadata=ObjectMeta(name="c", namespace="default"))
        with pytest.raises(TypeError, match=r"cannot write a ConfigMap \(v1 ConfigMap\) as Secret \(v1\)"):
            await api.create(cm, resource=Secret.resource)
        with pytest.raises(TypeError, match=r"as Deployment \(apps/v1\)"):
            await api.update(cm, resource=Deployment.resource)
        with pytest.raises(TypeError, match="cannot write a ConfigMap"):
            await api.patch(Secret, "c", cm, namespace="default")
        assert await api.get_or_none(ConfigMap, "c", namespace="default") is None
        created = await api.create(cm, resource=ConfigMap.resource)  # the right kind is fine
        assert isinstance(created, ConfigMap) and created.metadata.uid
