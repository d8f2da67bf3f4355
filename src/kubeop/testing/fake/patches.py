"""The patch formats a fake cluster applies: JSON merge, JSON patch and strategic merge, from
kubeop's one patch engine (:mod:`kubeop.core.patching`, which the aggregated API server uses
too); this module adds what the fake knows of the built-in kinds.

Strategic merge knows the list keys of the built-in fields operators write (containers, ports,
env, volumes, volume mounts, conditions, ...) and the ``$patch: delete|replace`` directive; a
list it has no key for is replaced whole, as for a merge patch. ``$setElementOrder`` and
``$deleteFromPrimitiveList`` are not implemented and raise a clear error.
"""

from __future__ import annotations

from typing import Any

from kubeop.core.patching import ListRule, PatchError, json_patch, merge_patch
from kubeop.core.patching import strategic_merge_patch as _strategic

__all__ = ["PatchError", "json_patch", "merge_patch", "strategic_merge_patch"]

# List fields of built-in kinds that strategic merge merges by a key instead of replacing.
_MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "env": "name",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "tolerations": "key",
    "topologySpreadConstraints": "topologyKey",
    "conditions": "type",
    "ownerReferences": "uid",
    "volumeClaimTemplates": "name",
    "webhooks": "name",
}
# Lists of scalars that strategic merge treats as sets (merged, not replaced).
_SET_LISTS = frozenset({"finalizers"})


def _rule(path: tuple[str, ...]) -> ListRule | None:
    name = path[-1]
    if name in _SET_LISTS:
        return ListRule()
    if path == ("spec", "ports"):  # a Service's ports merge by port; a container's by containerPort
        return ListRule("port")
    key = _MERGE_KEYS.get(name)
    return ListRule(key) if key else None


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge for built-in kinds (see the module docstring for what it knows)."""
    return _strategic(target, patch, _rule)
