"""Naming rules for custom resources: kinds, groups, versions, plural and short names.

The API server checks these when the CRD is created; checking them when the model class is
defined moves the error to the line that declares it, with the fix in the message. The rules
follow apiextensions validation (DNS-1123 subdomain groups with at least one dot, DNS-1035
labels for plural, singular, short names and categories) plus the conventions kubebuilder
enforces on top (CamelCase kinds, Kubernetes-style version names such as ``v1beta2``).
"""

from __future__ import annotations

import re

from kubeop.crd.errors import DeclarationError

__all__ = [
    "check_category",
    "check_group",
    "check_kind",
    "check_plural",
    "check_short_name",
    "check_singular",
    "check_version",
    "class_name",
    "guess_plural",
    "version_priority",
]

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_CAMEL_CASE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_KUBE_VERSION = re.compile(r"^v([1-9][0-9]*)(?:(alpha|beta)([1-9][0-9]*))?$")
_PROTECTED_GROUPS = ("k8s.io", "kubernetes.io")


def check_kind(kind: str) -> str:
    """A kind is CamelCase: ``CronTab``, not ``cronTab``, ``Cron_Tab`` or ``crontab``."""
    if not _CAMEL_CASE.match(kind) or len(kind) > 63:
        suggestion = "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", kind) if part)
        hint = f" (for example {suggestion!r})" if suggestion and _CAMEL_CASE.match(suggestion) else ""
        raise DeclarationError(
            f"kind {kind!r} is not CamelCase: a kind starts with an upper-case letter and has only "
            f"letters and digits, at most 63 characters{hint}"
        )
    return kind


def check_group(group: str) -> str:
    """A group is a lower-case DNS subdomain with at least one dot, outside the protected domains."""
    if not group or len(group) > 253 or not _DNS1123_SUBDOMAIN.match(group):
        raise DeclarationError(
            f"group {group!r} is not a DNS subdomain: use lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit (for example 'stable.example.com')"
        )
    if "." not in group:
        raise DeclarationError(
            f"group {group!r} must be a domain with at least one dot: add your domain "
            f"(for example '{group}.example.com')"
        )
    if any(group == g or group.endswith("." + g) for g in _PROTECTED_GROUPS):
        raise DeclarationError(
            f"group {group!r} is in a domain reserved for Kubernetes itself (*.k8s.io, *.kubernetes.io) "
            "and needs an api-approved.kubernetes.io annotation; use a domain you own"
        )
    return group


def check_version(version: str) -> str:
    """A version looks like ``v1``, ``v2beta1`` or ``v1alpha3`` (what Kubernetes can order)."""
    if not _KUBE_VERSION.match(version):
        raise DeclarationError(
            f"version {version!r} is not a Kubernetes version name: use v<N>, v<N>alpha<M> or "
            "v<N>beta<M> with N, M >= 1 (for example 'v1', 'v1beta1', 'v2alpha1')"
        )
    return version


def _label(what: str, value: str, example: str) -> str:
    if not _DNS1035_LABEL.match(value) or len(value) > 63:
        raise DeclarationError(
            f"{what} {value!r} is not a lower-case DNS label: use lower-case letters, digits and '-', "
            f"starting with a letter, at most 63 characters (for example {example!r})"
        )
    return value


def check_plural(plural: str) -> str:
    return _label("plural", plural, "crontabs")


def check_singular(singular: str) -> str:
    return _label("singular", singular, "crontab")


def check_short_name(short_name: str) -> str:
    return _label("short name", short_name, "ct")


def check_category(category: str) -> str:
    return _label("category", category, "all")


def guess_plural(kind: str) -> str:
    """The lower-case English plural of a kind: ``CronTab`` -> ``crontabs``, ``Policy`` -> ``policies``.

    Only regular plurals are guessed (``-s``, ``-es`` after s/x/z/ch/sh, consonant + ``y`` ->
    ``-ies``); declare ``plural=`` explicitly when English disagrees.
    """
    singular = kind.lower()
    if singular.endswith(("s", "x", "z", "ch", "sh")):
        return singular + "es"
    if singular.endswith("y") and len(singular) > 1 and singular[-2] not in "aeiou":
        return singular[:-1] + "ies"
    return singular + "s"


def version_priority(version: str) -> tuple[int, int, int]:
    """A sort key that orders versions like Kubernetes does: GA > beta > alpha, then by number.

    ``sorted(versions, key=version_priority, reverse=True)`` puts the preferred version first
    (``v2``, ``v1``, ``v1beta2``, ``v1beta1``, ``v1alpha1``). Names that do not follow the
    pattern sort last.
    """
    m = _KUBE_VERSION.match(version)
    if not m:
        return (-1, 0, 0)
    major, stage, minor = int(m.group(1)), m.group(2), m.group(3)
    level = {"alpha": 0, "beta": 1, None: 2}[stage]
    return (level, major, int(minor) if minor else 0)


def class_name(cls: type) -> str:
    """A class's name for messages: its qualified name without ``<locals>`` noise."""
    return cls.__qualname__.rsplit("<locals>.", 1)[-1]
