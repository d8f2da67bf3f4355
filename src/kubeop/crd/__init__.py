"""kubeop.crd: CustomResourceDefinitions and RBAC from Python code.

- :class:`CustomResource` (a pydantic model declared with group, version and names) and
  :class:`CamelModel` for spec and status models with camelCase wire names;
- schema markers (:class:`ValidationRule`, :class:`ListType`, :class:`MapType`,
  :class:`PreserveUnknownFields`, :class:`Schemaless`, :class:`EmbeddedResource`,
  :class:`Format`, :class:`Schema`, :data:`IntOrString`, :data:`Quantity`);
- :func:`crd_manifest` / :func:`crd_manifests` (structural apiextensions.k8s.io/v1 CRDs,
  several versions per kind), :func:`custom_resources` (find the kinds a module declares),
  :func:`openapi_schema`, :func:`render_yaml`;
- the naming rules a CRD's names must follow (:func:`check_group`, :func:`check_kind`,
  :func:`check_version`) and :func:`guess_plural`, for tools that make CRDs from other sources
  (the Helm operator, the scaffolder);
- :mod:`kubeop.crd.rbac`: RBAC rules declared next to controllers, and the roles built from them.

Everything is checked when the class is defined or the manifest generated: a model or name the
API server would reject raises a :class:`CRDError` naming it and the fix.
"""

from kubeop.crd import rbac
from kubeop.crd.declaration import Declaration, PrinterColumn, Scale
from kubeop.crd.errors import CRDError, DeclarationError, SchemaError, VersionError
from kubeop.crd.manifest import crd_manifest, crd_manifests, custom_resources, render_yaml
from kubeop.crd.markers import (
    EmbeddedResource,
    Format,
    IntOrString,
    ListType,
    MapType,
    PreserveUnknownFields,
    Quantity,
    Schema,
    Schemaless,
    ValidationRule,
)
from kubeop.crd.names import check_group, check_kind, check_version, guess_plural
from kubeop.crd.rbac import Permissions, PolicyRule, rbac_rule
from kubeop.crd.resource import CamelModel, CustomResource, ObjectMeta
from kubeop.crd.schema import openapi_schema, resource_schema
from kubeop.crd.structural import check_structural, structural_violations

__all__ = [
    "CRDError",
    "CamelModel",
    "CustomResource",
    "Declaration",
    "DeclarationError",
    "EmbeddedResource",
    "Format",
    "IntOrString",
    "ListType",
    "MapType",
    "ObjectMeta",
    "Permissions",
    "PolicyRule",
    "PreserveUnknownFields",
    "PrinterColumn",
    "Quantity",
    "Scale",
    "Schema",
    "SchemaError",
    "Schemaless",
    "ValidationRule",
    "VersionError",
    "check_group",
    "check_kind",
    "check_structural",
    "check_version",
    "crd_manifest",
    "crd_manifests",
    "custom_resources",
    "guess_plural",
    "openapi_schema",
    "rbac",
    "rbac_rule",
    "render_yaml",
    "resource_schema",
    "structural_violations",
]
