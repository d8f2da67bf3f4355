"""Just enough of kustomize to read what ``kubeop init`` scaffolds: ``resources``, ``images`` and
``namespace``.

``kubeop deploy`` applies ``config/default`` through :func:`build`, so the project needs no
kustomize binary. The scaffolded kustomizations use only these fields (names are written into
the files themselves); anything else is refused with a pointer to ``kubectl apply -k``, which
runs the real kustomize. ``namespace`` does what kustomize's does to the objects kubeop writes:
namespaced objects move there, a Namespace object is renamed to it, and so are the references to
the namespace of a moved object (ServiceAccount subjects of bindings, the webhook Service of
webhook configurations and CRD conversions).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from kubeop.scaffold.errors import ScaffoldError

__all__ = ["build", "image_name"]

_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_UNDERSTOOD = frozenset({"apiVersion", "kind", "resources", "images", "namespace"})
# The cluster-scoped kinds an operator's config may hold; everything else is namespaced.
CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "APIService",
        "PriorityClass",
        "StorageClass",
        "PersistentVolume",
        "IngressClass",
        "RuntimeClass",
        "CSIDriver",
        "ClusterIssuer",
    }
)


def image_name(image: str) -> str:
    """An image reference without its tag or digest: ``reg:5000/op:v1`` -> ``reg:5000/op``."""
    ref = image.split("@", 1)[0]
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    return ref[:colon] if colon > slash else ref


def _new_image(entry: Mapping[str, Any], old: str, overrides: Mapping[str, str]) -> str:
    name = str(entry["name"])
    if name in overrides:
        return overrides[name]
    new = str(entry.get("newName") or image_name(old))
    if entry.get("digest"):
        return f"{new}@{entry['digest']}"
    tag = entry.get("newTag")
    if tag is None and ":" in old[len(image_name(old)) :]:
        tag = old[len(image_name(old)) + 1 :]
    return f"{new}:{tag}" if tag else new


def _set_images(
    objs: list[dict[str, Any]], entries: list[Mapping[str, Any]], overrides: Mapping[str, str]
) -> None:
    by_name = {str(e["name"]): e for e in entries}
    for obj in objs:
        pod = ((obj.get("spec") or {}).get("template") or {}).get("spec") or obj.get("spec") or {}
        for key in ("initContainers", "containers"):
            for container in pod.get(key) or ():
                image = str(container.get("image") or "")
                entry = by_name.get(image_name(image))
                if entry is not None:
                    container["image"] = _new_image(entry, image, overrides)


def _set_namespace(objs: list[dict[str, Any]], namespace: str) -> None:
    """kustomize's ``namespace:`` on ``objs`` (see the module docstring)."""
    moved: dict[tuple[str, str], str] = {}  # (kind, name) -> its namespace before
    for obj in objs:
        md = obj.setdefault("metadata", {})
        kind = str(obj.get("kind"))
        if kind == "Namespace" and obj.get("apiVersion") == "v1":
            md["name"] = namespace
        elif kind not in CLUSTER_SCOPED:
            moved[(kind, str(md.get("name")))] = str(md.get("namespace") or "")
            md["namespace"] = namespace
    for obj in objs:
        kind = str(obj.get("kind"))
        if kind in ("RoleBinding", "ClusterRoleBinding"):
            for subject in obj.get("subjects") or ():
                key = (str(subject.get("kind")), str(subject.get("name")))
                if subject.get("name") == "default" or (
                    key in moved and subject.get("namespace", "") == moved[key]
                ):
                    subject["namespace"] = namespace
        configs: list[dict[str, Any]] = []
        if kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            configs = [w.get("clientConfig") or {} for w in obj.get("webhooks") or ()]
        elif kind == "CustomResourceDefinition":
            webhook = ((obj.get("spec") or {}).get("conversion") or {}).get("webhook") or {}
            configs = [webhook.get("clientConfig") or {}]
        for config in configs:
            service = config.get("service")
            if isinstance(service, dict) and "namespace" in service:
                service["namespace"] = namespace


def build(directory: Path, *, images: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The objects a kustomization directory stands for, in order.

    ``images`` overrides image entries by name for this build only (``{"controller": IMG}``:
    what ``kustomize edit set image controller=IMG`` would make of the files).
    """
    overrides = dict(images or {})
    kfile = next((directory / f for f in _FILES if (directory / f).is_file()), None)
    if kfile is None:
        raise ScaffoldError(f"{directory} has no kustomization.yaml; run kubeop init again or restore it")
    data = yaml.safe_load(kfile.read_text()) or {}
    unknown = sorted(set(data) - _UNDERSTOOD)
    if unknown:
        raise ScaffoldError(
            f"{kfile} uses {', '.join(unknown)}: kubeop deploy understands only resources, images and "
            f"namespace; apply it with kubectl apply -k {directory} instead"
        )
    objs: list[dict[str, Any]] = []
    for entry in data.get("resources") or ():
        path = (directory / str(entry)).resolve()
        if path.is_dir():
            objs.extend(build(path, images=overrides))
        elif path.is_file():
            docs = yaml.safe_load_all(path.read_text())
            objs.extend(d for d in docs if isinstance(d, dict) and d)
        else:
            raise ScaffoldError(f"{kfile} lists {entry}, which does not exist under {directory}")
    entries = [e for e in data.get("images") or () if isinstance(e, Mapping) and e.get("name")]
    entries += [{"name": n} for n in overrides if n not in {str(e["name"]) for e in entries}]
    _set_images(objs, entries, overrides)
    namespace = data.get("namespace")
    if namespace:
        _set_namespace(objs, str(namespace))
    return objs
