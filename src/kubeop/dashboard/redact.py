"""What the dashboard shows of user-controlled text (errors, tracebacks, log lines, Events and
conditions): credentials taken out, and the text cut to a bounded length.

    redact("401 for Bearer eyJhbGciOi...; url https://u:p@host/") -> "401 for Bearer <redacted>; url https://<redacted>@host/"

Taken out: a bearer or basic credential, a value given to a key named like a credential
(``token=``, ``"password": "..."``, ``client_secret:``...), a JSON Web Token anywhere, a URL's
user and password, a PEM private key, and the ``data``/``stringData`` of a Secret printed as a
dict. A best effort on free text, on top of the rule that a reconciler does not put secrets in its
errors; what it cannot recognize it cannot take out.
"""

from __future__ import annotations

import re

__all__ = ["REDACTED", "clip", "redact", "shown"]

REDACTED = "<redacted>"

_KEYS = (
    r"token|access[_-]?token|refresh[_-]?token|id[_-]?token|password|passwd|secret|client[_-]?secret"
    r"|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|authorization|cookie|credentials?"
)
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"-----BEGIN[A-Z ]*PRIVATE KEY-----.*?(-----END[A-Z ]*PRIVATE KEY-----|\Z)", re.DOTALL),
        "<redacted private key>",
    ),
    (re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]+"), rf"\1\2{REDACTED}"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]*"), REDACTED),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]*@"), rf"\1{REDACTED}@"),
    (
        re.compile(rf"(?i)([\"']?\b(?:{_KEYS})[\"']?\s*[:=]\s*)([\"']?)[^\s\"',;&}}\])]+"),
        rf"\1\2{REDACTED}",
    ),
    (re.compile(r"(?i)([\"']?\b(?:data|stringData)[\"']?\s*[:=]\s*)\{[^{}]*\}"), rf"\1{{{REDACTED}}}"),
)


def redact(text: str) -> str:
    """``text`` with the credentials it holds replaced by ``<redacted>`` (see the module docstring)."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def clip(text: str, limit: int, *, keep_end: bool = False) -> str:
    """``text`` cut to ``limit`` characters, saying so (its end kept with ``keep_end``: a
    traceback's last frames)."""
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    if keep_end:
        return f"... ({cut} characters cut)\n" + text[-limit:]
    return text[:limit] + f" ... ({cut} characters cut)"


def shown(text: str, limit: int, *, keep_end: bool = False) -> str:
    """``text`` as the dashboard shows it: redacted, then clipped to ``limit`` (a huge text is cut
    to twice that first, so redacting it costs no more than a bounded one)."""
    if len(text) > 2 * limit:
        text = text[-2 * limit :] if keep_end else text[: 2 * limit]
    return clip(redact(text), limit, keep_end=keep_end)
