"""Just enough of kustomize to read what ``kubeop init`` scaffolds: ``resources`` and ``images``.

``kubeop deploy`` applies ``config/default`` through :func:`build`, so the project needs no
kustomize binary. The scaffolded kustomizations use only these two fields (names and the
namespace are written into the files themselves); anything else is refused with a pointer to
``kubectl apply -k``, which runs the real kustomize.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from kubeop.scaffold.errors import ScaffoldError

__all__ = ["build", "image_name"]

_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_UNDERSTOOD = frozenset({"apiVersion", "kind", "resources", "images"})


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
            f"{kfile} uses {', '.join(unknown)}: kubeop deploy understands only resources and images; "
            f"apply it with kubectl apply -k {directory} instead"
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
    return objs
