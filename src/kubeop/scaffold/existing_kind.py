"""Controllers for kinds the project does not define: Kubernetes' built-in kinds and other
operators' kinds (kubebuilder's ``create api --resource=false`` for core and external types).

::

    create api --group apps --version v1 --kind Deployment --no-resource
    create api --group cert-manager --version v1 --kind Certificate --no-resource \\
        --external-api-domain io

A built-in kind is one of :mod:`kubeop.kinds` (``--group core`` for the core group) and its
controller reads the typed model; another operator's kind (``<group>.<external domain>``) is
reached through an :class:`~kubeop.core.resource.ApiResource`, its objects plain dicts. Either way
only the controller is written (no model, CRD or sample) and registered in main.py, and PROJECT
records the kind with ``external: true``.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass

import kubeop.kinds
from kubeop.crd import DeclarationError, check_group, check_kind, check_version, guess_plural
from kubeop.crd.names import check_plural
from kubeop.scaffold.errors import ScaffoldError

__all__ = ["ExistingKind", "builtin_kind", "external_kind"]


@dataclass(frozen=True)
class ExistingKind:
    """A kind the project reconciles but does not define."""

    group: str
    """The API group as Kubernetes names it: ``apps``, ``""`` for core, ``cert-manager.io``."""
    version: str
    kind: str
    plural: str
    builtin: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def module(self) -> str:
        """The controller's module name: ``deployment``; ``certificate`` (``class_`` for Class)."""
        lower = self.kind.lower()
        return lower + "_" if keyword.iskeyword(lower) else lower

    @property
    def handle(self) -> str:
        """What the controller passes to the client: the typed model, or an ApiResource constant."""
        return self.kind if self.builtin else self.plural.upper().replace("-", "_")

    def template_values(self, namespaced: bool) -> dict[str, str]:
        if self.builtin:
            kind_import = f"from kubeop.kinds import {self.kind}"
            origin = "a kind Kubernetes itself serves"
        else:
            scope = "" if namespaced else ", namespaced=False"
            kind_import = (
                "from kubeop import ApiResource\n\n"
                f'{self.handle} = ApiResource("{self.group}", "{self.version}", "{self.plural}", '
                f'kind="{self.kind}"{scope})'
            )
            origin = "a kind another operator defines (its CRD must be installed)"
        return {
            "kind": self.kind,
            "api_version": self.api_version,
            "plural": self.plural,
            "rbac_group": self.group,
            "kind_import": kind_import,
            "handle": self.handle,
            "origin": origin,
            "controller_name": self.module.rstrip("_"),
        }


def builtin_kind(group: str, version: str, kind: str) -> ExistingKind | None:
    """The built-in kind ``group/version kind`` (``core`` or empty for the core group), or None when
    kubeop.kinds has no kind of that name; an error when it has one in another group or version."""
    if kind not in kubeop.kinds.__all__:
        return None
    model = getattr(kubeop.kinds, kind)
    resource = model.resource
    wanted = "" if group == "core" else group
    if (resource.group, resource.version) != (wanted, version):
        core = resource.group or "core"
        raise ScaffoldError(
            f"{kind} is a built-in kind of {model.api_version}, not {group}/{version}: pass --group {core} "
            f"--version {resource.version} (or create your own kind without --no-resource)"
        )
    return ExistingKind(resource.group, resource.version, kind, resource.plural, builtin=True)


def external_kind(group: str, version: str, kind: str, domain: str, plural: str = "") -> ExistingKind:
    """Another operator's kind: group ``<group>.<domain>`` (just ``<domain>`` when group is empty,
    the whole group when it already ends with the domain)."""
    full_group = (
        group
        if group == domain or group.endswith("." + domain)
        else ".".join(p for p in (group, domain) if p)
    )
    try:
        check_kind(kind)
        check_version(version)
        check_group(full_group)
        if plural:
            check_plural(plural)
    except DeclarationError as e:
        raise ScaffoldError(f"--external-api-domain {domain}: {e}") from None
    return ExistingKind(full_group, version, kind, plural or guess_plural(kind), builtin=False)
