"""The objects that put an aggregated API server behind kube-apiserver: its Service, the
APIService of its group version, and the RBAC every extension API server needs (to create
TokenReviews and SubjectAccessReviews: ``system:auth-delegator``; to read the front proxy's CA in
``kube-system/extension-apiserver-authentication``: ``extension-apiserver-authentication-reader``).

::

    objs = apiserver_manifests([Widget], name="widgets-api", namespace="widgets",
                               service_account="widgets-api", ca_bundle=ca_pem)
    print(render_yaml(objs))     # kubeop.crd.manifest.render_yaml

``ca_bundle`` is the PEM of the CA that signed the server's certificate, which must name
``<name>.<namespace>.svc`` (the name kube-apiserver checks). Left out, the APIService carries
none: something must inject it before kube-apiserver can reach the server, such as
:class:`kubeop.webhook.CertRotator` with ``inject=("apiservices/<version>.<group>",)``:
``cert_secret=`` (the rotator's Secret) adds the RBAC it needs (get/create/update of that Secret
in ``namespace``, get/patch of this APIService).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from kubeop.crd.declaration import Declaration
from kubeop.crd.resource import CustomResource

__all__ = ["apiserver_manifests"]


def apiserver_manifests(
    resources: Sequence[type[CustomResource]],
    *,
    name: str,
    namespace: str,
    service_account: str,
    selector: Mapping[str, str] | None = None,
    port: int = 443,
    target_port: int = 8443,
    ca_bundle: bytes | None = None,
    group_priority_minimum: int = 1000,
    version_priority: int = 15,
    cert_secret: str | None = None,
) -> list[dict[str, Any]]:
    """Service, APIService and RBAC for a server of ``resources`` (one group version) running
    as ``service_account`` in pods labelled ``selector`` (default ``app: <name>``); with
    ``cert_secret``, the RBAC of a certificate rotator keeping that Secret."""
    decls: list[Declaration] = []
    for model in resources:
        decl = getattr(model, "__crd__", None)
        if not isinstance(decl, Declaration):
            raise TypeError(f"{model!r} is not a declared kind (CustomResource with group= and version=)")
        decls.append(decl)
    versions = {(d.group, d.version) for d in decls}
    if len(versions) != 1:
        raise ValueError(f"one APIService per group version: got {sorted('/'.join(v) for v in versions)}")
    ((group, version),) = versions
    labels = dict(selector or {"app": name})
    service: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": labels,
            "ports": [{"name": "https", "port": port, "targetPort": target_port, "protocol": "TCP"}],
        },
    }
    spec: dict[str, Any] = {
        "group": group,
        "version": version,
        "groupPriorityMinimum": group_priority_minimum,
        "versionPriority": version_priority,
        "service": {"name": name, "namespace": namespace, "port": port},
    }
    if ca_bundle is not None:
        spec["caBundle"] = base64.b64encode(ca_bundle).decode()
    apiservice = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": f"{version}.{group}"},
        "spec": spec,
    }
    subject = [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}]
    delegator = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{name}:system:auth-delegator"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "system:auth-delegator",
        },
        "subjects": subject,
    }
    reader = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": f"{name}-auth-reader", "namespace": "kube-system"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "extension-apiserver-authentication-reader",
        },
        "subjects": subject,
    }
    objects = [service, apiservice, delegator, reader]
    if cert_secret is not None:
        objects += _rotator_rbac(name, namespace, subject, cert_secret, f"{version}.{group}")
    return objects


def _rotator_rbac(
    name: str, namespace: str, subject: list[dict[str, str]], secret: str, apiservice: str
) -> list[dict[str, Any]]:
    """What the certificate rotator does: keep its Secret (create can name no object), and set
    the APIService's caBundle."""
    rbac = "rbac.authorization.k8s.io/v1"
    role_name, cluster_role_name = f"{name}-cert", f"{name}:ca-injection"
    role = {
        "apiVersion": rbac,
        "kind": "Role",
        "metadata": {"name": role_name, "namespace": namespace},
        "rules": [
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "verbs": ["get", "update"],
                "resourceNames": [secret],
            },
        ],
    }
    cluster_role = {
        "apiVersion": rbac,
        "kind": "ClusterRole",
        "metadata": {"name": cluster_role_name},
        "rules": [
            {
                "apiGroups": ["apiregistration.k8s.io"],
                "resources": ["apiservices"],
                "verbs": ["get", "patch"],
                "resourceNames": [apiservice],
            }
        ],
    }
    ref = {"apiGroup": "rbac.authorization.k8s.io"}
    binding = {
        "apiVersion": rbac,
        "kind": "RoleBinding",
        "metadata": {"name": role_name, "namespace": namespace},
        "roleRef": {**ref, "kind": "Role", "name": role_name},
        "subjects": subject,
    }
    cluster_binding = {
        "apiVersion": rbac,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": cluster_role_name},
        "roleRef": {**ref, "kind": "ClusterRole", "name": cluster_role_name},
        "subjects": subject,
    }
    return [role, binding, cluster_role, cluster_binding]
