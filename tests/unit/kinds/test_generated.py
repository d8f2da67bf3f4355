"""The committed kubeop.kinds modules are what the generator makes of the pinned Kubernetes
version's OpenAPI v3 documents, so they cannot drift from the spec by hand edits."""

from __future__ import annotations

from kubeop.kinds import _generate


def test_committed_modules_match_the_generator() -> None:
    spec = _generate.default_spec_dir()
    assert spec.is_dir(), (
        f"the pinned Kubernetes module's OpenAPI v3 documents are missing at {spec}: "
        "the control-plane build downloads them (make binaries), or `go mod download k8s.io/kubernetes@"
        f"{_generate.KUBERNETES_VERSION}`"
    )
    files = _generate.generate(spec)
    stale = sorted(n for n, text in files.items() if (_generate.PACKAGE / n).read_text() != text)
    assert not stale, f"regenerate with `python -m kubeop.kinds._generate`: {stale} differ"


def test_snake_case_names() -> None:
    assert _generate.snake("podIPs") == "pod_ips"
    assert _generate.snake("hostIPC") == "host_ipc"
    assert _generate.snake("apiVersion") == "api_version"
    assert _generate.snake("terminationGracePeriodSeconds") == "termination_grace_period_seconds"
    assert _generate.snake("from") == "from_"
    assert _generate.snake("setHostnameAsFQDN") == "set_hostname_as_fqdn"
