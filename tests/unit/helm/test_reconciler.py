"""The Helm reconciler's decisions, on an in-memory cluster and Helm with a virtual clock.

What matters most here is what does *not* happen: no helm process and no write in a steady
state, one dry-run per reconcile period, no retry storm after a chart error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubeop.controller import Request, Result
from kubeop.helm.reconciler import (
    FINALIZER,
    RECONCILE_PERIOD_ANNOTATION,
    UNINSTALL_WAIT_ANNOTATION,
    UPGRADE_FORCE_ANNOTATION,
    HelmReconciler,
    ReleaseError,
    annotation_bool,
    chart_digest,
    reconcile_period,
)
from kubeop.helm.runtime import HelmRuntime
from kubeop.helm.watches import Watch

from .fakes import (
    DEPLOYMENTS,
    PHP,
    RELEASE_SECRETS,
    SERVICES,
    FakeCluster,
    FakeHelm,
    FakeReconcilerClient,
    FakeRecorder,
    context,
)

NS, NAME = "ns", "web"


class World:
    def __init__(self, chart: Path, **watch: Any) -> None:
        self.cluster = FakeCluster()
        self.client = FakeReconcilerClient(self.cluster)
        self.helm = FakeHelm(self.cluster)
        self.recorder = FakeRecorder()
        self.now = 1000.0
        self.enqueued: list[Request] = []
        self.reconciler = HelmReconciler(
            Watch("web.example.com", "v1", "PhpDeployment", chart, **watch),
            HelmRuntime(self.helm),  # type: ignore[arg-type]
            reconcile_period=60.0,
            clock=lambda: self.now,
        )
        self.reconciler._enqueue = self.enqueued.append  # type: ignore[method-assign]

    def create(self, spec: dict[str, Any], annotations: dict[str, str] | None = None) -> None:
        md: dict[str, Any] = {"name": NAME, "namespace": NS, "generation": 1}
        if annotations:
            md["annotations"] = annotations
        self.cluster.store(
            PHP, {"apiVersion": "web.example.com/v1", "kind": "PhpDeployment", "metadata": md, "spec": spec}
        )

    def cr(self) -> dict[str, Any] | None:
        return self.cluster.get(PHP, f"{NS}/{NAME}")

    def edit(self, **spec: Any) -> None:
        cr = self.cr()
        assert cr is not None
        cr["spec"].update(spec)
        cr["metadata"]["generation"] += 1
        self.cluster.store(PHP, cr)

    async def reconcile(self) -> Result | None:
        ctx = context(self.client, NAME, NS, self.recorder)
        return await self.reconciler.reconcile(Request(NS, NAME), ctx)

    def conditions(self) -> dict[str, dict[str, Any]]:
        cr = self.cr()
        assert cr is not None
        return {c["type"]: c for c in cr.get("status", {}).get("conditions", [])}

    def helm_ops(self) -> list[str]:
        return [c[0] for c in self.helm.calls]

    def child(self, res: Any) -> dict[str, Any] | None:
        return self.cluster.get(res, f"{NS}/{NAME}")


@pytest.fixture
def chart(tmp_path: Path) -> Path:
    chart = tmp_path / "php"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: php\nversion: 0.1.0\n")
    return chart


@pytest.fixture
def world(chart: Path) -> World:
    return World(chart)


async def installed(world: World) -> World:
    world.create({"image": "php:8.3"})
    result = await world.reconcile()
    assert result == Result(requeue_after=60.0)
    world.cluster.writes.clear()
    world.helm.calls.clear()
    world.enqueued.clear()
    return world


async def test_install(world: World) -> None:
    world.create({"image": "php:8.3", "replicas": 2})
    assert await world.reconcile() == Result(requeue_after=60.0)
    assert world.helm_ops() == ["install"]
    cr = world.cr()
    assert cr is not None
    assert cr["metadata"]["finalizers"] == [FINALIZER]
    conds = world.conditions()
    assert conds["Initialized"]["status"] == "True"
    assert (conds["Deployed"]["status"], conds["Deployed"]["reason"], conds["Deployed"]["message"]) == (
        "True",
        "InstallSuccessful",
        "notes",
    )
    assert cr["status"]["deployedRelease"]["name"] == NAME
    deployment = world.child(DEPLOYMENTS)
    assert deployment is not None and deployment["spec"]["replicas"] == 2
    [ref] = deployment["metadata"]["ownerReferences"]  # set by the post-renderer
    assert ref == {
        "apiVersion": "web.example.com/v1", "kind": "PhpDeployment", "name": NAME,
        "uid": cr["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True,
    }  # fmt: skip
    assert ("Normal", "InstallSuccessful", "installed release web") in world.recorder.events
    # Finalizer first, then the status: two writes to the resource, none to its children.
    assert [w[0] for w in world.cluster.writes] == ["finalizer", "status"]


async def test_steady_state_runs_no_helm_and_writes_nothing(world: World) -> None:
    await installed(world)
    for _ in range(20):
        world.now += 2.0  # 40 s: within the reconcile period
        assert (await world.reconcile()).requeue_after > 0  # type: ignore[union-attr]
    assert world.helm.calls == []
    assert world.cluster.writes == []
    assert world.client.api.dry_runs == 0


async def test_one_dry_run_per_reconcile_period(world: World) -> None:
    await installed(world)
    world.now += 59.5  # within a second of the period: due (requeues are not exact)
    result = await world.reconcile()
    assert world.helm_ops() == ["dry-run"]
    assert result == Result(requeue_after=60.0)
    world.now += 30
    await world.reconcile()
    assert world.helm_ops() == ["dry-run"]
    world.now += 31
    await world.reconcile()
    assert world.helm_ops() == ["dry-run", "dry-run"]
    assert world.cluster.writes == []


async def test_requeue_after_counts_down_to_the_next_render(world: World) -> None:
    await installed(world)
    world.now += 45
    assert await world.reconcile() == Result(requeue_after=15.0)


async def test_a_deleted_child_is_recreated_without_helm(world: World) -> None:
    await installed(world)
    world.cluster.delete(DEPLOYMENTS, f"{NS}/{NAME}")
    assert world.enqueued == [Request(NS, NAME)]  # the dependent watch noticed
    world.cluster.writes.clear()
    await world.reconcile()
    assert world.helm.calls == []
    assert world.cluster.writes == [("create", "Deployment", f"{NS}/{NAME}")]
    deployment = world.child(DEPLOYMENTS)
    assert deployment is not None
    assert deployment["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert deployment["metadata"]["annotations"]["meta.helm.sh/release-name"] == NAME
    assert deployment["metadata"]["ownerReferences"][0]["controller"] is True
    assert ("Normal", "Reconciled", "created Deployment ns/web") in world.recorder.events


async def test_drift_is_reverted_and_normalised_values_are_left_alone(world: World) -> None:
    await installed(world)
    deployment = world.child(DEPLOYMENTS)
    assert deployment is not None
    deployment["spec"]["replicas"] = 5
    world.cluster.store(DEPLOYMENTS, deployment)
    assert world.enqueued == [Request(NS, NAME)]
    await world.reconcile()
    assert [w[0] for w in world.cluster.writes] == ["patch"]
    restored = world.child(DEPLOYMENTS)
    assert restored is not None and restored["spec"]["replicas"] == 1

    # A value the server stores in another form: the dry run shows no change, so no write, and
    # the answer is remembered for this resourceVersion (one dry run, not one per reconcile).
    world.cluster.writes.clear()
    service = world.child(SERVICES)
    assert service is not None
    service["spec"]["ports"][0]["port"] = 8080
    world.cluster.store(SERVICES, service)
    world.cluster.normalise.add(f"{NS}/{NAME}")
    await world.reconcile()
    await world.reconcile()
    assert world.client.api.dry_runs == 2  # one for the Deployment, one for the Service, then remembered
    assert world.cluster.writes == []


async def test_status_only_changes_of_children_do_not_reconcile(world: World) -> None:
    await installed(world)
    deployment = world.child(DEPLOYMENTS)
    assert deployment is not None
    deployment["status"] = {"readyReplicas": 1}
    world.cluster.store(DEPLOYMENTS, deployment)
    assert world.enqueued == []


async def test_spec_change_upgrades_once(world: World) -> None:
    await installed(world)
    world.edit(image="php:8.4")
    await world.reconcile()
    assert world.helm_ops() == ["dry-run", "upgrade"]
    deployment = world.child(DEPLOYMENTS)
    assert deployment is not None
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "php:8.4"
    assert world.conditions()["Deployed"]["reason"] == "UpgradeSuccessful"
    world.helm.calls.clear()
    world.cluster.writes.clear()
    world.now += 10
    await world.reconcile()
    assert world.helm.calls == [] and world.cluster.writes == []


async def test_values_change_without_manifest_change_still_upgrades(world: World) -> None:
    await installed(world)
    world.edit(unused="x")
    await world.reconcile()
    assert world.helm_ops() == ["dry-run", "upgrade"]


async def test_upgrade_force_annotation(chart: Path) -> None:
    world = World(chart)
    world.create({"image": "php:8.3"}, annotations={UPGRADE_FORCE_ANNOTATION: "true"})
    await world.reconcile()
    world.edit(image="php:8.4")
    await world.reconcile()
    assert world.helm_ops() == ["install", "dry-run", "upgrade-force"]


async def test_chart_error_on_install_does_not_hot_loop(world: World) -> None:
    world.create({"image": ""})
    result = await world.reconcile()
    assert result == Result(requeue_after=60.0)  # not an error: no backoff storm, the period
    assert world.helm_ops() == ["install"]
    failed = world.conditions()["ReleaseFailed"]
    assert (failed["status"], failed["reason"]) == ("True", "InstallError")
    assert "spec.image is required" in failed["message"]
    assert ("Warning", "InstallError") in [(e[0], e[1]) for e in world.recorder.events]
    writes = list(world.cluster.writes)
    for _ in range(10):  # events and resyncs keep coming: no helm, no writes
        world.now += 5
        await world.reconcile()
    assert world.helm_ops() == ["install"]
    assert world.cluster.writes == writes
    world.now += 11  # the period has passed: one more attempt
    await world.reconcile()
    assert world.helm_ops() == ["install", "install"]
    # Fixing the spec retries at once and clears the failure.
    world.edit(image="php:8.3")
    await world.reconcile()
    assert world.helm_ops() == ["install", "install", "install"]
    assert "ReleaseFailed" not in world.conditions()
    assert world.conditions()["Deployed"]["status"] == "True"


async def test_chart_error_on_upgrade_keeps_the_release(world: World) -> None:
    await installed(world)
    world.edit(image="")
    assert await world.reconcile() == Result(requeue_after=60.0)
    assert world.helm_ops() == ["dry-run"]  # rendered, failed, nothing upgraded
    assert world.conditions()["ReleaseFailed"]["reason"] == "UpgradeError"
    assert world.conditions()["Deployed"]["status"] == "True"
    for _ in range(5):
        world.now += 5
        await world.reconcile()
    assert world.helm_ops() == ["dry-run"]
    world.edit(image="php:8.3")  # reverted: nothing to upgrade, the failure is cleared
    await world.reconcile()
    assert world.helm_ops() == ["dry-run", "dry-run"]
    assert "ReleaseFailed" not in world.conditions()


async def test_failed_upgrade_is_rolled_back_and_retried_with_backoff(world: World) -> None:
    await installed(world)
    world.edit(image="php:8.4")
    world.helm.fail_apply = True
    with pytest.raises(ReleaseError, match="cannot patch"):
        await world.reconcile()
    assert world.helm.calls == [("dry-run", NAME), ("upgrade", NAME), ("rollback", NAME, "1", "True")]
    assert world.conditions()["ReleaseFailed"]["reason"] == "UpgradeError"
    deployment = world.child(DEPLOYMENTS)
    assert deployment is not None
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "php:8.3"
    # Our own revisions (the failed one, the rollback's) did not bring the resource back.
    assert Request(NS, NAME) not in world.enqueued
    # Whatever else brings it back within the backoff runs no helm...
    assert await world.reconcile() == Result(requeue_after=pytest.approx(0.5))
    assert len(world.helm.calls) == 3
    # ... and after it, the retry upgrades again. A second failure doubles the wait.
    world.now += 0.5
    world.helm.fail_apply = True
    with pytest.raises(ReleaseError):
        await world.reconcile()
    assert world.reconciler._failures[Request(NS, NAME)].until == pytest.approx(world.now + 1.0)
    world.now += 1.0
    await world.reconcile()
    assert world.helm_ops()[-2:] == ["dry-run", "upgrade"]
    assert "ReleaseFailed" not in world.conditions()
    assert Request(NS, NAME) not in world.reconciler._failures
    # A spec change does not wait for the backoff.
    world.edit(image="php:9")
    world.helm.fail_apply = True
    with pytest.raises(ReleaseError):
        await world.reconcile()
    world.edit(image="php:9.1")
    await world.reconcile()
    assert world.helm_ops()[-2:] == ["dry-run", "upgrade"]


async def test_failed_install_is_uninstalled_and_retried_with_backoff(world: World) -> None:
    world.create({"image": "php:8.3"})
    world.helm.fail_apply = True
    with pytest.raises(ReleaseError, match="invalid"):
        await world.reconcile()
    assert world.helm_ops() == ["install", "uninstall"]
    assert world.cluster.informer(RELEASE_SECRETS).store.list() == []
    assert Request(NS, NAME) not in world.enqueued
    world.now += 0.5
    await world.reconcile()
    assert world.helm_ops() == ["install", "uninstall", "install"]
    assert world.conditions()["Deployed"]["status"] == "True"


async def test_leftover_failed_revisions_are_cleared_before_installing(world: World) -> None:
    world.create({"image": "php:8.3"})
    world.helm._record(NS, NAME, 1, "failed", "", {})
    await world.reconcile()
    assert world.helm_ops() == ["uninstall", "install"]


async def test_pending_revisions_of_a_dead_helm_are_dropped(world: World) -> None:
    await installed(world)
    world.helm._record(NS, NAME, 2, "pending-upgrade", "", {})
    await world.reconcile()
    assert ("delete", "Secret", f"{NS}/sh.helm.release.v1.{NAME}.v2") in world.cluster.writes
    assert world.helm.calls == []


async def test_delete_uninstalls_and_removes_the_finalizer(world: World) -> None:
    await installed(world)
    cr = world.cr()
    assert cr is not None
    cr["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    world.cluster.store(PHP, cr)
    assert await world.reconcile() is None
    assert world.helm_ops() == ["uninstall"]
    assert world.cr() is None  # finalizer removed: gone
    assert world.child(DEPLOYMENTS) is None and world.child(SERVICES) is None
    assert world.cluster.informer(RELEASE_SECRETS).store.list() == []


async def test_uninstall_wait_keeps_the_finalizer_until_the_objects_are_gone(chart: Path) -> None:
    world = World(chart)
    world.create({"image": "php:8.3"}, annotations={UNINSTALL_WAIT_ANNOTATION: "true"})
    await world.reconcile()
    lingering = world.child(DEPLOYMENTS)
    cr = world.cr()
    assert cr is not None and lingering is not None
    cr["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    world.cluster.store(PHP, cr)
    world.helm.uninstall = _uninstall_leaving(world, lingering)  # type: ignore[method-assign]
    assert await world.reconcile() == Result(requeue_after=2.0)
    assert world.cr() is not None
    assert world.conditions()["Deployed"]["message"] == "Waiting until all resources are deleted."
    world.cluster.delete(DEPLOYMENTS, f"{NS}/{NAME}")
    assert await world.reconcile() is None
    assert world.cr() is None


def _uninstall_leaving(world: World, lingering: dict[str, Any]) -> Any:
    original = world.helm.uninstall

    async def uninstall(name: str, ns: str, *, wait: bool = False) -> None:
        await original(name, ns, wait=wait)
        world.cluster.store(DEPLOYMENTS, lingering)  # still terminating

    return uninstall


async def test_a_deleted_resource_is_forgotten(world: World) -> None:
    await installed(world)
    world.cluster.delete(PHP, f"{NS}/{NAME}")
    assert await world.reconcile() is None
    assert world.reconciler._memo == {}


async def test_reconcile_period_annotation(chart: Path) -> None:
    world = World(chart)
    world.create({"image": "php:8.3"}, annotations={RECONCILE_PERIOD_ANNOTATION: "10s"})
    assert await world.reconcile() == Result(requeue_after=10.0)


async def test_watch_level_options(chart: Path) -> None:
    world = World(chart, reconcile_period=0.0, override_values={"replicas": "3"}, max_concurrent_reconciles=3)
    world.create({"image": "php:8.3", "replicas": 1})
    assert await world.reconcile() == Result()  # period 0: no periodic check
    deployment = world.child(DEPLOYMENTS)
    assert deployment is not None and deployment["spec"]["replicas"] == 3  # the override wins
    assert ("Warning", "OverrideValuesInUse") in [(e[0], e[1]) for e in world.recorder.events]
    assert world.reconciler.workers == 3
    controller = world.reconciler.controller()
    assert controller.name == "phpdeployment-controller" and controller is world.reconciler.controller()


async def test_release_storage_changes_enqueue(world: World) -> None:
    await installed(world)
    world.enqueued.clear()
    world.helm._record(NS, "other", 1, "deployed", "", {})
    assert Request(NS, "other") in world.enqueued


def test_annotation_helpers() -> None:
    obj = {
        "metadata": {"annotations": {"a": "true", "b": "F", "c": "maybe", RECONCILE_PERIOD_ANNOTATION: "2m"}}
    }
    assert annotation_bool(obj, "a", False) is True
    assert annotation_bool(obj, "b", True) is False
    assert annotation_bool(obj, "c", True) is True
    assert annotation_bool(obj, "missing", False) is False
    assert reconcile_period(obj, 60.0) == 120.0
    assert reconcile_period({"metadata": {}}, 60.0) == 60.0
    assert reconcile_period({"metadata": {"annotations": {RECONCILE_PERIOD_ANNOTATION: "x"}}}, 60.0) == 60.0


def test_chart_digest_sees_every_file(chart: Path) -> None:
    before = chart_digest(chart)
    (chart / "templates" / "cm.yaml").write_text("kind: ConfigMap\n")
    after = chart_digest(chart)
    assert before != after == chart_digest(chart)


def test_namespace_and_selector_filter_the_primary_watch(chart: Path) -> None:
    world = World(chart, selector={"matchLabels": {"team": "web"}})
    world.reconciler.runtime.namespace = "ns"
    preds = world.reconciler._primary_predicates()

    def passes(namespace: str, labels: dict[str, str]) -> bool:
        obj = {"metadata": {"name": "x", "namespace": namespace, "labels": labels, "generation": 1}}
        newer = {"metadata": {**obj["metadata"], "generation": 2}}
        return all(p.create(obj) and p.update(obj, newer) and p.delete(obj) for p in preds)

    assert passes("ns", {"team": "web"})
    assert not passes("other", {"team": "web"})
    assert not passes("ns", {"team": "db"})
    # Our own status and finalizer writes (no generation or annotation change) do not come back.
    obj = {"metadata": {"name": "x", "namespace": "ns", "labels": {"team": "web"}, "generation": 1}}
    assert not all(p.update(obj, {**obj, "status": {"x": 1}}) for p in preds)


async def test_resources_outside_the_selection_are_left_alone(chart: Path) -> None:
    world = World(chart, selector={"matchLabels": {"team": "web"}})
    world.create({"image": "php:8.3"})  # no team label: a release event may bring it here anyway
    assert await world.reconcile() is None
    assert world.helm.calls == [] and world.cluster.writes == []
