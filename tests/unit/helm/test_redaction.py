"""Secret values out of the status manifest and out of published messages."""

from __future__ import annotations

import base64

from kubeop.helm.manifest import parse_manifest
from kubeop.helm.redaction import REDACTED, redact_secrets, scrub, secret_values

PEM = (
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n"
    "-----END PRIVATE KEY-----\n"
)
MANIFEST = f"""\
---
# Source: app/templates/secret.yaml
# the password is hunter2-from-a-comment
apiVersion: v1
kind: Secret
metadata:
  name: creds
  labels: {{app: web}}
type: Opaque
data:
  password: {base64.b64encode(b"hunter2-pw").decode()}
  key.pem: {base64.b64encode(PEM.encode()).decode()}
stringData:
  token: "tok-123456"
  port: 5432
  tls.key: |
{"".join("    " + line + chr(10) for line in PEM.splitlines())}extra: not-a-secret-field
---
# Source: app/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2   # a comment stays
---
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Secret
    metadata: {{name: in-a-list}}
    stringData: {{inner: "listed-value"}}
  - apiVersion: v1
    kind: ConfigMap
    metadata: {{name: cm}}
    data: {{k: visible}}
"""


def test_secret_values_are_redacted_and_the_rest_kept() -> None:
    out = redact_secrets(MANIFEST)
    for value in ("hunter2", "tok-123456", "5432", "MIIEvQ", "listed-value", "not-a-secret-field"):
        assert value not in out
    assert base64.b64encode(b"hunter2-pw").decode() not in out
    secret, _, listed = parse_manifest(out)[:3]
    assert secret["metadata"] == {"name": "creds", "labels": {"app": "web"}} and secret["type"] == "Opaque"
    assert secret["data"] == {"password": REDACTED, "key.pem": REDACTED}
    assert secret["stringData"] == {"token": REDACTED, "port": REDACTED, "tls.key": REDACTED}
    assert secret["extra"] == REDACTED
    assert "# Source: app/templates/secret.yaml\n" in out  # where it came from stays
    assert listed["stringData"] == {"inner": REDACTED}
    assert parse_manifest(out)[3]["data"] == {"k": "visible"}  # a ConfigMap is not a Secret
    # Documents without a Secret are byte for byte as rendered.
    assert "kind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2   # a comment stays\n" in out
    assert [(o["kind"], o["metadata"]["name"]) for o in parse_manifest(out)] == [
        (o["kind"], o["metadata"]["name"]) for o in parse_manifest(MANIFEST)
    ]


def test_odd_documents() -> None:
    assert redact_secrets("") == ""
    assert redact_secrets("m") == "m"  # a scalar holds no Secret
    broken = "---\nkind: Secret\ndata: {a: [\n---\nkind: ConfigMap\n"
    out = redact_secrets(broken)
    assert "withheld" in out and "kind: ConfigMap" in out and "{a: [" not in out
    # A data field that is not a mapping goes whole; an escaped kind is still a Secret.
    out = redact_secrets('kind: "Secr\\x65t"\ndata: "c2VjcmV0LXN0cmluZw=="\n')
    assert "c2VjcmV0" not in out and REDACTED in out


def test_scrub_hides_every_form_of_a_value() -> None:
    values = secret_values([MANIFEST])
    text = (
        'Secret creds is invalid: data[password]: Invalid value: "hunter2-pw"; '
        f"raw {base64.b64encode(b'hunter2-pw').decode()}; token tok-123456 "
        f"and b64 {base64.b64encode(b'tok-123456').decode()}; json {PEM!r}; "
        "a line MIIEvQIBADANBgkqhkiG9w0BAQEFAASC; listed-value; port 5432 spared? no"
    )
    out = scrub(text, values)
    for leaked in ("hunter2-pw", "tok-123456", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "listed-value", "5432"):
        assert leaked not in out, leaked
    assert base64.b64encode(b"tok-123456").decode() not in out
    assert "Secret creds is invalid: data[password]: Invalid value:" in out  # the message stays readable
    # Short values are not scrubbed (they would blank out every message), nor is anything
    # when there is no Secret.
    short = "kind: Secret\nstringData: {a: 'no', b: '123'}\n"
    assert scrub("no 123", secret_values([short])) == "no 123"
    assert scrub("text", frozenset()) == "text"
    assert secret_values(["", "a: [", "kind: ConfigMap\ndata: {k: visible-value}\n"]) == frozenset()


def test_redaction_is_idempotent() -> None:
    # The status is rewritten only when it changes: redacting what is already redacted must
    # give the same text, or every reconcile would write.
    once = redact_secrets(MANIFEST)
    assert redact_secrets(once) == once


def test_scrub_hides_a_quoted_live_object_s_data() -> None:
    # Helm 3.22's error when the server refuses a patch of a Secret: the whole live object, with
    # values no manifest of the release holds (rotated by someone else), as JSON in a Go string.
    live = base64.b64encode(b"rotated-elsewhere").decode()
    message = (
        'UPGRADE FAILED: cannot patch "vault-creds" with kind Secret:  "" is invalid: patch: Invalid '
        'value: "{\\"apiVersion\\":\\"v1\\",\\"data\\":{\\"password\\":\\"'
        + live
        + '\\",\\"token\\":\\"'
        + live
        + '\\"},\\"kind\\":\\"Secret\\",\\"metadata\\":{\\"name\\":\\"vault-creds\\"}}": '
        "illegal base64 data at input byte 6"
    )
    out = scrub(message, frozenset())
    assert live not in out
    assert '\\"data\\":{<redacted>}' in out and '\\"name\\":\\"vault-creds\\"' in out
    assert out.endswith("illegal base64 data at input byte 6")
    plain = '{"kind":"Secret","data":{"k":"' + live + '"},"stringData": {"s": "x y"}}'
    assert scrub(plain, frozenset()) == '{"kind":"Secret","data":{<redacted>},"stringData": {<redacted>}}'
