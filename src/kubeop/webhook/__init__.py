"""kubeop.webhook: admission (validating, defaulting) and CRD conversion webhooks.

- :func:`validating` / :func:`defaulting` turn functions of ``(new, old, operation, user_info)``
  into :class:`AdmissionWebhook` s; :class:`Denied` with :class:`FieldError` s, :class:`Allowed`
  with warnings;
- :class:`Conversion`: hub-and-spoke conversion between the versions of one kind;
- :class:`Webhooks`: the set one server answers; :class:`WebhookServer` serves it over HTTPS;
- :func:`webhook_configurations` and :func:`with_conversion` (with an :class:`Endpoint`): the
  manifests that make the API server call them; :func:`local_certificates`: a CA and a
  serving certificate for 127.0.0.1;
- :class:`CertSecret` / :class:`CertRotator`: self-managed certificates for a cluster, kept in a
  Secret by the operator, which patches the CA into its configurations (no cert-manager).

The review handling is pure (bytes in, bytes out); only :mod:`kubeop.webhook.server` does I/O.
"""

from kubeop.webhook.admission import (
    AdmissionWebhook,
    Allowed,
    Denied,
    FieldError,
    Rule,
    defaulting,
    validating,
)
from kubeop.webhook.certs import LocalCertificates, issue_serving, local_certificates
from kubeop.webhook.conversion import Conversion, Spoke
from kubeop.webhook.manifest import Endpoint, webhook_configurations, with_conversion
from kubeop.webhook.registry import Webhooks
from kubeop.webhook.review import AdmissionRequest, BadReview, ConversionRequest, UserInfo
from kubeop.webhook.rotator import CertRotator, CertSecret
from kubeop.webhook.server import WebhookServer

__all__ = [
    "AdmissionRequest",
    "AdmissionWebhook",
    "Allowed",
    "BadReview",
    "CertRotator",
    "CertSecret",
    "Conversion",
    "ConversionRequest",
    "Denied",
    "Endpoint",
    "FieldError",
    "LocalCertificates",
    "Rule",
    "Spoke",
    "UserInfo",
    "WebhookServer",
    "Webhooks",
    "defaulting",
    "issue_serving",
    "local_certificates",
    "validating",
    "webhook_configurations",
    "with_conversion",
]
