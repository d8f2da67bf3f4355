"""Names in request paths and objects, checked before anything else reads them.

Object names are DNS-1123 subdomains (at most 253 characters of ``a-z0-9-.``, each dot-separated
part starting and ending alphanumeric), namespaces DNS-1123 labels (63, no dots): that alone
rules out ``.``, ``..``, ``/``, ``%``, CR, LF and every other byte that could reach a key, a log
line or a header.
"""

from __future__ import annotations

import re

from kubeop.apiserver.status import StatusError

__all__ = ["check_generate_name", "check_name", "check_namespace"]

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*").fullmatch
_DNS_LABEL = re.compile(_LABEL).fullmatch


def check_name(name: str, *, field: str = "metadata.name", kind: str = "") -> str:
    """``name`` if it is a DNS-1123 subdomain, else 422 Invalid naming ``field``."""
    if len(name) <= 253 and _SUBDOMAIN(name):
        return name
    raise StatusError(
        422,
        f"{kind + ' ' if kind else ''}{field}: Invalid value {_shown(name)}: a lowercase RFC 1123 subdomain "
        "must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'example.com'), at most 253 characters",
        kind=kind,
        causes=[("FieldValueInvalid", "a lowercase RFC 1123 subdomain", field)],
    )


def check_generate_name(prefix: str, *, kind: str = "") -> str:
    """``prefix`` if it may start a name (a DNS-1123 subdomain but for a trailing ``-``), else 422
    Invalid naming ``metadata.generateName``, as kube-apiserver checks it before adding a suffix."""
    masked = prefix[:-1] + "a" if len(prefix) > 1 and prefix.endswith("-") else prefix
    if len(masked) <= 253 and _SUBDOMAIN(masked):
        return prefix
    raise StatusError(
        422,
        f"{kind + ' ' if kind else ''}metadata.generateName: Invalid value {_shown(prefix)}: a prefix of a "
        "lowercase RFC 1123 subdomain: lower case alphanumeric characters, '-' or '.', starting with an "
        "alphanumeric character (e.g. 'web-')",
        kind=kind,
        causes=[("FieldValueInvalid", "a lowercase RFC 1123 subdomain prefix", "metadata.generateName")],
    )


def check_namespace(namespace: str, *, field: str = "metadata.namespace") -> str:
    """``namespace`` if it is a DNS-1123 label, else 422 Invalid naming ``field``."""
    if len(namespace) <= 63 and _DNS_LABEL(namespace):
        return namespace
    raise StatusError(
        422,
        f"{field}: Invalid value {_shown(namespace)}: a lowercase RFC 1123 label must consist of lower case "
        "alphanumeric characters or '-', start and end with an alphanumeric character, at most 63 characters",
        causes=[("FieldValueInvalid", "a lowercase RFC 1123 label", field)],
    )


def _shown(value: str) -> str:
    """The value for a message: escaped (no CR/LF reaches a log line) and cut short."""
    text = repr(value[:80])
    return text + ("..." if len(value) > 80 else "")
