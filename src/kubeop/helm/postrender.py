"""Owner references for a release's objects: a Helm post-renderer, also used in-process.

Every object Helm renders for a custom resource gets a controller owner reference to it, so the
objects are created already owned (no second write per object, no window in which the garbage
collector or the dependent watches would not know them) and the release manifest Helm stores says
who owns what. Only objects that may carry such a reference get one: namespaced kinds in the
release's namespace (a namespaced owner cannot own a cluster-scoped object or one in another
namespace; the garbage collector would delete or ignore it). Kinds the operator does not know to
be namespaced (not served yet) are left alone.

The reference is inserted as one line below ``metadata:``, so the rest of each document stays
byte-for-byte as Helm rendered it: no YAML round trip can change what a value means (PyYAML and
Go's YAML disagree on scalars like ``1e3``). A document whose ``metadata`` is not a plain block
(flow style, or already carrying ``ownerReferences``) is rewritten as JSON, which is exact.

This file is also an executable post-renderer (``helm --post-renderer python
--post-renderer-args postrender.py --post-renderer-args SPEC``); it imports only the standard
library and PyYAML so that it starts fast. The operator applies :func:`inject_owner_references`
to dry-run output itself, which yields exactly what the post-renderer gives Helm to store.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Collection, Mapping
from typing import Any

import yaml

__all__ = ["inject_owner_references", "kind_key", "main", "post_renderer_spec", "split_documents"]

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_METADATA = re.compile(r"^metadata:[ \t]*(#.*)?$")


def kind_key(api_version: str, kind: str) -> str:
    """``group/Kind`` (``/Service`` for the core group): how namespaced kinds are named here."""
    group = api_version.rpartition("/")[0] if "/" in api_version else ""
    return f"{group}/{kind}"


def post_renderer_spec(owner: Mapping[str, Any], namespace: str, namespaced_kinds: Collection[str]) -> str:
    """The single command-line argument the post-renderer takes (JSON)."""
    return json.dumps(
        {"owner": dict(owner), "namespace": namespace, "namespacedKinds": sorted(namespaced_kinds)},
        separators=(",", ":"),
    )


def inject_owner_references(
    manifest: str, owner: Mapping[str, Any], namespace: str, namespaced_kinds: Collection[str]
) -> str:
    """``manifest`` with a controller reference to ``owner`` on every object that can take one.

    ``owner`` is the owner reference itself (apiVersion, kind, name, uid; ``controller`` and
    ``blockOwnerDeletion`` are set to true). Deterministic: the same input gives the same output.
    """
    ref = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["name"],
        "uid": owner["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    kinds = namespaced_kinds if isinstance(namespaced_kinds, set | frozenset) else frozenset(namespaced_kinds)
    out: list[str] = []
    for separator, doc in split_documents(manifest):
        out.append(separator)
        out.append(_inject(doc, ref, namespace, kinds))
    return "".join(out)


def split_documents(manifest: str) -> list[tuple[str, str]]:
    """Split a YAML stream into (separator line, document text) pairs; the first separator may be ""."""
    parts: list[tuple[str, str]] = []
    separator = ""
    lines: list[str] = []
    for line in manifest.splitlines(keepends=True):
        if _is_separator(line.rstrip("\r\n")):
            parts.append((separator, "".join(lines)))
            separator, lines = line, []
        else:
            lines.append(line)
    parts.append((separator, "".join(lines)))
    if parts and parts[0] == ("", ""):
        parts.pop(0)
    return parts


def _is_separator(line: str) -> bool:
    """``---`` alone on its line, possibly followed by a comment."""
    if not line.startswith("---"):
        return False
    rest = line[3:]
    if not rest:
        return True
    if rest[0] not in " \t":
        return False
    rest = rest.strip()
    return not rest or rest.startswith("#")


def _inject(doc: str, ref: Mapping[str, Any], namespace: str, kinds: Collection[str]) -> str:
    if not doc.strip():
        return doc
    try:
        obj = yaml.load(doc, Loader=_Loader)
    except yaml.YAMLError:
        return doc  # Helm reports the error itself when it parses the stream
    if not isinstance(obj, dict):
        return doc
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return doc
    if kind_key(api_version, kind) not in kinds:
        return doc
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return doc
    if metadata.get("namespace") not in (None, "", namespace):
        return doc
    existing = metadata.get("ownerReferences")
    if existing:
        if not isinstance(existing, list):
            return doc
        for r in existing:
            if isinstance(r, dict) and r.get("controller"):
                return doc  # already controlled (by us or someone else): one controller only
        return _as_json(doc, obj, [*existing, dict(ref)])
    lines = doc.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if _METADATA.match(line.rstrip("\r\n")):
            indent = _child_indent(lines, i + 1)
            if indent is None:
                break
            newline = "\r\n" if line.endswith("\r\n") else "\n"
            entry = f"{' ' * indent}ownerReferences: {json.dumps([dict(ref)])}{newline}"
            return "".join([*lines[: i + 1], entry, *lines[i + 1 :]])
    return _as_json(doc, obj, [dict(ref)])


def _child_indent(lines: list[str], start: int) -> int | None:
    """The indentation of the first key under ``metadata:``, or None if it has no block children."""
    for line in lines[start:]:
        body = line.rstrip("\r\n")
        if not body.strip() or body.lstrip().startswith("#"):
            continue
        indent = len(body) - len(body.lstrip(" "))
        if indent == 0 or body[indent] == "\t":
            return None
        return indent
    return None


def _as_json(doc: str, obj: dict[str, Any], refs: list[Any]) -> str:
    """The document as JSON (a YAML subset), keeping its leading comments (``# Source: ...``)."""
    lead = []
    for line in doc.splitlines(keepends=True):
        if line.lstrip().startswith("#") or not line.strip():
            lead.append(line)
        else:
            break
    rewritten = dict(obj)
    rewritten["metadata"] = {**obj["metadata"], "ownerReferences": refs}
    return "".join(lead) + json.dumps(rewritten, indent=2, default=str) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Post-renderer entry point: the rendered manifest on stdin, the result on stdout."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: postrender.py SPEC-JSON  (the manifest on stdin)", file=sys.stderr)
        return 2
    spec = json.loads(args[0])
    manifest = sys.stdin.read()
    sys.stdout.write(
        inject_owner_references(
            manifest, spec["owner"], spec["namespace"], frozenset(spec["namespacedKinds"])
        )
    )
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
