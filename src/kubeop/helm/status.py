"""The status of a Helm-managed custom resource: conditions and the deployed release.

The conditions and reasons are operator-sdk's, so dashboards and ``kubectl wait`` lines written
for its Helm operators keep working:

=================  =====================================================================
``Initialized``    True once the operator has seen the resource (reason ``Initialized``).
``Deployed``       True with ``InstallSuccessful`` / ``UpgradeSuccessful`` (message: the
                   chart's NOTES); False with ``UninstallSuccessful`` while being deleted.
``ReleaseFailed``  True with ``InstallError`` / ``UpgradeError`` / ``UninstallError`` and
                   Helm's error message; removed once a release succeeds again. True with
                   ``ReleaseNotOwned`` (kubeop's) when a release of the resource's name
                   exists but is not the resource's (:mod:`kubeop.helm.ownership`): left
                   untouched; Deployed is then False with the same reason.
``Irreconcilable`` True with ``ReconcileError`` when the release's storage cannot be read or
                   its objects cannot be restored; removed when that works again.
=================  =====================================================================

``status.deployedRelease`` is ``{name, manifest}`` of the release revision in force, with the
values of its Secrets redacted: whoever may read the resource must not learn them from it.
:class:`HelmStatus` computes the next status from the current one without I/O; a condition's
``lastTransitionTime`` moves only when its status does, so recomputing an unchanged status gives
an equal one and the reconciler writes nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kubeop.controller import find_condition, set_condition
from kubeop.helm.redaction import redact_secrets, scrub, secret_values

__all__ = [
    "DEPLOYED",
    "INITIALIZED",
    "IRRECONCILABLE",
    "RELEASE_FAILED",
    "HelmStatus",
    "Reason",
]

INITIALIZED = "Initialized"
DEPLOYED = "Deployed"
RELEASE_FAILED = "ReleaseFailed"
IRRECONCILABLE = "Irreconcilable"


class Reason:
    """Condition reasons (operator-sdk's names, and ``ReleaseNotOwned``)."""

    INITIALIZED = "Initialized"
    INSTALL_SUCCESSFUL = "InstallSuccessful"
    UPGRADE_SUCCESSFUL = "UpgradeSuccessful"
    UNINSTALL_SUCCESSFUL = "UninstallSuccessful"
    INSTALL_ERROR = "InstallError"
    UPGRADE_ERROR = "UpgradeError"
    UNINSTALL_ERROR = "UninstallError"
    RECONCILE_ERROR = "ReconcileError"
    RELEASE_NOT_OWNED = "ReleaseNotOwned"


WAITING_FOR_DELETION = "Waiting until all resources are deleted."
MAX_MESSAGE = 4000


def _cut(message: str) -> str:
    """At most MAX_MESSAGE characters, keeping the start (what failed) and the end (why)."""
    if len(message) <= MAX_MESSAGE:
        return message
    marker = " ... (truncated) ... "
    half = (MAX_MESSAGE - len(marker)) // 2
    return f"{message[:half]}{marker}{message[-half:]}"


class HelmStatus:
    """A working copy of a resource's status (see the module docstring).

    Build it from the object as read (``HelmStatus(obj)``), apply what happened, and write
    :meth:`to_dict` with a compare-before-write status patch.
    """

    def __init__(self, obj: Mapping[str, Any]) -> None:
        status = obj.get("status") or {}
        self.generation: int | None = (obj.get("metadata") or {}).get("generation")
        self.conditions: list[dict[str, Any]] = copy.deepcopy(list(status.get("conditions") or []))
        deployed = status.get("deployedRelease")
        self.deployed_release: dict[str, Any] | None = dict(deployed) if deployed else None
        manifest = (self.deployed_release or {}).get("manifest")
        if isinstance(manifest, str) and manifest:
            # Written before manifests were redacted: the next status write redacts it.
            self.deployed_release = {**(self.deployed_release or {}), "manifest": redact_secrets(manifest)}

    # -- transitions ----------------------------------------------------------------------------

    def _set(self, type_: str, status: bool, reason: str, message: str = "") -> None:
        set_condition(self.conditions, type_, status, reason, message, observed_generation=self.generation)

    def remove(self, type_: str) -> None:
        """Remove the condition of type ``type_``, if any."""
        self.conditions = [c for c in self.conditions if c.get("type") != type_]

    def initialized(self) -> None:
        """Set ``Initialized=True``."""
        self._set(INITIALIZED, True, Reason.INITIALIZED)

    def deployed(self, name: str, manifest: str, *, reason: str, notes: str = "") -> None:
        """A release revision is in force: Deployed=True, deployedRelease set, no failure. The
        manifest is stored with its Secrets' values redacted, and the NOTES without them
        (:mod:`kubeop.helm.redaction`)."""
        self._set(DEPLOYED, True, reason, scrub(notes, secret_values([manifest])))
        self.deployed_release = {"name": name, "manifest": redact_secrets(manifest)}
        self.remove(RELEASE_FAILED)

    def release_failed(self, reason: str, message: str) -> None:
        """An install, upgrade or uninstall failed (the deployed release, if any, stays). Helm's
        messages can quote a whole object: the message is cut to :data:`MAX_MESSAGE` characters,
        keeping its start and its end."""
        self._set(RELEASE_FAILED, True, reason, _cut(message))

    def not_owned(self, message: str) -> None:
        """A release of the resource's name exists and is not the resource's: nothing of it is
        this resource's deployed release."""
        self._set(RELEASE_FAILED, True, Reason.RELEASE_NOT_OWNED, _cut(message))
        self._set(DEPLOYED, False, Reason.RELEASE_NOT_OWNED)
        self.deployed_release = None

    def release_ok(self) -> None:
        """Nothing is failing any more (a failing change was reverted)."""
        self.remove(RELEASE_FAILED)

    def irreconcilable(self, message: str) -> None:
        """Set ``Irreconcilable=True`` with reason ReconcileError and ``message``."""
        self._set(IRRECONCILABLE, True, Reason.RECONCILE_ERROR, _cut(message))

    def reconciled(self) -> None:
        """Remove ``Irreconcilable``: the release could be read and restored again."""
        self.remove(IRRECONCILABLE)

    def uninstalled(self, *, waiting: bool = False) -> None:
        """The release was uninstalled; with ``waiting``, its objects are still going away and
        deployedRelease stays (it says what to wait for)."""
        self._set(DEPLOYED, False, Reason.UNINSTALL_SUCCESSFUL, WAITING_FOR_DELETION if waiting else "")
        self.remove(RELEASE_FAILED)
        if not waiting:
            self.deployed_release = None

    # -- reading --------------------------------------------------------------------------------

    def condition(self, type_: str) -> Mapping[str, Any] | None:
        """The condition of type ``type_``, or None."""
        return find_condition(self.conditions, type_)

    def to_dict(self) -> dict[str, Any]:
        """The status to merge-patch: ``deployedRelease: None`` deletes it, the condition list
        replaces the stored one."""
        return {"conditions": self.conditions, "deployedRelease": self.deployed_release}
