"""Which resource owns a release: the owner labels, and the verdict on a release's history."""

from __future__ import annotations

from typing import Any

import pytest

from kubeop.helm.ownership import (
    OWNER_GROUP_LABEL,
    OWNER_KIND_LABEL,
    OWNER_UID_LABEL,
    Claim,
    owner_labels,
    release_ownership,
)
from kubeop.helm.postrender import inject_owner_references
from kubeop.helm.releases import Release

UID = "6f0c1a52-9e2d-4c43-9a57-3f0a3c1d2e11"
CR: dict[str, Any] = {
    "apiVersion": "web.example.com/v1",
    "kind": "PhpDeployment",
    "metadata": {"name": "web", "namespace": "ns", "uid": UID},
}
MANIFEST = "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports: [{port: 80}]\n"
OWNER = {"apiVersion": "web.example.com/v1", "kind": "PhpDeployment", "name": "web", "uid": UID}
OURS = inject_owner_references(MANIFEST, OWNER, "ns", {"/Service"})


def rel(version: int = 1, *, chart: str = "php", manifest: str = MANIFEST, **labels: str) -> Release:
    return Release(
        "web", "ns", version, "deployed", manifest, chart=chart, chart_version="0.1.0", labels=labels
    )


def test_owner_labels() -> None:
    assert owner_labels(CR) == {
        OWNER_UID_LABEL: UID,
        OWNER_KIND_LABEL: "PhpDeployment",
        OWNER_GROUP_LABEL: "web.example.com",
    }
    # A group too long for a label value is left out (it is for people; the uid decides).
    long_group = {**CR, "apiVersion": "a" * 60 + ".example.com/v1"}
    assert OWNER_GROUP_LABEL not in owner_labels(long_group)
    core = {**CR, "apiVersion": "v1"}
    assert OWNER_GROUP_LABEL not in owner_labels(core)
    for uid in ("", "a,b", "x=y", "a" * 64, "-a"):
        with pytest.raises(ValueError, match="cannot be recorded as a release label"):
            owner_labels({**CR, "metadata": {"uid": uid}})


def test_no_release_is_absent() -> None:
    assert release_ownership([], CR, "php").claim is Claim.ABSENT


def test_the_owner_uid_decides() -> None:
    assert release_ownership([rel(**{OWNER_UID_LABEL: UID})], CR, "php").claim is Claim.OWNED
    # Owned whatever its chart now is (the operator's chart may be renamed).
    assert release_ownership([rel(chart="other", **{OWNER_UID_LABEL: UID})], CR, "php").ours
    other = release_ownership(
        [rel(manifest=OURS, **{OWNER_UID_LABEL: "x1", OWNER_KIND_LABEL: "K"})], CR, "php"
    )
    assert other.claim is Claim.FOREIGN and "another K (uid x1)" in other.why


def test_the_newest_revision_decides() -> None:
    history = [rel(1, **{OWNER_UID_LABEL: UID}), rel(2, chart="nginx")]
    verdict = release_ownership(history, CR, "php")
    assert verdict.claim is Claim.FOREIGN and verdict.revision == 2
    assert release_ownership(list(reversed([rel(1), rel(2, **{OWNER_UID_LABEL: UID})])), CR, "php").ours


def test_an_unmarked_release() -> None:
    # Of another chart: foreign, even with our references in it.
    verdict = release_ownership([rel(chart="nginx", manifest=OURS)], CR, "php")
    assert (
        verdict.claim is Claim.FOREIGN
        and "chart nginx-0.1.0, not of this operator's chart php" in verdict.why
    )
    # Of our chart, made for this resource (the post-renderer's controller reference): ours.
    assert release_ownership([rel(manifest=OURS)], CR, "php").claim is Claim.LEGACY
    # Of our chart, without the reference, or with another resource's: foreign.
    assert release_ownership([rel()], CR, "php").claim is Claim.FOREIGN
    theirs = inject_owner_references(MANIFEST, {**OWNER, "uid": "other"}, "ns", {"/Service"})
    assert release_ownership([rel(manifest=theirs)], CR, "php").claim is Claim.FOREIGN
    # A reference that is not a controller reference proves nothing; nor does a broken manifest.
    plain = OURS.replace('"controller": true', '"controller": false')
    assert '"controller": false' in plain
    assert release_ownership([rel(manifest=plain)], CR, "php").claim is Claim.FOREIGN
    assert release_ownership([rel(manifest="a: [")], CR, "php").claim is Claim.FOREIGN
    # A resource without a uid owns nothing.
    assert release_ownership([rel(manifest=OURS)], {**CR, "metadata": {}}, "php").claim is Claim.FOREIGN
