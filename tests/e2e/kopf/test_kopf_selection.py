"""kopf's resource selectors on the real control plane, through ``kopf.operator()`` as a kopf
operator runs: ``('v1', 'Secret')`` (the core group by version and kind), a CRD's short name and
its category each handle real objects, and ``@kopf.index``/``@kopf.on.validate`` select many
resources (``kopf.EVERYTHING``, a category): discovery resolves them all at start, as kopf does."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
import uuid
from typing import Any

import pytest

import kubeop.kopf as kopf
from kubeop.testing import ControlPlane
from tests.support.crds import widget_crd

pytestmark = pytest.mark.controlplane

GROUP = "selection.kopf.kubeop.dev"
CRD = copy.deepcopy(widget_crd(GROUP, plural="selwidgets", kind="SelWidget", free_spec=True))
CRD["spec"]["names"].update(shortNames=["selw"], categories=["kubeop-selection"])


async def test_v1_kind_short_name_and_category_handle_real_objects(
    control_plane: ControlPlane, namespace: str, kubeconfig_path: str, monkeypatch: Any
) -> None:
    monkeypatch.setenv("KUBECONFIG", kubeconfig_path)
    control_plane.install_crds([CRD])
    handled: list[tuple[str, str]] = []
    reg = kopf.Registry()

    @kopf.on.create("v1", "Secret", labels={"kopf-selection": "yes"}, registry=reg)
    def secret(name: str, **_: Any) -> None:
        handled.append(("secret", name))

    @kopf.on.create("selw", registry=reg)
    def by_short_name(name: str, **_: Any) -> None:
        handled.append(("short name", name))

    @kopf.on.event(category="kubeop-selection", registry=reg)
    def by_category(name: str, type: str | None, **_: Any) -> None:
        if type in (None, "ADDED"):
            handled.append(("category", name))

    stop, ready = asyncio.Event(), asyncio.Event()
    running = asyncio.create_task(
        kopf.operator(registry=reg, namespaces=[namespace], stop_flag=stop, ready_flag=ready)
    )
    try:
        await asyncio.wait_for(ready.wait(), 30)
        control_plane.api.call(
            "POST",
            f"/api/v1/namespaces/{namespace}/secrets",
            {"metadata": {"name": "s1", "labels": {"kopf-selection": "yes"}}},
        )
        control_plane.api.call(
            "POST",
            f"/apis/{GROUP}/v1/namespaces/{namespace}/selwidgets",
            {"apiVersion": f"{GROUP}/v1", "kind": "SelWidget", "metadata": {"name": "w1"}, "spec": {}},
        )
        expected = {("secret", "s1"), ("short name", "w1"), ("category", "w1")}
        deadline = time.monotonic() + 30
        while not expected <= set(handled):
            assert not running.done(), running.result()
            assert time.monotonic() < deadline, f"handled {handled}, expected {sorted(expected)}"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        assert sorted(handled) == sorted(expected)  # each once
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)


MANY = "kubeop-selection-many"
GADGETS = copy.deepcopy(widget_crd(GROUP, plural="selgadgets", kind="SelGadget", free_spec=True))
GADGETS["spec"]["names"]["categories"] = [MANY]
THINGS = copy.deepcopy(widget_crd(GROUP, plural="selthings", kind="SelThing", free_spec=True))
THINGS["spec"]["names"]["categories"] = [MANY]


def _obj(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": kind,
        "metadata": {"name": name, "labels": {"kopf-many": "yes"}},
        "spec": spec,
    }


async def test_index_over_everything_and_admission_over_a_category_on_real_objects(
    control_plane: ControlPlane, namespace: str, kubeconfig_path: str, monkeypatch: Any
) -> None:
    """``@kopf.index(kopf.EVERYTHING)`` indexes the labelled objects of every resource (a Secret, a
    ConfigMap, two CRDs' objects) in one index; ``@kopf.on.validate(category=...)`` gets one
    webhook rule per resource of the category, and the API server calls it for both, its
    ``resource`` kwarg being the ``kopf.Resource`` of the object's resource."""
    monkeypatch.setenv("KUBECONFIG", kubeconfig_path)
    control_plane.install_crds([GADGETS, THINGS])
    reg = kopf.Registry()
    admitted: list[kopf.Resource] = []
    indices: list[kopf.Index[str, str]] = []

    @kopf.index(kopf.EVERYTHING, labels={"kopf-many": "yes"}, registry=reg, id="labelled")
    def labelled(name: str, resource: kopf.Resource, **_: Any) -> Any:
        return {resource.kind: name}

    @kopf.on.validate(category=MANY, registry=reg, id="no_bad")
    def no_bad(spec: kopf.Spec, resource: kopf.Resource, **_: Any) -> None:
        admitted.append(resource)
        if spec.get("bad"):
            raise kopf.AdmissionError(f"no bad {resource.kind}", code=422)

    @kopf.on.create("SelThing", registry=reg)
    def keep(labelled: kopf.Index[str, str], **_: Any) -> None:
        indices.append(labelled)

    async def call(*args: Any) -> Any:
        # in a thread: the API server calls back this loop's webhook server before it answers
        return await asyncio.to_thread(control_plane.api.call, *args)

    managed = f"e2e-many-{uuid.uuid4().hex[:8]}.kubeop.dev"
    settings = kopf.OperatorSettings()
    settings.admission.server = kopf.WebhookAutoServer(addr="127.0.0.1")
    settings.admission.managed = managed
    stop, ready = asyncio.Event(), asyncio.Event()
    running = asyncio.create_task(
        kopf.operator(
            registry=reg, settings=settings, namespaces=[namespace], stop_flag=stop, ready_flag=ready
        )
    )
    base = f"/apis/{GROUP}/v1/namespaces/{namespace}"
    try:
        await asyncio.wait_for(ready.wait(), 60)
        deadline = time.monotonic() + 30
        while True:  # the configuration is written once the server listens
            assert not running.done(), running.result()
            try:
                config = await call(
                    "GET", f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{managed}"
                )
            except RuntimeError:  # not written yet
                config = {}
            if config.get("webhooks"):
                break
            assert time.monotonic() < deadline, "the validating configuration was not written"
            await asyncio.sleep(0.1)
        (hook,) = config["webhooks"]
        assert sorted(r["resources"][0] for r in hook["rules"]) == ["selgadgets", "selthings"]
        labels = {"kopf-many": "yes"}
        await call(
            "POST", f"/api/v1/namespaces/{namespace}/secrets", {"metadata": {"name": "s", "labels": labels}}
        )
        await call(
            "POST",
            f"/api/v1/namespaces/{namespace}/configmaps",
            {"metadata": {"name": "c", "labels": labels}},
        )
        deadline = time.monotonic() + 30
        while True:  # the API server may not call a webhook it has just been told about
            try:
                await call("POST", f"{base}/selgadgets", _obj("SelGadget", "bad", bad=True))
            except RuntimeError as exc:
                if "no bad SelGadget" in str(exc):
                    break
                raise
            await call("DELETE", f"{base}/selgadgets/bad")
            assert time.monotonic() < deadline, "the API server never called the validating webhook"
            await asyncio.sleep(0.2)
        await call("POST", f"{base}/selgadgets", _obj("SelGadget", "g"))
        await call("POST", f"{base}/selthings", _obj("SelThing", "t"))
        with pytest.raises(RuntimeError, match="no bad SelThing"):
            await call("POST", f"{base}/selthings", _obj("SelThing", "bad", bad=True))
        expected = {"Secret": ["s"], "ConfigMap": ["c"], "SelGadget": ["g"], "SelThing": ["t"]}
        deadline = time.monotonic() + 30
        while not (indices and {k: sorted(v) for k, v in indices[0].items()} == expected):
            assert not running.done(), running.result()
            got = {k: list(v) for k, v in indices[0].items()} if indices else None
            assert time.monotonic() < deadline, f"the index holds {got}, expected {expected}"
            await asyncio.sleep(0.1)
        kinds = {(r.group, r.plural, r.kind) for r in admitted}
        assert kinds == {(GROUP, "selgadgets", "SelGadget"), (GROUP, "selthings", "SelThing")}
        assert all(isinstance(r, kopf.Resource) and r.namespaced for r in admitted)
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)
        with contextlib.suppress(RuntimeError):
            await call(
                "DELETE", f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{managed}"
            )
        with contextlib.suppress(RuntimeError):
            await call(
                "DELETE", f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{managed}"
            )
