"""kubeop: a Python framework for writing Kubernetes operators.

``from kubeop import ...`` gives what an operator needs; everything else lives in the packages
named after what they hold (``kubeop.client``, ``kubeop.cache``, ``kubeop.crd``, ``kubeop.webhook``...).

- running: :class:`Manager` (with :func:`configure_logging`), :class:`Controller`;
- children kept from a declaration: :class:`Dependent`, :class:`Workflow` (``Controller.dependents``);
- reconciling: :class:`Request`, :class:`Context`, :class:`Result`, :class:`TerminalError`,
  :class:`GenerationChanged`;
- objects: :class:`Client`, :class:`ApiResource`, :class:`PatchType`, the API errors
  (:class:`ApiError`, :class:`NotFound`, :class:`Conflict`, :class:`AlreadyExists`);
- owners, finalizers and conditions: :func:`set_controller_reference`, :func:`set_owner_reference`,
  :func:`is_being_deleted` (``ctx.client.finalize`` runs the finalizer), :func:`set_condition`,
  :func:`find_condition`, :func:`is_true`;
- kinds of your own: :class:`CustomResource`, :class:`CamelModel`, :class:`ObjectMeta`, the markers
  :class:`PrinterColumn`, :class:`Format` and :class:`ListType`, :func:`crd_manifest`, :func:`rbac_rule`.

The names load on first use, so ``import kubeop`` stays cheap and an operator that declares no
kinds of its own never imports pydantic.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubeop.client import Client
    from kubeop.controller import (
        Context,
        Controller,
        Dependent,
        GenerationChanged,
        Request,
        Result,
        TerminalError,
        Workflow,
        find_condition,
        is_true,
        set_condition,
        set_controller_reference,
        set_owner_reference,
    )
    from kubeop.core.errors import AlreadyExists, ApiError, Conflict, NotFound
    from kubeop.core.meta import is_being_deleted
    from kubeop.core.patch import PatchType
    from kubeop.core.resource import ApiResource
    from kubeop.crd import (
        CamelModel,
        CustomResource,
        Format,
        ListType,
        ObjectMeta,
        PrinterColumn,
        crd_manifest,
    )
    from kubeop.crd.rbac import rbac_rule
    from kubeop.manager import Manager, configure_logging

__version__ = "0.1.0"

__all__ = [
    "AlreadyExists",
    "ApiError",
    "ApiResource",
    "CamelModel",
    "Client",
    "Conflict",
    "Context",
    "Controller",
    "CustomResource",
    "Dependent",
    "Format",
    "GenerationChanged",
    "ListType",
    "Manager",
    "NotFound",
    "ObjectMeta",
    "PatchType",
    "PrinterColumn",
    "Request",
    "Result",
    "TerminalError",
    "Workflow",
    "configure_logging",
    "crd_manifest",
    "find_condition",
    "is_being_deleted",
    "is_true",
    "rbac_rule",
    "set_condition",
    "set_controller_reference",
    "set_owner_reference",
]

# Where each name lives (the module is imported on the name's first use).
_HOME = {
    "AlreadyExists": "kubeop.core.errors",
    "ApiError": "kubeop.core.errors",
    "ApiResource": "kubeop.core.resource",
    "CamelModel": "kubeop.crd",
    "Client": "kubeop.client",
    "Conflict": "kubeop.core.errors",
    "Context": "kubeop.controller",
    "Controller": "kubeop.controller",
    "CustomResource": "kubeop.crd",
    "Dependent": "kubeop.controller",
    "Format": "kubeop.crd",
    "GenerationChanged": "kubeop.controller",
    "ListType": "kubeop.crd",
    "Manager": "kubeop.manager",
    "NotFound": "kubeop.core.errors",
    "ObjectMeta": "kubeop.crd",
    "PatchType": "kubeop.core.patch",
    "PrinterColumn": "kubeop.crd",
    "Request": "kubeop.controller",
    "Result": "kubeop.controller",
    "TerminalError": "kubeop.controller",
    "Workflow": "kubeop.controller",
    "configure_logging": "kubeop.manager",
    "crd_manifest": "kubeop.crd",
    "find_condition": "kubeop.controller",
    "is_being_deleted": "kubeop.core.meta",
    "is_true": "kubeop.controller",
    "rbac_rule": "kubeop.crd.rbac",
    "set_condition": "kubeop.controller",
    "set_controller_reference": "kubeop.controller",
    "set_owner_reference": "kubeop.controller",
}


if not TYPE_CHECKING:  # type checkers see the imports above, so a misspelt name is an error there

    def __getattr__(name: str) -> Any:
        home = _HOME.get(name)
        if home is None:
            raise AttributeError(f"module 'kubeop' has no attribute {name!r}")
        value = getattr(import_module(home), name)
        globals()[name] = value  # the next lookup is a plain attribute
        return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
