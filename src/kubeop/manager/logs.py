"""Log lines an operator author can read: every line a reconcile logs names the reconcile.

:func:`configure_logging` sets up the root logger the way ``kubeop run`` and a scaffolded
project's main do: lines on stderr, quiet at INFO (one line per change an operator makes, one
per failing streak, nothing per reconcile), and every line logged while a reconcile runs, by
kubeop or by the reconciler (``ctx.log`` or any logger), carries its controller, kind, object
and reconcile id. Two formats:

``text`` (the default; one line, wrapped here)::

    2026-11-24T05:00:01.234Z INFO kubeop.controller: created Deployment default/web
        controller=memcached kind=Memcached object=default/web reconcileID=5c1e09a2f3

``json``, one object per line with the same fields (``ts``, ``level``, ``logger``, ``msg``,
``controller``, ``kind``, ``namespace``, ``name``, ``reconcileID``, ``error``, ``traceback``,
and any scalar ``extra=`` fields)::

    {"ts": "2026-11-24T05:00:01.234Z", "level": "info", "logger": "kubeop.controller",
     "msg": "created Deployment default/web", "controller": "memcached", ...}

Choose with ``configure_logging(format="json")``, ``--log-format json`` or ``KUBEOP_LOG_FORMAT=json``;
the level with ``level=``, ``--log-level`` or ``KUBEOP_LOG_LEVEL``. Neither format writes whole
objects: only the message, the reconcile's fields and scalar extras (strings, numbers, booleans).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import sys
import time
from typing import IO, Any

from kubeop.controller.context import current_reconcile

__all__ = ["LOG_FORMATS", "JsonFormatter", "TextFormatter", "configure_logging"]

LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")

# What every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}
_RECONCILE = frozenset(
    {"cluster", "controller", "kind", "object_namespace", "object_name", "reconcile_id", "error"}
)
_SCALARS = (str, int, float, bool, type(None))
# Line breaks and other control characters in a text line, escaped so a value (a message, an
# object's name) cannot end the line and forge the next one; tabs stay.
_BREAKS = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, 0x85) if c != 0x09}
_BREAKS |= {0x0A: "\\n", 0x0D: "\\r", 0x2028: "\\u2028", 0x2029: "\\u2029"}
# extra= fields whose name says credential (compared lower-case, without - and _), and values
# that are an Authorization header's: never written.
_CREDENTIAL_KEYS = (
    "authorization",
    "password",
    "passwd",
    "token",
    "apikey",
    "secretkey",
    "privatekey",
    "cookie",
)
_CREDENTIAL_VALUE = re.compile(r"^\s*(bearer|basic)\s+\S", re.IGNORECASE)
REDACTED = "<redacted>"


def _str(value: object) -> str:
    try:
        return str(value)
    except Exception:
        return f"<unprintable {type(value).__name__}>"


def _one_line(value: object) -> str:
    return _str(value).translate(_BREAKS)


def _extra(key: str, value: Any) -> Any:
    """A scalar ``extra`` as JSON writes it: credentials redacted, NaN and infinities as text."""
    if any(word in key.lower().replace("_", "").replace("-", "") for word in _CREDENTIAL_KEYS):
        return REDACTED
    if isinstance(value, str) and _CREDENTIAL_VALUE.match(value):
        return REDACTED
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _timestamp(record: logging.LogRecord) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"


def reconcile_fields(record: logging.LogRecord) -> tuple[Any, Any, Any, Any, Any]:
    """(controller, kind, namespace, name, reconcile id) of a record: its own ``extra`` fields
    (``ctx.log``, kubeop's lines), else the reconcile running where it was logged, else what
    it has (a controller's own lines name only the controller)."""
    d = record.__dict__
    rid = d.get("reconcile_id")
    if rid is None:
        ctx = current_reconcile()
        if ctx is not None:
            req = ctx.request
            return ctx.controller, ctx.kind, req.namespace, req.name, ctx.reconcile_id
    return d.get("controller"), d.get("kind"), d.get("object_namespace"), d.get("object_name"), rid


def cluster_field(record: logging.LogRecord) -> Any:
    """The cluster a record is about, in a fleet: its own ``extra`` field, else the running
    reconcile's request's (None for a Manager's one cluster)."""
    cluster = record.__dict__.get("cluster")
    if cluster is None:
        ctx = current_reconcile()
        if ctx is not None:
            cluster = ctx.request.cluster or None
    return cluster


class TextFormatter(logging.Formatter):
    """``<UTC time> <LEVEL> <logger>: <message> [cluster=..] controller=.. kind=.. object=ns/name
    reconcileID=..``,
    then the traceback, if any, on the following lines."""

    def format(self, record: logging.LogRecord) -> str:
        controller, kind, namespace, name, rid = reconcile_fields(record)
        line = f"{_timestamp(record)} {record.levelname} {record.name}: {record.getMessage()}"
        cluster = cluster_field(record)
        if cluster:
            line += f" cluster={_str(cluster)}"
        if controller:
            line += f" controller={_str(controller)}"
        if kind:
            line += f" kind={_str(kind)}"
        if name:
            line += f" object={_str(namespace)}/{_str(name)}" if namespace else f" object={_str(name)}"
        if rid:
            line += f" reconcileID={_str(rid)}"
        line = line.translate(_BREAKS)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line += "\n" + record.exc_text
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``msg``, the reconcile's
    ``controller``, ``kind``, ``namespace``, ``name``, ``reconcileID``, an ``error`` and its
    ``traceback``, and the record's scalar ``extra`` fields (others are left out, so no
    object is ever dumped into a log line; credentials - a field named like a token, password or
    Authorization header, or a value that is one - are ``<redacted>``)."""

    def format(self, record: logging.LogRecord) -> str:
        controller, kind, namespace, name, rid = reconcile_fields(record)
        out: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in (
            ("cluster", cluster_field(record)),
            ("controller", controller),
            ("kind", kind),
            ("namespace", namespace),
            ("name", name),
            ("reconcileID", rid),
        ):
            if value:
                out[key] = value
        error = record.__dict__.get("error")
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            text = str(exc)
            error = error or (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)
            if not record.exc_text:
                record.exc_text = self.formatException(record.exc_info)
        if error:
            out["error"] = str(error)
        if record.exc_text:
            out["traceback"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        for key, value in record.__dict__.items():
            if (
                key not in _STANDARD
                and key not in _RECONCILE
                and key not in out
                and isinstance(value, _SCALARS)
            ):
                out[key] = _extra(key, value)
        return json.dumps(out, ensure_ascii=False, default=_str)


def _choice(value: str | None, env: str, choices: tuple[str, ...], default: str, what: str) -> str:
    chosen = (value or os.environ.get(env) or default).lower()
    if chosen not in choices:
        raise ValueError(f"log {what} must be one of {', '.join(choices)} (or {env}), got {chosen!r}")
    return chosen


def configure_logging(
    format: str | None = None,
    level: str | int | None = None,
    *,
    stream: IO[str] | None = None,
) -> logging.Handler:
    """Send log lines to ``stream`` (stderr) in ``format`` (``text`` or ``json``) at ``level``.

    ``format`` falls back to ``KUBEOP_LOG_FORMAT``, then ``text``; ``level`` to
    ``KUBEOP_LOG_LEVEL``, then ``info``. Calling it again replaces the handler it installed
    (other handlers of the root logger are left alone). Returns the handler::

        from kubeop.manager import Manager, configure_logging

        configure_logging(format="json")   # or: KUBEOP_LOG_FORMAT=json python -m my_operator
        Manager(name="memcached-operator").run()

    Raises ValueError naming the choices for a format or level it does not know.
    """
    fmt = _choice(format, "KUBEOP_LOG_FORMAT", LOG_FORMATS, "text", "format")
    if isinstance(level, int):
        levelno = level
    else:
        levelno = logging.getLevelNamesMapping()[
            _choice(level, "KUBEOP_LOG_LEVEL", LOG_LEVELS, "info", "level").upper()
        ]
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.set_name("kubeop")
    root = logging.getLogger()
    for old in list(root.handlers):
        if old.get_name() == "kubeop":
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(levelno)
    return handler
