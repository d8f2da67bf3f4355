"""The annotation names kopf's annotation storages use, exactly as kopf 1.45.2 forms them
(kopf/_cogs/configs/conventions.py), so that kopf and kubeop.kopf find each other's records.

A record key (a handler id, ``touch-dummy``, ``last-handled-configuration``) becomes
``<prefix>/<key>`` with ``/`` turned into ``.`` and ``<``/``>`` into ``_``. A key longer than 63
characters is cut and suffixed with a hash (``-`` and 6 characters of blake2b, base64 with ``-.``);
with ``v1=True`` (kopf's default) the older form, cut to 63 characters including the prefix, is
written too. A ReplicaSet owned by a Deployment gets ``-ofDRS`` on its keys (the Deployment's
annotations are copied onto it). Prefixes other than ``kopf.*`` are marked with
``<prefix>/kopf-managed: yes`` so that other kopf operators leave their annotations out of essences.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
import warnings
from collections.abc import Collection, Mapping, MutableMapping
from typing import Any

__all__ = [
    "StorageKeyFormingConvention",
    "StorageKeys",
    "marked_prefixes",
    "sharing_one_name",
    "store_marker",
    "unfit_for_annotations",
]

_MARKERS = frozenset({"kopf-managed"})
_KNOWN_PREFIXES = frozenset({"kopf.zalando.org"})
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")  # an annotation name's part after the /


class StorageKeys:
    """The annotation names of one prefix (``v1``: also kopf's first, shorter, form); the
    annotation storages are ones (kopf's ``StorageKeyFormingConvention``)."""

    def __init__(self, prefix: str, v1: bool = True) -> None:
        if not prefix:
            raise ValueError("Annotations storages must be prefixed.")
        if len(prefix) > 253 - 63 - 1:
            warnings.warn(
                "The annotations prefix is too long. It can cause errors when PATCHing.", stacklevel=3
            )
        self.prefix = prefix
        self.v1 = v1

    def make_keys(self, key: str, *, body: Mapping[str, Any] | None = None) -> list[str]:
        """The annotation names of record ``key`` on ``body``: the current form first."""
        key = key if body is None else mark_key(key, body)
        return list(_keys(self.prefix, self.v1, key))

    def make_v1_key(self, key: str, max_length: int = 63) -> str:
        safe = make_safe_key(key)
        prefix = f"{self.prefix}/"
        suffix = "" if len(safe) <= max_length - len(prefix) else make_suffix(safe)
        return f"{prefix}{safe[: max_length - len(prefix) - len(suffix)]}{suffix}"

    def make_v2_key(self, key: str, max_length: int = 63) -> str:
        suffix = make_suffix(key) if len(key) > max_length else ""
        limit = max(0, max_length - len(suffix))
        return f"{self.prefix}/{make_safe_key(key)[:limit]}{suffix}"


@functools.lru_cache(maxsize=4096)
def _keys(prefix: str, v1: bool, key: str) -> tuple[str, ...]:
    keys = StorageKeys.__new__(StorageKeys)
    keys.prefix, keys.v1 = prefix, v1
    v2 = keys.make_v2_key(key)
    return (v2, *(k for k in ([keys.make_v1_key(key)] if v1 else []) if k != v2))


def make_safe_key(key: str) -> str:
    return key.replace("/", ".").replace("<", "_").replace(">", "_")


def make_suffix(key: str) -> str:
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=4).digest()
    alnums = base64.b64encode(digest, altchars=b"-.").decode("ascii")
    return f"-{alnums}".rstrip("=-.")


def sharing_one_name(keys: Collection[str]) -> list[tuple[str, ...]]:
    """The groups of distinct record keys (handler ids) that get one annotation name, such as
    ``a/b`` and ``a.b`` (kopf turns ``/`` into ``.``): their handlers would share one record."""
    by_name: dict[str, list[str]] = {}
    for key in dict.fromkeys(keys):
        by_name.setdefault(_keys("", False, key)[0], []).append(key)
    return [tuple(group) for group in by_name.values() if len(group) > 1]


def unfit_for_annotations(keys: Collection[str]) -> list[str]:
    """The record keys (handler ids) whose annotation names the API server refuses (kopf's
    forms: an id ending in ``/`` or ``.``, starting with ``<`` or ``_``, with spaces...)."""
    return [
        key
        for key in dict.fromkeys(keys)
        if not all(_NAME.fullmatch(name.split("/", 1)[1]) for name in _keys("p", True, key))
    ]


def mark_key(key: str, body: Mapping[str, Any]) -> str:
    """``-ofDRS`` on the keys of a ReplicaSet owned by a Deployment (it gets the Deployment's annotations)."""
    if body.get("kind") != "ReplicaSet":
        return key
    owners = (body.get("metadata") or {}).get("ownerReferences") or ()
    if any(o.get("kind") == "Deployment" for o in owners):
        return f"{key}-ofDRS"
    return key


def marked_prefixes(keys: Collection[str]) -> frozenset[str]:
    """The annotation prefixes of kopf operators among ``keys`` (left out of essences)."""
    prefixes: set[str] = set()
    for prefix, name in (key.split("/", 1) for key in keys if "/" in key):
        if (
            name in _MARKERS
            or prefix in _KNOWN_PREFIXES
            or any(prefix.endswith(f".{p}") for p in _KNOWN_PREFIXES)
        ):
            prefixes.add(prefix)
    return frozenset(prefixes)


def store_marker(prefix: str, patch: MutableMapping[str, Any], body: Mapping[str, Any]) -> None:
    """``<prefix>/kopf-managed: yes`` for prefixes other than ``kopf.*``, once."""
    if prefix and not prefix.startswith("kopf."):
        marker = f"{prefix}/kopf-managed"
        present = ((body.get("metadata") or {}).get("annotations") or {}).get(marker)
        patched = (patch.get("metadata") or {}).get("annotations") or {}
        if present is None and marker not in patched:
            patch.setdefault("metadata", {}).setdefault("annotations", {})[marker] = "yes"


StorageKeyFormingConvention = StorageKeys  # kopf's name
