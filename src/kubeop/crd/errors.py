"""Errors raised while declaring custom resources and generating their manifests.

Every error is raised at import or generation time, never by the API server later: the message
names the model (and field) at fault and says how to fix it.
"""

from __future__ import annotations

__all__ = ["CRDError", "DeclarationError", "SchemaError", "VersionError"]


class CRDError(Exception):
    """Base class of everything kubeop.crd raises on bad input."""


class DeclarationError(CRDError, ValueError):
    """A custom resource declaration is malformed: a name, scope, column or subresource."""


class SchemaError(CRDError, TypeError):
    """A model uses a construct that a structural CRD schema cannot express."""


class VersionError(CRDError, ValueError):
    """The versions given for one kind do not form a valid CRD (storage, duplicates, mismatches)."""
