"""Dependents and workflows on a FakeCluster: build-time checks, order, concurrency, preconditions,
read-only dependents, failure and recovery, status aggregation, and the writes they cost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubeop.cache import BackoffConfig, SharedInformerFactory, WatcherConfig
from kubeop.client import Client
from kubeop.controller import (
    Context,
    Controller,
    Dependent,
    DependentError,
    EventRecorder,
    Metrics,
    ReconcilerClient,
    Request,
    TerminalError,
    Workflow,
    find_condition,
)
from kubeop.controller.running import ControllerRuntime
from kubeop.core.resource import ApiResource
from kubeop.kinds import ConfigMap
from kubeop.testing import FakeCluster

from .fakes import APP_CRD, APPS, CONFIGMAPS, run

SECRETS = ApiResource("", "v1", "secrets", kind="Secret")
CLUSTERROLES = ApiResource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", kind="ClusterRole", namespaced=False
)


class Env:
    """A fake cluster, a reconciler client whose writes are counted, and a context for it."""

    def __init__(self) -> None:
        self.cluster = FakeCluster()
        self.cluster.add_crd(APP_CRD)
        self.transport = self.cluster.transport()
        self.api = Client(transport=self.transport)
        fast = WatcherConfig(backoff=BackoffConfig(initial=0.01, cap=0.05, jitter=0.0))
        self.factory = SharedInformerFactory(self.api, config=fast)
        self.client = ReconcilerClient(self.api, self.factory)
        self.seeder = self.cluster.client()

    def ctx(self, name: str = "web") -> Context:
        return Context(Request("default", name), self.client, EventRecorder(None, "test"), "app")

    def writes(self) -> list[str]:
        """``METHOD path`` of every write the reconciler client sent, in order."""
        return [
            f"{r.method} {r.path}"
            for r in self.transport.sent
            if r.method in ("POST", "PUT", "PATCH", "DELETE")
        ]

    async def primary(self, name: str = "web") -> Any:
        return await self.client.get(APPS, name, namespace="default")

    async def add_app(self, name: str = "web", **spec: Any) -> None:
        body = {
            "apiVersion": "example.com/v1",
            "kind": "App",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"x": 1, **spec},
        }
        await self.seeder.create(body)

    async def set_spec(self, name: str = "web", **spec: Any) -> None:
        await self.seeder.patch(APPS, name, {"spec": spec}, namespace="default")
        await _until_async(lambda: self._spec_seen(name, spec))

    async def _spec_seen(self, name: str, spec: dict[str, Any]) -> bool:
        obj = await self.primary(name)
        return obj is not None and all(obj["spec"].get(k) == v for k, v in spec.items())

    async def close(self) -> None:
        await self.factory.stop()
        await self.api.close()
        await self.seeder.close()


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    env = Env()
    env.factory.start()
    await env.add_app()
    yield env
    await env.close()


async def _until_async(pred: Any, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not await pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.005)


def config(primary: dict[str, Any], ctx: Any) -> dict[str, Any]:
    name = primary["metadata"]["name"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-config"},
        "data": {"x": str(primary["spec"]["x"])},
    }


def secret(primary: dict[str, Any], ctx: Any) -> dict[str, Any]:
    name = primary["metadata"]["name"]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{name}-secret"},
        "stringData": {"k": "v"},
    }


def web_workflow(**extra: Any) -> Workflow:
    return Workflow(
        Dependent(CONFIGMAPS, desired=config, name="config"),
        Dependent(SECRETS, desired=secret, name="secret", depends_on="config", **extra),
    )


# -- building ------------------------------------------------------------------------------------
def test_a_cycle_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"cycle: a -> b -> c -> a"):
        Workflow(
            Dependent(CONFIGMAPS, desired=config, name="a", depends_on="b"),
            Dependent(CONFIGMAPS, desired=config, name="b", depends_on="c"),
            Dependent(CONFIGMAPS, desired=config, name="c", depends_on="a"),
        )


def test_an_unknown_dependency_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"'secret' depends on 'db', which the workflow does not declare"):
        Workflow(
            Dependent(CONFIGMAPS, desired=config, name="config"),
            Dependent(SECRETS, desired=secret, depends_on="db"),
        )


def test_bad_declarations_say_what_to_fix() -> None:
    with pytest.raises(ValueError, match="two dependents are named 'configmap'"):
        Workflow(Dependent(CONFIGMAPS, desired=config), Dependent(CONFIGMAPS, desired=config))
    with pytest.raises(ValueError, match="write must be one of update, patch, apply"):
        Dependent(CONFIGMAPS, desired=config, write="put")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="has no desired"):
        Dependent(CONFIGMAPS)
    with pytest.raises(ValueError, match="exactly one of name= or selector="):
        Dependent.external(SECRETS)


def test_order_is_dependencies_first_and_conditions_are_named_after_dependents() -> None:
    wf = Workflow(
        Dependent(SECRETS, desired=secret, name="db-secret", depends_on=["config"]),
        Dependent(CONFIGMAPS, desired=config, name="config"),
    )
    assert [d.name for d in wf.dependents] == ["config", "db-secret"]
    assert [d.condition for d in wf.dependents] == ["ConfigReady", "DbSecretReady"]


def test_the_builder_watches_the_written_kinds_once() -> None:
    ctrl = (
        Controller.for_(APPS)
        .owns(CONFIGMAPS)
        .dependents(
            Dependent(CONFIGMAPS, desired=config, name="config"),
            Dependent(CONFIGMAPS, desired=config, name="other"),
            Dependent(CLUSTERROLES, desired=config, name="role", deletion="finalizer"),
            Dependent.external(SECRETS, name="shared"),
        )
    )
    kinds = [(w.what, w.handler is None) for w in ctrl._watches]
    assert kinds == [(CONFIGMAPS, True), (CLUSTERROLES, False)]
    assert ctrl.workflow is not None and ctrl.reconciler is not None


# -- running -------------------------------------------------------------------------------------
async def test_dependents_run_in_order_and_cost_no_writes_when_idle(env: Env) -> None:
    order: list[str] = []

    def track(fn: Any, name: str) -> Any:
        def desired(primary: Any, ctx: Any) -> Any:
            order.append(name)
            return fn(primary, ctx)

        return desired

    wf = Workflow(
        Dependent(SECRETS, desired=track(secret, "secret"), name="secret", depends_on="config"),
        Dependent(CONFIGMAPS, desired=track(config, "config"), name="config"),
    )
    result = await wf.run(await env.primary(), env.ctx())
    assert order == ["config", "secret"]
    assert result.ready
    assert [s.action for s in result.states.values()] == ["created", "created"]
    cm = await env.seeder.get(CONFIGMAPS, "web-config", namespace="default")
    assert cm["metadata"]["ownerReferences"][0]["name"] == "web"
    assert cm["metadata"]["ownerReferences"][0]["controller"] is True
    assert env.writes() == [
        "POST /api/v1/namespaces/default/configmaps",
        "POST /api/v1/namespaces/default/secrets",
        "PATCH /apis/example.com/v1/namespaces/default/apps/web/status",
    ]
    before = len(env.writes())
    for _ in range(3):
        await wf.run(await env.primary(), env.ctx())
    assert env.writes()[before:] == []  # idle: not one write


async def test_a_change_writes_exactly_the_changed_dependents(env: Env) -> None:
    wf = web_workflow()
    await wf.run(await env.primary(), env.ctx())
    before = len(env.writes())
    await env.set_spec(x=2)
    result = await wf.run(await env.primary(), env.ctx())
    assert {n: s.action for n, s in result.states.items()} == {"config": "updated", "secret": "unchanged"}
    # the ConfigMap, and the status (the conditions' observedGeneration moved with the spec)
    assert env.writes()[before:] == [
        "PUT /api/v1/namespaces/default/configmaps/web-config",
        "PATCH /apis/example.com/v1/namespaces/default/apps/web/status",
    ]


async def test_independent_dependents_run_concurrently(env: Env) -> None:
    started = {"a": asyncio.Event(), "b": asyncio.Event()}

    def waits_for(me: str, other: str) -> Any:
        async def desired(primary: Any, ctx: Any) -> Any:
            started[me].set()
            await asyncio.wait_for(started[other].wait(), 2)  # both must be running at once
            body = config(primary, ctx)
            body["metadata"]["name"] = f"web-{me}"
            return body

        return desired

    wf = Workflow(
        Dependent(CONFIGMAPS, desired=waits_for("a", "b"), name="a"),
        Dependent(CONFIGMAPS, desired=waits_for("b", "a"), name="b"),
    )
    result = await wf.run(await env.primary(), env.ctx())
    assert result.ready


async def test_a_false_precondition_deletes_the_dependent_and_what_depends_on_it(env: Env) -> None:
    wanted = {"config": True}
    wf = Workflow(
        Dependent(
            CONFIGMAPS, desired=config, name="config", reconcile_precondition=lambda p, ctx: wanted["config"]
        ),
        Dependent(SECRETS, desired=secret, name="secret", depends_on="config"),
    )
    await wf.run(await env.primary(), env.ctx())
    primary = await env.primary()
    assert {c["type"] for c in primary["status"]["conditions"]} >= {"ConfigReady", "SecretReady", "Ready"}
    wanted["config"] = False
    before = len(env.writes())
    result = await wf.run(await env.primary(), env.ctx())
    assert {n: (s.phase, s.action) for n, s in result.states.items()} == {
        "config": ("deleted", "deleted"),
        "secret": ("deleted", "deleted"),
    }
    writes = env.writes()[before:]
    assert writes[:2] == [  # what depends on the config goes first
        "DELETE /api/v1/namespaces/default/secrets/web-secret",
        "DELETE /api/v1/namespaces/default/configmaps/web-config",
    ]
    assert await env.seeder.get_or_none(CONFIGMAPS, "web-config", namespace="default") is None
    primary = await env.primary()
    types = {c["type"] for c in primary["status"]["conditions"]}
    assert "ConfigReady" not in types and "SecretReady" not in types
    assert find_condition(primary["status"]["conditions"], "Ready")["status"] == "True"  # type: ignore[index]


async def test_an_object_the_primary_does_not_own_is_not_deleted(env: Env) -> None:
    await env.seeder.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-config", "namespace": "default"}}
    )
    wf = Workflow(
        Dependent(CONFIGMAPS, desired=config, name="config", reconcile_precondition=lambda p, ctx: False)
    )
    await _until_async(lambda: env.client.get(CONFIGMAPS, "web-config", namespace="default"))
    await wf.run(await env.primary(), env.ctx())
    assert await env.seeder.get_or_none(CONFIGMAPS, "web-config", namespace="default") is not None


async def test_a_read_only_dependent_is_observed_and_gates_what_depends_on_it(env: Env) -> None:
    wf = Workflow(
        Dependent.external(SECRETS, name=lambda p: "shared-credentials", dependent_name="credentials"),
        Dependent(CONFIGMAPS, desired=config, name="config", depends_on="credentials"),
    )
    result = await wf.run(await env.primary(), env.ctx())
    assert result.states["credentials"].phase == "progressing"
    assert result.states["config"].phase == "waiting"
    assert env.writes() == ["PATCH /apis/example.com/v1/namespaces/default/apps/web/status"]
    await env.seeder.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "shared-credentials", "namespace": "default"},
        }
    )
    await _until_async(lambda: env.client.get(SECRETS, "shared-credentials", namespace="default"))
    result = await wf.run(await env.primary(), env.ctx())
    assert result.ready and result.states["credentials"].action == "observed"
    assert not [w for w in env.writes() if "/secrets" in w]  # never written


async def test_a_failing_dependent_degrades_then_recovers(env: Env) -> None:
    env.cluster.fail("POST", SECRETS, times=1, code=500)
    wf = web_workflow()
    with pytest.raises(DependentError, match="dependent 'secret'"):
        await wf.run(await env.primary(), env.ctx())
    conditions = (await env.primary())["status"]["conditions"]
    assert find_condition(conditions, "Degraded")["status"] == "True"  # type: ignore[index]
    assert find_condition(conditions, "Degraded")["reason"] == "DependentFailed"  # type: ignore[index]
    assert find_condition(conditions, "SecretReady")["reason"] == "Failed"  # type: ignore[index]
    assert find_condition(conditions, "ConfigReady")["status"] == "True"  # type: ignore[index]
    assert find_condition(conditions, "Ready")["status"] == "False"  # type: ignore[index]
    result = await wf.run(await env.primary(), env.ctx())
    assert result.ready
    conditions = (await env.primary())["status"]["conditions"]
    assert {c["type"]: c["status"] for c in conditions} == {
        "ConfigReady": "True",
        "SecretReady": "True",
        "Ready": "True",
        "Progressing": "False",
        "Degraded": "False",
    }


async def test_not_ready_dependents_show_as_progressing(env: Env) -> None:
    wf = Workflow(
        Dependent(
            CONFIGMAPS, desired=config, name="config", ready=lambda cm: cm.get("data", {}).get("ok") == "1"
        ),
        Dependent(SECRETS, desired=secret, name="secret", depends_on="config"),
    )
    result = await wf.run(await env.primary(), env.ctx())
    assert (result.states["config"].phase, result.states["secret"].phase) == ("progressing", "waiting")
    conditions = {c["type"]: c for c in (await env.primary())["status"]["conditions"]}
    assert conditions["Ready"]["reason"] == "DependentsNotReady"
    assert conditions["Progressing"]["status"] == "True"
    assert conditions["SecretReady"]["reason"] == "Waiting"
    assert conditions["SecretReady"]["message"] == "waiting for config"


async def test_typed_desired_and_apply_with_a_field_manager(env: Env) -> None:
    def typed(primary: Any, ctx: Any) -> ConfigMap:
        return ConfigMap.model_validate({"metadata": {"name": "web-typed"}, "data": {"x": "1"}})

    seen: list[Any] = []

    async def ready(cm: ConfigMap) -> bool:
        seen.append(cm)
        return cm.data == {"x": "1"}

    wf = Workflow(Dependent(ConfigMap, desired=typed, ready=ready, write="apply", field_manager="webapp"))
    result = await wf.run(await env.primary(), env.ctx())
    assert result.ready and isinstance(seen[0], ConfigMap)
    (apply,) = [r for r in env.transport.sent if r.method == "PATCH" and "/configmaps/" in r.path]
    assert apply.content_type == "application/apply-patch+yaml"
    assert ("fieldManager", "webapp") in apply.query
    before = len(env.writes())
    await wf.run(await env.primary(), env.ctx())
    assert env.writes()[before:] == []  # apply compares first too


async def test_a_cluster_scoped_child_is_deleted_by_finalizer(env: Env) -> None:
    def role(primary: Any, ctx: Any) -> dict[str, Any]:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "web-role"},
        }

    wf = Workflow(Dependent(CLUSTERROLES, desired=role, name="role", deletion="finalizer"))
    owned = Workflow(Dependent(CLUSTERROLES, desired=role, name="role"))
    with pytest.raises(DependentError, match="deletion='finalizer'"):
        await owned.run(await env.primary(), env.ctx())
    await wf.run(await env.primary(), env.ctx())
    primary = await env.primary()
    assert primary["metadata"]["finalizers"] == ["kubeop.io/dependents"]
    made = await env.seeder.get(CLUSTERROLES, "web-role")
    assert made["metadata"]["annotations"]["kubeop.io/owner-name"] == "web"
    await env.seeder.delete(APPS, "web", namespace="default")
    await _until_async(lambda: _being_deleted(env))
    result = await wf.run(await env.primary(), env.ctx())
    assert result.deleting and result.states["role"].action == "deleted"
    assert await env.seeder.get_or_none(CLUSTERROLES, "web-role") is None
    assert await env.seeder.get_or_none(APPS, "web", namespace="default") is None


async def _being_deleted(env: Env) -> bool:
    obj = await env.primary()
    return obj is not None and bool(obj["metadata"].get("deletionTimestamp"))


# -- in a controller -------------------------------------------------------------------------------
async def test_a_controller_runs_its_workflow_then_its_reconciler_in_one_status_write(env: Env) -> None:
    after: list[bool] = []

    def reconcile(req: Request, ctx: Context) -> None:  # sync: runs in a worker thread
        assert ctx.dependents is not None
        after.append(ctx.dependents.ready)
        ctx.dependents.status["config"] = ctx.dependents.actual("config")["metadata"]["name"]

    ctrl = Controller.for_(APPS).dependents(web_workflow()).reconcile(reconcile)
    rt = ControllerRuntime(
        env.factory, env.client, EventRecorder(None, "test"), Metrics(), cache_sync_timeout=2
    )
    running = await run(ctrl, rt)
    try:
        await _until_async(lambda: _status_has(env, "config"))
        # a deleted child comes back: the owned watch brings the primary's reconcile
        await env.seeder.delete(SECRETS, "web-secret", namespace="default")
        await _until_async(lambda: _exists(env, SECRETS, "web-secret"))
    finally:
        await running.stop()
    assert after and after[0] is True
    status_writes = [w for w in env.writes() if w.endswith("/status")]
    assert len(status_writes) == 1  # conditions and the reconciler's field together, once


async def _status_has(env: Env, key: str) -> bool:
    obj = await env.primary()
    return obj is not None and key in (obj.get("status") or {})


async def _exists(env: Env, res: ApiResource, name: str) -> bool:
    return await env.seeder.get_or_none(res, name, namespace="default") is not None


async def test_a_terminal_error_in_desired_is_reported_and_raised_as_such(env: Env) -> None:
    def bad(primary: Any, ctx: Any) -> Any:
        raise TerminalError("spec.x must be positive")

    wf = Workflow(Dependent(CONFIGMAPS, desired=bad, name="config"))
    with pytest.raises(TerminalError, match=r"spec\.x must be positive"):
        await wf.run(await env.primary(), env.ctx())
    conditions = (await env.primary())["status"]["conditions"]
    assert find_condition(conditions, "ConfigReady")["message"] == "TerminalError: spec.x must be positive"  # type: ignore[index]
    assert find_condition(conditions, "Degraded")["status"] == "True"  # type: ignore[index]


async def test_conditions_of_others_are_kept_and_the_reconcilers_own_list_is_the_base(env: Env) -> None:
    wf = web_workflow()
    result = await wf.reconcile(await env.primary(), env.ctx())
    own = {"type": "Custom", "status": "True", "reason": "Mine", "message": "", "lastTransitionTime": "x"}
    result.status["conditions"] = [own]
    result.set_condition("Progressing", True, "Migrating", "the reconciler's word wins")
    assert await result.write_status(await env.primary(), env.ctx())
    conditions = (await env.primary())["status"]["conditions"]
    assert [c["type"] for c in conditions] == [
        "Custom",
        "ConfigReady",
        "SecretReady",
        "Ready",
        "Degraded",
        "Progressing",  # the reconciler's, in place of the workflow's
    ]
    assert find_condition(conditions, "Progressing")["reason"] == "Migrating"  # type: ignore[index]
    # the next run keeps Custom, which the workflow does not know
    result = await wf.reconcile(await env.primary(), env.ctx())
    result.set_condition("Progressing", True, "Migrating", "the reconciler's word wins")
    assert not await result.write_status(await env.primary(), env.ctx())


async def test_without_conditions_only_the_reconcilers_status_is_written(env: Env) -> None:
    wf = Workflow(Dependent(CONFIGMAPS, desired=config, name="config"), conditions=False)
    result = await wf.reconcile(await env.primary(), env.ctx())
    assert not await result.write_status(await env.primary(), env.ctx())  # nothing to say
    result.status["configMap"] = "web-config"
    assert await result.write_status(await env.primary(), env.ctx())
    assert (await env.primary())["status"] == {"configMap": "web-config"}


async def test_a_selector_finds_the_object_desired_leaves_unnamed(env: Env) -> None:
    await env.seeder.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "generated-x7k2", "namespace": "default", "labels": {"app": "web"}},
        }
    )
    await _until_async(lambda: env.client.get(SECRETS, "generated-x7k2", namespace="default"))

    def unnamed(primary: Any, ctx: Any) -> dict[str, Any]:
        return {"metadata": {"labels": {"app": "web"}}, "stringData": {"k": "v"}}

    wf = Workflow(
        Dependent(SECRETS, desired=unnamed, name="found", selector=lambda p: {"app": p["metadata"]["name"]}),
        Dependent.external(SECRETS, selector=lambda p: {"app": "web"}, dependent_name="observed"),
    )
    result = await wf.run(await env.primary(), env.ctx())
    assert result.states["found"].action == "updated"
    assert result.states["found"].actual["metadata"]["name"] == "generated-x7k2"
    assert result.states["observed"].action == "observed"
    assert [r.path for r in env.transport.sent if r.method == "POST" and "/secrets" in r.path] == []
