"""A fake Helm for unit tests of the Helm reconciler, writing to a :class:`~kubeop.testing.FakeCluster`.

The API server is kubeop's own fake cluster (conflicts, generations, finalizers, watches); what
stands in here is the ``helm`` binary: :class:`FakeHelm` renders a two-object chart (Service +
Deployment with the image value), stores releases as Helm's real storage Secrets (so the real
ReleaseStore decodes them) and applies objects the way Helm labels them, through its own client.
Every helm call is recorded.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import gzip
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeop.client import Client
from kubeop.core.errors import AlreadyExists, NotFound
from kubeop.core.gvk import GroupVersionKind
from kubeop.core.resource import ApiResource
from kubeop.helm.engine import HelmError
from kubeop.helm.postrender import inject_owner_references
from kubeop.helm.releases import RELEASE_SECRETS, Release, release_from_json

PHP = ApiResource("web.example.com", "v1", "phpdeployments", kind="PhpDeployment")
DEPLOYMENTS = ApiResource("apps", "v1", "deployments", kind="Deployment")
SERVICES = ApiResource("", "v1", "services", kind="Service")
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
RESOURCES = {r.gvk: r for r in (PHP, DEPLOYMENTS, SERVICES, CONFIGMAPS, RELEASE_SECRETS)}
RESOURCES[GroupVersionKind("", "v1", "Secret")] = RELEASE_SECRETS

PHP_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "phpdeployments.web.example.com"},
    "spec": {
        "group": "web.example.com",
        "scope": "Namespaced",
        "names": {"plural": "phpdeployments", "singular": "phpdeployment", "kind": "PhpDeployment"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}


async def _put(client: Client, res: ApiResource, obj: dict[str, Any]) -> dict[str, Any]:
    """Create ``obj``, or replace the live one (as Helm's apply leaves the object as rendered)."""
    md = obj["metadata"]
    try:
        return await client.create(obj, resource=res)
    except AlreadyExists:
        live = await client.get(res, md["name"], namespace=md.get("namespace"))
        md["resourceVersion"] = live["metadata"]["resourceVersion"]
        return await client.update(obj, resource=res)


SYSTEM_LABELS = frozenset({"name", "owner", "status", "version", "createdAt", "modifiedAt"})


def release_secret(
    ns: str,
    name: str,
    version: int,
    status: str,
    manifest: str,
    values: Any,
    notes: str = "",
    *,
    labels: Mapping[str, str] | None = None,
    chart: str = "php",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A release as Helm records it: its JSON document and the storage Secret that holds it
    (``labels``: the release's own, Helm's ``--labels``, kept on the Secret only)."""
    doc = {
        "name": name,
        "namespace": ns,
        "version": version,
        "info": {"status": status, "notes": notes, "description": status},
        "chart": {"metadata": {"name": chart, "version": "0.1.0"}},
        "config": values,
        "manifest": manifest,
    }
    encoded = base64.b64encode(gzip.compress(json.dumps(doc).encode())).decode()
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"sh.helm.release.v1.{name}.v{version}",
            "namespace": ns,
            "labels": {
                **(labels or {}),
                "owner": "helm",
                "name": name,
                "status": status,
                "version": str(version),
            },
        },
        "type": "helm.sh/release.v1",
        "data": {"release": base64.b64encode(encoded.encode()).decode()},
    }
    return doc, secret


@dataclass
class FakeHelm:
    """A Helm that renders a Service + Deployment from ``image`` (and ``replicas``).

    ``image: ""`` is a template error (nothing is recorded); ``fail_apply`` makes the next
    install or upgrade fail after Helm recorded a failed revision, as a refused object does
    (with ``fail_message`` as Helm's error). ``secret``: the chart also renders a Secret with
    that value (from the chart, not from the values). Release labels are kept as Helm 3.13+
    keeps them: given on install, merged on upgrade, copied on rollback.
    """

    client: Client
    calls: list[tuple[str, ...]] = field(default_factory=list)
    fail_apply: bool = False
    fail_message: str = ""
    secret: str | None = None

    def render(self, name: str, values: Mapping[str, Any], op: str) -> str:
        if not values.get("image"):
            raise HelmError(
                op, "execution error at (php/templates/deployment.yaml:9:20): spec.image is required", 1
            )
        secret = ""
        if self.secret is not None:
            secret = (
                "---\n# Source: php/templates/secret.yaml\n"
                f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n"
                f"stringData:\n  password: {json.dumps(self.secret)}\n"
                f"data:\n  token: {base64.b64encode(self.secret.encode()).decode()}\n"
            )
        return secret + (
            "---\n# Source: php/templates/service.yaml\n"
            f"apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n"
            "spec:\n  ports:\n    - port: 80\n"
            "---\n# Source: php/templates/deployment.yaml\n"
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n"
            f"  name: {name}\nspec:\n  replicas: {int(values.get('replicas', 1))}\n  template:\n    spec:\n"
            f"      containers:\n        - name: php\n          image: {json.dumps(values['image'])}\n"
        )

    async def _history(self, ns: str, name: str) -> list[dict[str, Any]]:
        found = await self.client.list(
            RELEASE_SECRETS, namespace=ns, label_selector=f"owner=helm,name={name}"
        )
        return list(found.items)

    async def _record(
        self,
        ns: str,
        name: str,
        version: int,
        status: str,
        manifest: str,
        values: Any,
        notes: str = "",
        *,
        labels: Mapping[str, str] | None = None,
        chart: str = "php",
    ) -> Release:
        doc, secret = release_secret(
            ns, name, version, status, manifest, values, notes, labels=labels, chart=chart
        )
        await _put(self.client, RELEASE_SECRETS, secret)
        return release_from_json(doc)

    @staticmethod
    def _labels(secret: Mapping[str, Any]) -> dict[str, str]:
        return {k: v for k, v in secret["metadata"]["labels"].items() if k not in SYSTEM_LABELS}

    async def _set_status(self, secret: dict[str, Any], status: str) -> None:
        from kubeop.helm.releases import decode_release

        doc = decode_release(base64.b64decode(secret["data"]["release"]))
        await self._record(
            secret["metadata"]["namespace"],
            doc["name"],
            doc["version"],
            status,
            doc["manifest"],
            doc["config"],
            labels=self._labels(secret),
            chart=doc["chart"]["metadata"]["name"],
        )

    async def _apply(self, ns: str, name: str, manifest: str) -> None:
        from kubeop.helm.manifest import parse_manifest

        for obj in parse_manifest(manifest):
            res = RESOURCES[GroupVersionKind.from_api_version(obj["apiVersion"], obj["kind"])]
            want = copy.deepcopy(obj)  # parse_manifest may share what it returns
            md = want["metadata"]
            md["namespace"] = ns
            md.setdefault("labels", {})["app.kubernetes.io/managed-by"] = "Helm"
            md.setdefault("annotations", {}).update(
                {"meta.helm.sh/release-name": name, "meta.helm.sh/release-namespace": ns}
            )
            await _put(self.client, res, want)

    @staticmethod
    def _post_render(manifest: str, spec: str | None) -> str:
        if spec is None:
            return manifest
        s = json.loads(spec)
        return inject_owner_references(manifest, s["owner"], s["namespace"], frozenset(s["namespacedKinds"]))

    async def install(
        self,
        name: str,
        ns: str,
        chart: Any,
        values: Mapping[str, Any],
        *,
        post_renderer: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Release:
        self.calls.append(("install", name))
        if await self._history(ns, name):
            raise HelmError("install", "INSTALLATION FAILED: cannot re-use a name that is still in use", 1)
        manifest = self._post_render(self.render(name, values, "install"), post_renderer)
        if self.fail_apply:
            self.fail_apply = False
            await self._record(ns, name, 1, "failed", manifest, dict(values), labels=labels)
            raise HelmError(
                "install", self.fail_message or 'INSTALLATION FAILED: Deployment "x" is invalid', 1
            )
        await self._apply(ns, name, manifest)
        return await self._record(
            ns, name, 1, "deployed", manifest, dict(values), notes="notes", labels=labels
        )

    async def upgrade(
        self,
        name: str,
        ns: str,
        chart: Any,
        values: Mapping[str, Any],
        *,
        force: bool = False,
        dry_run: bool = False,
        post_renderer: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Release:
        self.calls.append(("dry-run" if dry_run else ("upgrade-force" if force else "upgrade"), name))
        history = await self._history(ns, name)
        latest = max(history, key=lambda s: int(s["metadata"]["labels"]["version"]))
        version = int(latest["metadata"]["labels"]["version"]) + 1
        merged = {**self._labels(latest), **(labels or {})}
        manifest = self._post_render(self.render(name, values, "upgrade"), post_renderer)
        if dry_run:
            return Release(name, ns, version, "pending-upgrade", manifest, dict(values))
        if self.fail_apply:
            self.fail_apply = False
            await self._record(ns, name, version, "failed", manifest, dict(values), labels=merged)
            raise HelmError(
                "upgrade", self.fail_message or 'UPGRADE FAILED: cannot patch "x" with kind Deployment', 1
            )
        for s in history:
            if s["metadata"]["labels"]["status"] == "deployed":
                await self._set_status(s, "superseded")
        await self._apply(ns, name, manifest)
        return await self._record(
            ns, name, version, "deployed", manifest, dict(values), notes="notes", labels=merged
        )

    async def rollback(self, name: str, ns: str, revision: int, *, force: bool = False) -> None:
        from kubeop.helm.releases import release_from_secret

        self.calls.append(("rollback", name, str(revision), str(force)))
        history = await self._history(ns, name)
        target_secret = next(s for s in history if s["metadata"]["labels"]["version"] == str(revision))
        target = release_from_secret(target_secret)
        version = max(int(s["metadata"]["labels"]["version"]) for s in history) + 1
        for s in history:
            if s["metadata"]["labels"]["status"] == "deployed":
                await self._set_status(s, "superseded")
        await self._apply(ns, name, target.manifest)
        await self._record(
            ns,
            name,
            version,
            "deployed",
            target.manifest,
            dict(target.config),
            labels=self._labels(target_secret),
        )

    async def uninstall(self, name: str, ns: str, *, wait: bool = False) -> None:
        from kubeop.helm.manifest import parse_manifest
        from kubeop.helm.releases import release_from_secret

        self.calls.append(("uninstall", name))
        history = await self._history(ns, name)
        for s in history:
            rel = release_from_secret(s)
            if rel.deployed:
                for obj in parse_manifest(rel.manifest):
                    res = RESOURCES[GroupVersionKind.from_api_version(obj["apiVersion"], obj["kind"])]
                    with contextlib.suppress(NotFound):
                        await self.client.delete(res, obj["metadata"]["name"], namespace=ns)
        for s in history:
            with contextlib.suppress(NotFound):
                await self.client.delete(RELEASE_SECRETS, s["metadata"]["name"], namespace=ns)

    def close(self) -> None:
        pass
