"""Status conditions of a Helm-managed resource: transitions, reasons, no needless changes."""

from __future__ import annotations

from typing import Any

from kubeop.helm.status import DEPLOYED, INITIALIZED, IRRECONCILABLE, RELEASE_FAILED, HelmStatus, Reason


def obj(status: dict[str, Any] | None = None, generation: int = 1) -> dict[str, Any]:
    out: dict[str, Any] = {"metadata": {"name": "web", "generation": generation}}
    if status is not None:
        out["status"] = status
    return out


def by_type(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_install_success() -> None:
    s = HelmStatus(obj())
    s.initialized()
    s.deployed("web", "manifest", reason=Reason.INSTALL_SUCCESSFUL, notes="hello")
    out = s.to_dict()
    conds = by_type(out)
    assert conds[INITIALIZED]["status"] == "True" and conds[INITIALIZED]["reason"] == "Initialized"
    assert conds[DEPLOYED] | {"lastTransitionTime": None} == {
        "type": "Deployed", "status": "True", "reason": "InstallSuccessful", "message": "hello",
        "observedGeneration": 1, "lastTransitionTime": None,
    }  # fmt: skip
    assert out["deployedRelease"] == {"name": "web", "manifest": "manifest"}


def test_recomputing_the_same_status_changes_nothing() -> None:
    s = HelmStatus(obj())
    s.initialized()
    s.deployed("web", "m", reason=Reason.INSTALL_SUCCESSFUL)
    first = s.to_dict()
    again = HelmStatus(obj(first))
    again.initialized()
    again.reconciled()
    again.release_ok()
    again.deployed("web", "m", reason=Reason.INSTALL_SUCCESSFUL)
    assert again.to_dict() == first


def test_failure_then_recovery() -> None:
    s = HelmStatus(obj())
    s.initialized()
    s.deployed("web", "m1", reason=Reason.INSTALL_SUCCESSFUL)
    s.release_failed(Reason.UPGRADE_ERROR, "boom")
    out = s.to_dict()
    assert by_type(out)[RELEASE_FAILED]["reason"] == "UpgradeError"
    assert by_type(out)[RELEASE_FAILED]["message"] == "boom"
    assert by_type(out)[DEPLOYED]["status"] == "True"  # the old release stays deployed
    assert out["deployedRelease"]["manifest"] == "m1"
    s2 = HelmStatus(obj(out, generation=2))
    s2.deployed("web", "m2", reason=Reason.UPGRADE_SUCCESSFUL)
    out2 = s2.to_dict()
    assert RELEASE_FAILED not in by_type(out2)
    assert by_type(out2)[DEPLOYED]["reason"] == "UpgradeSuccessful"
    assert by_type(out2)[DEPLOYED]["observedGeneration"] == 2


def test_transition_time_moves_only_with_status() -> None:
    s = HelmStatus(obj())
    s.deployed("web", "m", reason=Reason.INSTALL_SUCCESSFUL)
    stamp = by_type(s.to_dict())[DEPLOYED]["lastTransitionTime"]
    s.conditions[-1]["lastTransitionTime"] = "2000-01-01T00:00:00Z"
    s.deployed("web", "m2", reason=Reason.UPGRADE_SUCCESSFUL)
    assert by_type(s.to_dict())[DEPLOYED]["lastTransitionTime"] == "2000-01-01T00:00:00Z"
    s.uninstalled()
    assert by_type(s.to_dict())[DEPLOYED]["lastTransitionTime"] not in ("2000-01-01T00:00:00Z", None)
    assert stamp


def test_irreconcilable_and_back() -> None:
    s = HelmStatus(obj())
    s.irreconcilable("cannot restore Deployment web: forbidden")
    cond = by_type(s.to_dict())[IRRECONCILABLE]
    assert (cond["status"], cond["reason"]) == ("True", "ReconcileError")
    s.reconciled()
    assert IRRECONCILABLE not in by_type(s.to_dict())


def test_uninstall_with_and_without_wait() -> None:
    s = HelmStatus(obj())
    s.deployed("web", "m", reason=Reason.INSTALL_SUCCESSFUL)
    s.release_failed(Reason.UNINSTALL_ERROR, "x")
    s.uninstalled(waiting=True)
    out = s.to_dict()
    cond = by_type(out)[DEPLOYED]
    assert (cond["status"], cond["reason"]) == ("False", "UninstallSuccessful")
    assert cond["message"] == "Waiting until all resources are deleted."
    assert out["deployedRelease"] == {"name": "web", "manifest": "m"}  # what to wait for
    assert RELEASE_FAILED not in by_type(out)
    s.uninstalled()
    out = s.to_dict()
    assert by_type(out)[DEPLOYED]["message"] == ""
    assert out["deployedRelease"] is None  # a merge patch with null removes it


def test_the_status_read_is_not_mutated() -> None:
    original = {"conditions": [{"type": "Deployed", "status": "True", "reason": "InstallSuccessful"}]}
    s = HelmStatus(obj(original))
    s.uninstalled()
    assert original["conditions"][0]["status"] == "True"
    assert s.condition(DEPLOYED) is not None and s.condition("Nope") is None


def test_long_messages_keep_their_start_and_end() -> None:
    s = HelmStatus(obj())
    s.release_failed(
        Reason.UPGRADE_ERROR, "UPGRADE FAILED: cannot patch" + "x" * 10_000 + "quantities must match"
    )
    message = by_type(s.to_dict())[RELEASE_FAILED]["message"]
    assert len(message) <= 4000
    assert message.startswith("UPGRADE FAILED: cannot patch") and message.endswith("quantities must match")
    assert "(truncated)" in message


def test_a_status_written_before_redaction_is_redacted_on_the_next_write() -> None:
    manifest = (
        "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  password: old-secret\n"
    )
    s = HelmStatus({**obj(), "status": {"deployedRelease": {"name": "web", "manifest": manifest}}})
    s.release_failed(Reason.UPGRADE_ERROR, "x")  # a path that keeps the deployed release as it was
    out = s.to_dict()["deployedRelease"]
    assert (
        out["name"] == "web"
        and "old-secret" not in out["manifest"]
        and "password: <redacted>" in out["manifest"]
    )


def test_deployed_redacts_the_manifest_and_the_notes() -> None:
    manifest = "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  password: hunter2-x\n"
    s = HelmStatus(obj())
    s.deployed("web", manifest, reason=Reason.INSTALL_SUCCESSFUL, notes="log in with hunter2-x")
    out = s.to_dict()
    assert "hunter2-x" not in str(out)
    assert by_type(out)[DEPLOYED]["message"] == "log in with <redacted>"
