"""Just enough of kustomize to read what ``kubeop init`` scaffolds: ``resources``, ``images``,
``namespace`` and strategic-merge ``patches``.

``kubeop deploy`` applies ``config/default`` through :func:`build`, so the project needs no
kustomize binary. The scaffolded kustomizations use only these fields (names are written into
the files themselves); anything else is refused with a pointer to ``kubectl apply -k``, which
runs the real kustomize. ``namespace`` does what kustomize's does to the objects kubeop writes:
namespaced objects move there, a Namespace object is renamed to it, and so are the references to
the namespace of a moved object (ServiceAccount subjects of bindings, the webhook Service of
webhook configurations and CRD conversions). ``patches`` entries (a ``path`` or an inline
``patch``, with an optional ``target`` of kind/name/namespace) are strategic merges: maps merge,
the lists of a pod template merge by their key (containers, volumes and env by name, ports by
containerPort, volume mounts by mountPath; the patch's items first, as kustomize orders them),
other lists are replaced, and a null deletes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from kubeop.scaffold.errors import ScaffoldError

__all__ = ["build", "image_name"]

_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_UNDERSTOOD = frozenset({"apiVersion", "kind", "resources", "images", "namespace", "patches"})
# the merge keys of the lists a strategic merge patch of a workload meets (Kubernetes' patchMergeKey)
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "hostAliases": "ip",
    "tolerations": "key",
}
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


def _merge(base: Any, patch: Any, field: str = "") -> Any:
    """``patch`` merged into ``base`` as a strategic merge patch (see the module docstring)."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            if value is None:
                out.pop(key, None)
            elif key in out:
                out[key] = _merge(out[key], value, key)
            else:
                out[key] = value
        return out
    key = _MERGE_KEYS.get(field)
    if key and isinstance(base, list) and isinstance(patch, list):
        # kustomize's order: the patch's items (merged with the old ones they name), then the rest
        old = {item.get(key): item for item in base if isinstance(item, dict)}
        named = [item.get(key) for item in patch if isinstance(item, dict)]
        merged = [_merge(old[item[key]], item) if item.get(key) in old else item for item in patch]
        return merged + [item for item in base if not (isinstance(item, dict) and item.get(key) in named)]
    return patch


def _patch(objs: list[dict[str, Any]], entry: Mapping[str, Any], kfile: Path) -> list[dict[str, Any]]:
    if "path" in entry:
        text = (kfile.parent / str(entry["path"])).read_text()
    elif "patch" in entry:
        text = str(entry["patch"])
    else:
        raise ScaffoldError(f"{kfile}: a patches entry needs a path or a patch: {dict(entry)!r}")
    patch = yaml.safe_load(text)
    if not isinstance(patch, dict):
        raise ScaffoldError(
            f"{kfile}: kubeop deploy applies strategic-merge patches only ({entry.get('path', 'inline')} is "
            f"a JSON patch?); apply it with kubectl apply -k {kfile.parent} instead"
        )
    target = dict(entry.get("target") or {})
    if not target:
        md = patch.get("metadata") or {}
        target = {"kind": patch.get("kind"), "name": md.get("name"), "namespace": md.get("namespace")}
    body = {k: v for k, v in patch.items() if k not in ("apiVersion", "kind")}
    body["metadata"] = {
        k: v for k, v in (patch.get("metadata") or {}).items() if k not in ("name", "namespace")
    } or None
    if body["metadata"] is None:
        del body["metadata"]
    out, hits = [], 0
    for obj in objs:
        md = obj.get("metadata") or {}
        actual = {"kind": obj.get("kind"), "name": md.get("name"), "namespace": md.get("namespace")}
        if all(actual.get(k) == v for k, v in target.items() if k in actual and v):
            obj = _merge(obj, body)
            hits += 1
        out.append(obj)
    if not hits:
        raise ScaffoldError(f"{kfile}: the patch {entry.get('path', 'inline')} matches no object ({target})")
    return out


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
    for patch in data.get("patches") or ():
        objs = _patch(objs, patch, kfile)
    _set_images(objs, entries, overrides)
    namespace = data.get("namespace")
    if namespace:
        _set_namespace(objs, str(namespace))
    return objs
