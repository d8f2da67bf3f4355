"""Dependents against wrong answers, on a FakeCluster: a handler's wrong return value (a wrong
type, another kind, the primary itself, an object someone else controls, two dependents naming
one object, a readiness or precondition that raises or answers something else than a bool) never
fails open: nothing is written, deleted or reported ready on its account. An external dependent
costs no write whatever happens."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubeop.controller import Controller, Dependent, DependentError, EventRecorder, Metrics, Workflow
from kubeop.controller.running import ControllerRuntime

from .fakes import APPS, CONFIGMAPS, run
from .test_dependents import (
    SECRETS,
    Env,
    _being_deleted,
    _exists,
    _until_async,
    config,
    env,
    secret,
    web_workflow,
)

__all__ = ["env"]  # the fixture, shared with test_dependents


def make(body: dict[str, Any]) -> Any:
    return lambda primary, ctx: body


def cm(name: str = "web-config", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}, "data": {"a": "b"}}


async def failed_without_writes(env: Env, wf: Workflow, name: str, message: str) -> None:
    before = len(env.writes())
    with pytest.raises(DependentError, match=message):
        await wf.run(await env.primary(), env.ctx())
    writes = [w for w in env.writes()[before:] if "/status" not in w]
    assert writes == [], writes


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "web-config"}}, "returned a v1 Secret"),
        ({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "x"}}, "returned a apps/v1"),
        ({"kind": "Secret", "metadata": {"name": "web-config"}}, "returned a v1 Secret"),
        ({"metadata": ["name", "x"]}, "metadata must be a mapping"),
        ({"metadata": {"name": 7}}, "metadata.name must be a string"),
        ({"metadata": {"name": "a", "namespace": ["x"]}}, "metadata.namespace must be a string"),
    ],
)
async def test_a_desired_object_of_another_kind_or_shape_is_refused_unwritten(
    env: Env, body: dict[str, Any], message: str
) -> None:
    wf = Workflow(Dependent(CONFIGMAPS, desired=make(body), name="config"))
    await failed_without_writes(env, wf, "config", message)
    assert await env.seeder.get_or_none(SECRETS, "web-config", namespace="default") is None


@pytest.mark.parametrize("value", ["a string", ["a", "list"], 7, None])
async def test_a_desired_of_the_wrong_type_fails_the_dependent(env: Env, value: Any) -> None:
    wf = Workflow(Dependent(CONFIGMAPS, desired=make(value), name="config"))  # type: ignore[arg-type]
    await failed_without_writes(env, wf, "config", "dependent 'config'")


async def test_the_primary_itself_as_a_desired_child_is_refused(env: Env) -> None:
    wf = Workflow(Dependent(APPS, desired=lambda primary, ctx: primary, name="me"))
    await failed_without_writes(env, wf, "me", "is the primary itself")


async def test_a_foreign_controller_reference_in_desired_is_refused(env: Env) -> None:
    foreign = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "other-uid", "controller": True}
    wf = Workflow(Dependent(CONFIGMAPS, desired=make(cm(ownerReferences=[foreign])), name="config"))
    await failed_without_writes(env, wf, "config", "config")


@pytest.mark.parametrize("write", ["update", "patch", "apply"])
async def test_an_object_another_controller_owns_is_not_taken_over(env: Env, write: Any) -> None:
    await env.add_app("other")
    owner = await env.seeder.get(APPS, "other", namespace="default")
    uid = owner["metadata"]["uid"]
    other = {"apiVersion": "example.com/v1", "kind": "App", "name": "other", "uid": uid, "controller": True}
    await env.seeder.create({**cm(namespace="default", ownerReferences=[other]), "data": {"mine": "no"}})
    await _until_async(lambda: env.client.get(CONFIGMAPS, "web-config", namespace="default"))
    wf = Workflow(Dependent(CONFIGMAPS, desired=make(cm()), name="config", write=write))
    await failed_without_writes(env, wf, "config", "controlled by App other")
    kept = await env.seeder.get(CONFIGMAPS, "web-config", namespace="default")
    assert kept["data"] == {"mine": "no"}
    assert [r["uid"] for r in kept["metadata"]["ownerReferences"]] == [uid]


async def test_a_finalizer_child_of_another_primary_is_not_taken_over(env: Env) -> None:
    await env.seeder.create(cm(namespace="default", labels={"kubeop.io/owner-uid": "other-uid"}))
    await _until_async(lambda: env.client.get(CONFIGMAPS, "web-config", namespace="default"))
    wf = Workflow(Dependent(CONFIGMAPS, desired=make(cm()), name="config", deletion="finalizer"))
    before = len(env.writes())
    with pytest.raises(DependentError, match="belongs to another primary"):
        await wf.run(await env.primary(), env.ctx())
    assert [w for w in env.writes()[before:] if "configmaps" in w] == []


async def test_an_object_without_a_controller_is_adopted(env: Env) -> None:
    await env.seeder.create(cm(namespace="default"))
    await _until_async(lambda: env.client.get(CONFIGMAPS, "web-config", namespace="default"))
    wf = Workflow(Dependent(CONFIGMAPS, desired=make(cm()), name="config"))
    result = await wf.run(await env.primary(), env.ctx())
    assert result.ready
    adopted = await env.seeder.get(CONFIGMAPS, "web-config", namespace="default")
    assert adopted["metadata"]["ownerReferences"][0]["name"] == "web"


async def test_two_dependents_naming_one_object_fail_instead_of_fighting(env: Env) -> None:
    wf = Workflow(
        Dependent(CONFIGMAPS, desired=make(cm(data={"x": "1"})), name="one"),
        Dependent(CONFIGMAPS, desired=make({**cm(), "data": {"x": "2"}}), name="two", depends_on="one"),
    )
    with pytest.raises(DependentError, match="'one' and 'two' both desire ConfigMap default/web-config"):
        await wf.run(await env.primary(), env.ctx())
    before = len(env.writes())
    for _ in range(3):  # no ping-pong between the two: not one more write of the object
        with pytest.raises(DependentError):
            await wf.run(await env.primary(), env.ctx())
    assert [w for w in env.writes()[before:] if "configmaps" in w] == []


@pytest.mark.parametrize("answer", ["False", "no", {"ready": False}, [False], 1, 0.5])
async def test_a_readiness_answer_that_is_not_a_bool_is_never_ready(env: Env, answer: Any) -> None:
    wf = Workflow(Dependent(CONFIGMAPS, desired=config, name="config", ready=lambda obj: answer))
    with pytest.raises(DependentError, match=r"ready\(\) returned .*: return True or False"):
        await wf.run(await env.primary(), env.ctx())
    post = Workflow(
        Dependent(CONFIGMAPS, desired=config, name="config", ready_postcondition=lambda p, obj: answer)
    )
    result = await post.reconcile(await env.primary(), env.ctx())
    assert not result.ready and result.states["config"].phase == "failed"


async def test_a_readiness_that_raises_or_answers_none_is_not_ready(env: Env) -> None:
    def boom(obj: Any) -> bool:
        raise RuntimeError("no")

    raising = Workflow(
        Dependent(CONFIGMAPS, desired=config, name="config", ready=boom),
        Dependent(SECRETS, desired=secret, name="secret", depends_on="config"),
    )
    result = await raising.reconcile(await env.primary(), env.ctx())
    assert result.states["config"].phase == "failed"
    assert result.states["secret"].phase == "waiting"  # not made on a readiness that raised
    silent = Workflow(Dependent(CONFIGMAPS, desired=config, name="config", ready=lambda obj: None))  # type: ignore[arg-type,return-value]
    result = await silent.reconcile(await env.primary(), env.ctx())
    assert result.states["config"].phase == "progressing"


@pytest.mark.parametrize("answer", [None, "", 0, [], "False"])
async def test_a_precondition_answering_no_bool_deletes_nothing(env: Env, answer: Any) -> None:
    wanted: dict[str, Any] = {"config": True}
    wf = Workflow(
        Dependent(
            CONFIGMAPS, desired=config, name="config", reconcile_precondition=lambda p, c: wanted["config"]
        ),
        Dependent(SECRETS, desired=secret, name="secret", depends_on="config"),
    )
    await wf.run(await env.primary(), env.ctx())
    wanted["config"] = answer  # a precondition that forgot to return, or returned a value
    before = len(env.writes())
    with pytest.raises(DependentError, match=r"reconcile_precondition\(\) returned .*: return True or False"):
        await wf.run(await env.primary(), env.ctx())
    assert [w for w in env.writes()[before:] if w.startswith("DELETE")] == []
    assert await env.seeder.get_or_none(CONFIGMAPS, "web-config", namespace="default") is not None
    assert await env.seeder.get_or_none(SECRETS, "web-secret", namespace="default") is not None


async def test_a_precondition_that_raises_fails_its_dependent_and_leaves_no_task_behind(env: Env) -> None:
    finished = asyncio.Event()

    async def slow(primary: Any, ctx: Any) -> dict[str, Any]:
        await asyncio.sleep(0.2)
        finished.set()
        return secret(primary, ctx)

    def boom(primary: Any, ctx: Any) -> bool:
        raise RuntimeError("precondition broke")

    wf = Workflow(
        Dependent(CONFIGMAPS, desired=config, name="config", reconcile_precondition=boom),
        Dependent(SECRETS, desired=slow, name="secret"),
    )
    with pytest.raises(DependentError, match="precondition broke"):
        await wf.run(await env.primary(), env.ctx())
    assert finished.is_set()  # the reconcile returned only once every dependent was done


async def test_a_delete_postcondition_answering_no_bool_is_not_gone(env: Env) -> None:
    wanted = {"secret": True}
    wf = Workflow(
        Dependent(CONFIGMAPS, desired=config, name="config"),
        Dependent(
            SECRETS,
            desired=secret,
            name="secret",
            depends_on="config",
            reconcile_precondition=lambda p, c: wanted["secret"],
            delete_postcondition=lambda p, obj: "gone",  # type: ignore[arg-type,return-value]
        ),
    )
    await wf.run(await env.primary(), env.ctx())
    wanted["secret"] = False
    result = await wf.reconcile(await env.primary(), env.ctx())
    assert result.states["secret"].phase == "failed"
    assert "return True or False" in result.states["secret"].message


async def test_an_external_dependent_is_never_written_whatever_happens(env: Env) -> None:
    wanted = {"shared": True}
    await env.seeder.create(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "shared", "namespace": "default"}}
    )
    await _until_async(lambda: env.client.get(SECRETS, "shared", namespace="default"))
    wf = Workflow(
        Dependent.external(SECRETS, name="shared", dependent_name="shared"),
        Dependent(CONFIGMAPS, desired=config, name="config", depends_on="shared", deletion="finalizer"),
    )
    await wf.run(await env.primary(), env.ctx())
    wanted["shared"] = False
    external = Workflow(
        Dependent.external(SECRETS, name="shared", dependent_name="shared", ready=lambda s: False),
    )
    await external.run(await env.primary(), env.ctx())
    await env.seeder.delete(APPS, "web", namespace="default")
    await _until_async(lambda: _being_deleted(env))
    await wf.run(await env.primary(), env.ctx())
    assert [w for w in env.writes() if "/secrets" in w] == []
    assert await env.seeder.get_or_none(SECRETS, "shared", namespace="default") is not None


async def test_a_child_deleted_by_a_user_in_a_loop_costs_one_create_each_and_no_hot_loop(env: Env) -> None:
    ctrl = Controller.for_(APPS).dependents(web_workflow())
    rt = ControllerRuntime(
        env.factory, env.client, EventRecorder(None, "test"), Metrics(), cache_sync_timeout=2
    )
    running = await run(ctrl, rt)
    creates = "POST /api/v1/namespaces/default/secrets"
    try:
        await _until_async(lambda: _exists(env, SECRETS, "web-secret"))
        for _ in range(10):
            old = (await env.seeder.get(SECRETS, "web-secret", namespace="default"))["metadata"]["uid"]
            await env.seeder.delete(SECRETS, "web-secret", namespace="default")
            await _until_async(lambda old=old: _made_again(env, old))  # type: ignore[misc]
        await asyncio.sleep(0.5)  # quiet: the controller must be idle now
        quiet = len(env.writes())
        await asyncio.sleep(0.5)
        assert env.writes()[quiet:] == []
    finally:
        await running.stop()
    assert env.writes().count(creates) == 11
    assert [w for w in env.writes() if "/secrets" in w and w != creates] == []


async def _made_again(env: Env, old_uid: str) -> bool:
    obj = await env.seeder.get_or_none(SECRETS, "web-secret", namespace="default")
    return obj is not None and obj["metadata"]["uid"] != old_uid


async def test_a_child_held_in_deletion_is_not_ready_and_not_written(env: Env) -> None:
    wf = Workflow(Dependent(CONFIGMAPS, desired=config, name="config"))
    await wf.run(await env.primary(), env.ctx())
    await env.seeder.patch(
        CONFIGMAPS, "web-config", {"metadata": {"finalizers": ["test/hold"]}}, namespace="default"
    )
    await env.seeder.delete(CONFIGMAPS, "web-config", namespace="default")
    await _until_async(lambda: _cached_in_deletion(env))
    before = len(env.writes())
    result = await wf.reconcile(await env.primary(), env.ctx())
    assert result.states["config"].phase == "progressing"
    assert "being deleted" in result.states["config"].message
    assert [w for w in env.writes()[before:] if "configmaps" in w] == []


async def _cached_in_deletion(env: Env) -> bool:
    obj = await env.client.get(CONFIGMAPS, "web-config", namespace="default")
    return obj is not None and bool(obj["metadata"].get("deletionTimestamp"))


async def test_a_secret_dependent_shows_no_data_in_reprs_errors_or_status(env: Env) -> None:
    value = "c2VjcmV0LXZhbHVlLTQy"  # base64 of a secret value

    def credentials(primary: Any, ctx: Any) -> dict[str, Any]:
        return {"metadata": {"name": "web-secret"}, "data": {"password": value}}

    wf = Workflow(
        Dependent(SECRETS, desired=credentials, name="secret", ready=lambda s: False),
        Dependent(CONFIGMAPS, desired=config, name="config", depends_on="secret"),
    )
    result = await wf.run(await env.primary(), env.ctx())
    assert result.actual("secret")["data"]["password"] == value  # there, for the reconciler
    assert value not in repr(result)
    assert value not in repr(result.states)
    assert value not in str((await env.primary())["status"])


def test_self_dependencies_and_condition_collisions_are_refused_when_built() -> None:
    with pytest.raises(ValueError, match="cycle: a -> a"):
        Workflow(Dependent(CONFIGMAPS, desired=config, name="a", depends_on="a"))
    with pytest.raises(ValueError, match="both report condition 'WebConfigReady'"):
        Workflow(
            Dependent(CONFIGMAPS, desired=config, name="web-config"),
            Dependent(SECRETS, desired=secret, name="web_config"),
        )
    with pytest.raises(ValueError, match="must be lower case"):
        Dependent(CONFIGMAPS, desired=config, name="Web\nConfig")
