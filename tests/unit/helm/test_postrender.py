"""Owner references injected into rendered manifests, in-process and as a Helm post-renderer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from kubeop.helm import postrender
from kubeop.helm.manifest import parse_manifest
from kubeop.helm.postrender import inject_owner_references, kind_key, post_renderer_spec

OWNER = {"apiVersion": "web.example.com/v1", "kind": "PhpDeployment", "name": "web", "uid": "u-1"}
REF = {**OWNER, "controller": True, "blockOwnerDeletion": True}
SCRIPT = Path(postrender.__file__)
KINDS = frozenset({"/Service", "/ConfigMap", "apps/Deployment"})

MANIFEST = """---
# Source: php/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: web
  labels:
    app: web
spec:
  ports:
    - port: 80
---
# Source: php/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
    # a comment first
    name: web
data:
  number: 1e3
  yes: on
  date: 2001-12-14
---
# Source: php/templates/role.yaml
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: web
rules: []
"""


def refs(doc: dict[str, object]) -> object:
    return doc["metadata"].get("ownerReferences")  # type: ignore[attr-defined]


def test_namespaced_objects_get_a_controller_reference() -> None:
    out = inject_owner_references(MANIFEST, OWNER, "ns", KINDS)
    service, cm, role = parse_manifest(out)
    assert refs(service) == [REF]
    assert refs(cm) == [REF]
    assert refs(role) is None  # cluster-scoped: a namespaced owner cannot own it


def test_everything_else_stays_byte_for_byte() -> None:
    out = inject_owner_references(MANIFEST, OWNER, "ns", KINDS)
    added = [line for line in out.splitlines() if "ownerReferences" in line]
    assert len(added) == 2
    assert added[1].startswith("    ownerReferences: ")  # the indentation of metadata's keys
    assert [line for line in out.splitlines() if "ownerReferences" not in line] == MANIFEST.splitlines()
    # Scalars Go and PyYAML read differently are untouched (no YAML round trip).
    assert "  number: 1e3\n  yes: on\n  date: 2001-12-14\n" in out


def test_kinds_not_known_to_be_namespaced_are_left_alone() -> None:
    assert inject_owner_references(MANIFEST, OWNER, "ns", frozenset()) == MANIFEST


def test_objects_in_another_namespace_are_left_alone() -> None:
    text = "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n  namespace: other\n"
    assert inject_owner_references(text, OWNER, "ns", KINDS) == text
    same = text.replace("other", "ns")
    assert refs(parse_manifest(inject_owner_references(same, OWNER, "ns", KINDS))[0]) == [REF]


def test_an_existing_controller_is_kept() -> None:
    text = (
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n  ownerReferences:\n"
        "  - {apiVersion: v1, kind: X, name: x, uid: x, controller: true}\n"
    )
    assert inject_owner_references(text, OWNER, "ns", KINDS) == text


def test_other_owner_references_are_extended_as_json() -> None:
    text = (
        "# Source: a.yaml\napiVersion: v1\nkind: Service\nmetadata:\n  name: a\n  ownerReferences:\n"
        "  - {apiVersion: v1, kind: X, name: x, uid: x}\n"
    )
    out = inject_owner_references(text, OWNER, "ns", KINDS)
    assert out.startswith("# Source: a.yaml\n{")
    assert json.loads(out.split("\n", 1)[1])["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "X", "name": "x", "uid": "x"},
        REF,
    ]


def test_flow_style_metadata_is_rewritten_as_json() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: '1'}\n"
    out = inject_owner_references(text, OWNER, "ns", KINDS)
    assert json.loads(out) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a", "ownerReferences": [REF]},
        "data": {"k": "1"},
    }


def test_odd_documents_pass_through() -> None:
    for text in ["", "---\n", "# only a comment\n", "- a list\n", "kind: Service\n", "a: [broken\n"]:
        assert inject_owner_references(text, OWNER, "ns", KINDS) == text


def test_separators_with_comments_and_crlf() -> None:
    text = "--- # first\r\napiVersion: v1\r\nkind: Service\r\nmetadata:\r\n  name: a\r\n"
    out = inject_owner_references(text, OWNER, "ns", KINDS)
    assert out.startswith(
        "--- # first\r\napiVersion: v1\r\nkind: Service\r\nmetadata:\r\n  ownerReferences: ["
    )
    assert out.endswith("]\r\n  name: a\r\n")


def test_deterministic() -> None:
    assert inject_owner_references(MANIFEST, OWNER, "ns", KINDS) == inject_owner_references(
        MANIFEST, OWNER, "ns", sorted(KINDS)
    )


def test_kind_key() -> None:
    assert kind_key("v1", "Service") == "/Service"
    assert kind_key("apps/v1", "Deployment") == "apps/Deployment"


def test_the_script_is_a_helm_post_renderer() -> None:
    """What Helm runs: stdin to stdout, with only the standard library and PyYAML imported."""
    spec = post_renderer_spec(OWNER, "ns", KINDS)
    done = subprocess.run(
        [sys.executable, "-P", str(SCRIPT), spec],
        input=MANIFEST,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == inject_owner_references(MANIFEST, OWNER, "ns", KINDS)
    probe = subprocess.run(
        [sys.executable, "-P", "-c", f"import runpy,sys; sys.argv=['x','{{}}']; "
         f"runpy.run_path({str(SCRIPT)!r}, run_name='not_main'); "
         "print(sorted(m for m in sys.modules if m.startswith('kubeop')))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert probe.stdout.strip() == "[]"


def test_the_script_reports_usage() -> None:
    done = subprocess.run([sys.executable, "-P", str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 2 and "usage" in done.stderr


def test_every_document_is_still_valid_yaml() -> None:
    out = inject_owner_references(MANIFEST, OWNER, "ns", KINDS)
    assert len([d for d in yaml.safe_load_all(out) if d]) == 3
