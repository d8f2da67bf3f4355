"""kubeop.core: the Kubernetes resource model, with no I/O.

GVK/GVR and resource descriptors, object keys and references, metadata helpers over plain dicts,
label and field selectors, request building for every verb, patch types, typed API errors and
the typed-model protocol. Everything here is pure and synchronous; kubeop.client sends it.
"""

from kubeop.core import meta
from kubeop.core.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Expired,
    FieldCause,
    Forbidden,
    Gone,
    InternalError,
    Invalid,
    MethodNotAllowed,
    NotFound,
    ServerTimeout,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
    UnsupportedMediaType,
    error_from_response,
    error_from_status,
    is_resource_version_too_large,
)
from kubeop.core.gvk import GroupVersionKind, GroupVersionResource, join_api_version, split_api_version
from kubeop.core.keys import ObjectKey, ObjectRef, key_of, parse_key, ref_of
from kubeop.core.model import Model, from_dict, is_model_class, model_gvk, model_resource, to_dict
from kubeop.core.patch import PatchType
from kubeop.core.request import ApiRequest, RequestBuilder
from kubeop.core.resource import ApiResource
from kubeop.core.selectors import (
    FieldSelector,
    LabelSelector,
    Operator,
    Requirement,
    SelectorError,
    Selectors,
)

__all__ = [
    "AlreadyExists",
    "ApiError",
    "ApiRequest",
    "ApiResource",
    "BadRequest",
    "Conflict",
    "Expired",
    "FieldCause",
    "FieldSelector",
    "Forbidden",
    "Gone",
    "GroupVersionKind",
    "GroupVersionResource",
    "InternalError",
    "Invalid",
    "LabelSelector",
    "MethodNotAllowed",
    "Model",
    "NotFound",
    "ObjectKey",
    "ObjectRef",
    "Operator",
    "PatchType",
    "RequestBuilder",
    "Requirement",
    "SelectorError",
    "Selectors",
    "ServerTimeout",
    "ServiceUnavailable",
    "TooManyRequests",
    "Unauthorized",
    "UnsupportedMediaType",
    "error_from_response",
    "error_from_status",
    "from_dict",
    "is_model_class",
    "is_resource_version_too_large",
    "join_api_version",
    "key_of",
    "meta",
    "model_gvk",
    "model_resource",
    "parse_key",
    "ref_of",
    "split_api_version",
    "to_dict",
]
