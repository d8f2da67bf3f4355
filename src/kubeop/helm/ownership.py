"""Which custom resource owns a Helm release, and whether the operator may act on it.

A release is named after its custom resource, so the name alone proves nothing: anyone may
have run ``helm install web ...`` in the namespace before a resource named ``web`` appeared.
The operator therefore records the owning resource in the release itself, as Helm release
labels (``helm install/upgrade --labels``, Helm 3.13 and later), which Helm keeps on the
storage Secret of every revision and carries over on upgrades and rollbacks:

- ``helm.kubeop.dev/owner-uid``: the resource's uid, the mark that decides;
- ``helm.kubeop.dev/owner-kind`` and ``helm.kubeop.dev/owner-group``: for people reading
  ``kubectl get secret -l owner=helm --show-labels`` (the owner's namespace and name are the
  release's own).

:func:`release_ownership` decides from the newest stored revision (the one Helm itself reads on
the next upgrade):

- no revision: :attr:`Claim.ABSENT` (install);
- owner-uid is the resource's: :attr:`Claim.OWNED`;
- owner-uid is another uid: :attr:`Claim.FOREIGN`, never adopted (another resource of the same
  name, perhaps an earlier one, or of another kind served by the same operator);
- no owner-uid: :attr:`Claim.LEGACY` when the revision is of the operator's chart *and* its
  manifest holds an object with a controller owner reference to this very resource (uid). Only
  the operator's post-renderer writes that reference, and only for this resource, so this is a
  release the operator made before it recorded owners: it is adopted, and the next upgrade
  records the owner. Anything else without a mark is :attr:`Claim.FOREIGN`.

A foreign release is never upgraded, rolled back, cleaned up or uninstalled; the resource gets
a Warning event and ``ReleaseFailed`` (reason ``ReleaseNotOwned``) naming the fix. To hand an
unmarked release over on purpose (say, one whose chart renders no object that can carry an owner
reference), someone allowed to change the release marks its newest revision::

    kubectl label secret -n NS sh.helm.release.v1.NAME.vN helm.kubeop.dev/owner-uid=UID

The consent comes from whoever controls the release, never from the resource's author (who is
the very party the check protects against).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubeop.core import meta as m
from kubeop.helm.manifest import ManifestError, parse_manifest
from kubeop.helm.releases import Release

__all__ = [
    "OWNER_GROUP_LABEL",
    "OWNER_KIND_LABEL",
    "OWNER_UID_LABEL",
    "Claim",
    "Ownership",
    "owner_labels",
    "release_ownership",
]

OWNER_UID_LABEL = "helm.kubeop.dev/owner-uid"
OWNER_KIND_LABEL = "helm.kubeop.dev/owner-kind"
OWNER_GROUP_LABEL = "helm.kubeop.dev/owner-group"

# A label value: at most 63 characters, alphanumerics with - _ . inside. Helm's --labels flag
# splits on "," and "=", which this excludes too.
_LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


class Claim(enum.Enum):
    ABSENT = "absent"
    OWNED = "owned"
    LEGACY = "legacy"
    FOREIGN = "foreign"


@dataclass(frozen=True)
class Ownership:
    """The verdict on one release for one resource; ``why`` says it for a person (FOREIGN)."""

    claim: Claim
    why: str = ""
    revision: int = 0  # the newest stored revision (0: none)

    @property
    def ours(self) -> bool:
        """May the operator act on the release (upgrade, clean up, uninstall)?"""
        return self.claim in (Claim.OWNED, Claim.LEGACY)


def owner_labels(cr: Mapping[str, Any]) -> dict[str, str]:
    """The release labels that record ``cr`` as the owner (raises ValueError if its uid cannot
    be a label value, which a uid from the API server always can)."""
    uid = m.uid(cr) or ""
    if not uid or not _LABEL_VALUE.match(uid):
        raise ValueError(f"the resource's uid {uid!r} cannot be recorded as a release label")
    labels = {OWNER_UID_LABEL: uid}
    kind = str(cr.get("kind") or "")
    group = str(cr.get("apiVersion") or "").rpartition("/")[0]
    if kind and _LABEL_VALUE.match(kind):
        labels[OWNER_KIND_LABEL] = kind
    if group and _LABEL_VALUE.match(group):
        labels[OWNER_GROUP_LABEL] = group
    return labels


def release_ownership(history: Sequence[Release], cr: Mapping[str, Any], chart_name: str) -> Ownership:
    """Does the release whose revisions are ``history`` belong to ``cr``? (See the module docs.)"""
    if not history:
        return Ownership(Claim.ABSENT)
    latest = max(history, key=lambda r: r.version)
    uid = m.uid(cr) or ""
    recorded = latest.labels.get(OWNER_UID_LABEL)
    chart = f"{latest.chart}-{latest.chart_version}" if latest.chart_version else latest.chart
    if recorded:
        if uid and recorded == uid:
            return Ownership(Claim.OWNED, revision=latest.version)
        kind = latest.labels.get(OWNER_KIND_LABEL) or "resource"
        return Ownership(
            Claim.FOREIGN,
            f"it belongs to another {kind} (uid {recorded}), not this one (uid {uid})",
            latest.version,
        )
    if latest.chart != chart_name:
        return Ownership(
            Claim.FOREIGN,
            f"it is a release of chart {chart or '(unknown)'}, not of this operator's chart "
            f"{chart_name}, and records no owner",
            latest.version,
        )
    if uid and _controlled_by(latest.manifest, uid):
        return Ownership(Claim.LEGACY, revision=latest.version)
    return Ownership(
        Claim.FOREIGN,
        f"it records no owner and none of its objects is controlled by this resource (uid {uid}): "
        "it was not made by this operator for this resource",
        latest.version,
    )


def _controlled_by(manifest: str, uid: str) -> bool:
    """Does an object of ``manifest`` carry a controller owner reference with ``uid``?"""
    try:
        objects = parse_manifest(manifest) if manifest else ()
    except ManifestError:
        return False
    for obj in objects:
        md = obj.get("metadata")
        refs = md.get("ownerReferences") if isinstance(md, dict) else None
        if not isinstance(refs, list):
            continue
        for ref in refs:
            if isinstance(ref, dict) and ref.get("controller") is True and ref.get("uid") == uid:
                return True
    return False
