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

from kubeop.core.yaml_input import load_yaml_all
from kubeop.scaffold.errors import ScaffoldError, yaml_problem
from kubeop.scaffold.names import check_namespace

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


_TARGET_KEYS = ("kind", "name", "namespace")


def _yaml_error(path: Path | str, e: yaml.YAMLError) -> ScaffoldError:
    return ScaffoldError(f"{path} is not valid YAML ({yaml_problem(e)}); fix it")


def _load_all(path: Path) -> list[Any]:
    try:
        return load_yaml_all(path.read_text())
    except yaml.YAMLError as e:
        raise _yaml_error(path, e) from None


def _patch(objs: list[dict[str, Any]], entry: Any, kfile: Path) -> list[dict[str, Any]]:
    if not isinstance(entry, Mapping):
        raise ScaffoldError(
            f"{kfile}: a patches entry must be a mapping (- path: <file>), not {entry!r}; fix that entry"
        )
    if "path" in entry:
        docs = _load_all(kfile.parent / str(entry["path"]))
    elif "patch" in entry:
        try:
            docs = load_yaml_all(str(entry["patch"]))
        except yaml.YAMLError as e:
            raise _yaml_error(f"{kfile}: the inline patch", e) from None
    else:
        raise ScaffoldError(f"{kfile}: a patches entry needs a path or a patch: {dict(entry)!r}")
    patch = docs[0] if len(docs) == 1 else None
    raw_target = entry.get("target") or {}
    if not isinstance(raw_target, Mapping):
        raise ScaffoldError(
            f"{kfile}: a patches entry's target must be a mapping (target: {{kind: .., name: ..}}), "
            f"not {raw_target!r}"
        )
    other = sorted(str(k) for k in raw_target if k not in _TARGET_KEYS)
    if other:
        # ignored, the patch would go to every object the other keys do not rule out
        raise ScaffoldError(
            f"{kfile}: kubeop deploy selects a patch's target by {', '.join(_TARGET_KEYS)} only, not "
            f"target.{', target.'.join(other)}; apply it with kubectl apply -k {kfile.parent} instead"
        )
    if not isinstance(patch, dict):
        raise ScaffoldError(
            f"{kfile}: kubeop deploy applies strategic-merge patches only ({entry.get('path', 'inline')} is "
            f"a JSON patch?); apply it with kubectl apply -k {kfile.parent} instead"
        )
    target = dict(raw_target)
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
    return _build(directory, dict(images or {}), ())


def _build(directory: Path, overrides: dict[str, str], seen: tuple[Path, ...]) -> list[dict[str, Any]]:
    kfile = next((directory / f for f in _FILES if (directory / f).is_file()), None)
    if kfile is None:
        raise ScaffoldError(f"{directory} has no kustomization.yaml; run kubeop init again or restore it")
    here = directory.resolve()
    if here in seen:
        chain = " -> ".join(map(str, seen))
        raise ScaffoldError(f"{kfile} includes itself (through {chain}); fix its resources")
    docs = _load_all(kfile)
    data = (docs[0] if docs else None) or {}
    if len(docs) > 1 or not isinstance(data, dict):
        raise ScaffoldError(f"{kfile} is not a kustomization (one mapping of resources, images, ...); fix it")
    unknown = sorted(map(str, set(data) - _UNDERSTOOD))
    if unknown:
        raise ScaffoldError(
            f"{kfile} uses {', '.join(unknown)}: kubeop deploy understands only resources, images, "
            f"namespace and patches; apply it with kubectl apply -k {directory} instead"
        )
    for field in ("resources", "images", "patches"):
        if not isinstance(data.get(field) or [], list):
            raise ScaffoldError(f"{kfile}: {field} must be a list (- <entry>), not {data[field]!r}; fix it")
    objs: list[dict[str, Any]] = []
    for entry in data.get("resources") or ():
        path = (directory / str(entry)).resolve()
        if path.is_dir():
            objs.extend(_build(path, overrides, (*seen, here)))
        elif path.is_file():
            objs.extend(d for d in _load_all(path) if isinstance(d, dict) and d)
        else:
            raise ScaffoldError(f"{kfile} lists {entry}, which does not exist under {directory}")
    entries = [e for e in data.get("images") or () if isinstance(e, Mapping) and e.get("name")]
    entries += [{"name": n} for n in overrides if n not in {str(e["name"]) for e in entries}]
    for patch in data.get("patches") or ():
        objs = _patch(objs, patch, kfile)
    _set_images(objs, entries, overrides)
    namespace = data.get("namespace")
    if namespace:
        _set_namespace(objs, check_namespace(str(namespace), source=f"{kfile}: namespace"))
    return objs
