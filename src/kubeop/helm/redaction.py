"""Keeping rendered Secret values out of what the operator publishes.

A release manifest holds every object the chart rendered, Secrets included: values from the
chart's defaults, generated ones (``randAlphaNum``) and ones read from the cluster with
``lookup`` under the operator's own rights. Whoever may read the custom resource must not learn
them from it, so:

- :func:`redact_secrets` is the manifest shown in ``status.deployedRelease.manifest``: the same
  documents, in order, with every value of a Secret's ``data`` and ``stringData`` replaced by
  :data:`REDACTED` (the keys stay, so the status still says which Secret holds what). Only the
  Secret's documents are rewritten; a document that cannot be parsed is withheld. No digest of
  the values is kept: a low-entropy value (a PIN) could be recovered from one.
- :func:`secret_values` and :func:`scrub`: the values of a manifest's Secrets (as written,
  base64-decoded, base64-encoded, JSON-escaped, and line by line), and a text with each of them
  replaced by :data:`REDACTED`. Messages from Helm, the API server or a chart (NOTES, a failed
  upgrade's error) go through it before they reach a condition, an event or a log. Values
  shorter than :data:`MIN_SCRUBBED` characters are left alone (scrubbing ``1`` or ``yes`` out
  of every message would make them unreadable and hide nothing).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from kubeop.helm.postrender import split_documents

__all__ = ["MIN_SCRUBBED", "REDACTED", "redact_secrets", "scrub", "secret_values"]

REDACTED = "<redacted>"
MIN_SCRUBBED = 4

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_SECRET_FIELDS = ("apiVersion", "kind", "metadata", "type", "immutable")
_WITHHELD = "# (a document that is not valid YAML: withheld)\n"


def redact_secrets(manifest: str) -> str:
    """``manifest`` with the values of every Secret replaced (see the module docstring)."""
    return _redact(manifest)


@functools.lru_cache(maxsize=256)
def _redact(manifest: str) -> str:
    out: list[str] = []
    for separator, doc in split_documents(manifest):
        out.append(separator)
        out.append(_redact_document(doc))
    return "".join(out)


def _redact_document(doc: str) -> str:
    if not _content_lines(doc):
        return doc
    try:
        obj = yaml.load(doc, Loader=_Loader)
    except yaml.YAMLError:
        return _WITHHELD
    if not isinstance(obj, dict):
        return doc  # nothing, or a scalar or list: no Secret
    if _is_secret(obj):
        return _dump(doc, _redacted_secret(obj))
    items = obj.get("items")
    if isinstance(items, list) and any(isinstance(i, dict) and _is_secret(i) for i in items):
        redacted = [_redacted_secret(i) if isinstance(i, dict) and _is_secret(i) else i for i in items]
        return _dump(doc, {**obj, "items": redacted})
    return doc


def _content_lines(doc: str) -> list[str]:
    return [ln for ln in doc.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def _is_secret(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") == "Secret"


def _redacted_secret(obj: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if key in ("data", "stringData"):
            out[key] = {str(k): REDACTED for k in value} if isinstance(value, dict) else REDACTED
        elif key in _SECRET_FIELDS:
            out[key] = value
        else:
            out[key] = REDACTED  # not a Secret field: nothing the server would keep, nothing to show
    return out


def _dump(doc: str, obj: Any) -> str:
    """``obj`` as YAML, after the document's leading ``# Source: ...`` line (other comments of a
    Secret's template may quote its values: they go)."""
    lead = []
    for line in doc.splitlines(keepends=True):
        if not line.strip():
            continue
        if not line.lstrip().startswith("#"):
            break
        if line.startswith("# Source: "):
            lead.append(line)
    body = yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True)
    return "".join(lead) + body


def secret_values(manifests: Iterable[str]) -> frozenset[str]:
    """Every form in which a value of a Secret of ``manifests`` could be quoted (see the module
    docstring); manifests that do not parse contribute nothing."""
    out: set[str] = set()
    for manifest in manifests:
        if manifest:
            out |= _values_of(manifest)
    return frozenset(out)


@functools.lru_cache(maxsize=256)
def _values_of(manifest: str) -> frozenset[str]:
    out: set[str] = set()
    for _, doc in split_documents(manifest):
        try:
            obj = yaml.load(doc, Loader=_Loader)
        except yaml.YAMLError:
            continue
        if not isinstance(obj, dict):
            continue
        items = obj.get("items")
        for item in items if isinstance(items, list) else [obj]:
            if isinstance(item, dict) and _is_secret(item):
                _collect(item, out)
    return frozenset(v for v in out if len(v) >= MIN_SCRUBBED)


def _collect(secret: Mapping[str, Any], out: set[str]) -> None:
    for field in ("data", "stringData"):
        values = secret.get(field)
        if not isinstance(values, dict):
            continue
        for raw in values.values():
            forms = _forms(raw, encoded=field == "data")
            for form in list(forms):
                forms.add(json.dumps(form)[1:-1])
                forms.update(line.strip() for line in form.splitlines())
            out |= forms


def _forms(raw: Any, *, encoded: bool) -> set[str]:
    """The value as written and decoded (``data``) or encoded (``stringData``) with base64."""
    if raw is None:
        return set()
    if isinstance(raw, bytes):  # !!binary: YAML decoded the base64 already
        return {base64.b64encode(raw).decode(), raw.decode(errors="replace")}
    text = raw if isinstance(raw, str) else json.dumps(raw, default=str)
    if not encoded:
        return {text, base64.b64encode(text.encode()).decode()}
    try:
        return {text, base64.b64decode("".join(text.split()), validate=True).decode(errors="replace")}
    except (binascii.Error, ValueError):
        return {text}


def scrub(text: str, values: frozenset[str]) -> str:
    """``text`` with each of ``values`` (from :func:`secret_values`) replaced by :data:`REDACTED`,
    and the values of any ``"data"``/``"stringData"`` object quoted in it as JSON (the API server
    quotes a whole live object, with values nobody rendered, when it refuses a patch: the keys
    go too)."""
    if not text:
        return text
    if values:
        text = _pattern(values).sub(REDACTED, text)
    if "data" in text or "Data" in text:
        text = _DATA_FIELD.sub(_redact_data_field, text)
    return text


# "data":{...} or "stringData":{...}, as JSON or as JSON quoted inside a Go string (\"): the
# whole body goes (a live Secret's data is base64, which holds no brace).
_DATA_FIELD = re.compile(r'(\\*"(?:data|stringData)\\*"\s*:\s*\{)[^{}]*(\})')


def _redact_data_field(match: re.Match[str]) -> str:
    return f"{match.group(1)}{REDACTED}{match.group(2)}"


@functools.lru_cache(maxsize=64)
def _pattern(values: frozenset[str]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)))
