"""Pure logic of the control plane: flags, routing detection, names, kubeconfigs."""

from __future__ import annotations

from pathlib import Path

from kubeop.testing.controlplane import (
    FALLBACK_ADVERTISE_ADDRESS,
    apiserver_args,
    has_default_route,
    kubeconfig_dict,
    node_manifest,
)
from kubeop.testing.pytest_plugin import namespace_name

ROUTE_HEADER = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n"


def test_default_route_detected(tmp_path: Path) -> None:
    table = tmp_path / "route"
    table.write_text(ROUTE_HEADER + "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n")
    assert has_default_route(str(table))


def test_no_default_route(tmp_path: Path) -> None:
    table = tmp_path / "route"
    table.write_text(ROUTE_HEADER + "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n")
    assert not has_default_route(str(table))
    table.write_text(ROUTE_HEADER)
    assert not has_default_route(str(table))


def _args(default_route: bool, sa: bool = True) -> list[str]:
    return apiserver_args(
        etcd_url="http://127.0.0.1:1",
        port=2,
        pki=Path("/pki"),
        default_route=default_route,
        service_account_admission=sa,
    )


def test_apiserver_binds_loopback_with_rbac() -> None:
    args = _args(True)
    assert "--bind-address=127.0.0.1" in args
    assert "--authorization-mode=RBAC" in args
    assert "--endpoint-reconciler-type=none" in args
    assert not any(a.startswith("--advertise-address") for a in args)


def test_no_default_route_needs_explicit_non_loopback_advertise_address() -> None:
    args = _args(False)
    assert f"--advertise-address={FALLBACK_ADVERTISE_ADDRESS}" in args
    assert not FALLBACK_ADVERTISE_ADDRESS.startswith("127.")


def test_minimal_mode_disables_service_account_admission() -> None:
    assert "--disable-admission-plugins=ServiceAccount" in _args(True, sa=False)
    assert not any("disable-admission" in a for a in _args(True, sa=True))


def test_kubeconfig_shapes() -> None:
    cfg = kubeconfig_dict("https://127.0.0.1:1", Path("/ca"), Path("/c"), Path("/k"), "me")
    assert cfg["users"][0]["user"] == {"client-certificate": "/c", "client-key": "/k"}
    tok = kubeconfig_dict("https://127.0.0.1:1", Path("/ca"), None, None, "sa", token="abc")
    assert tok["users"][0]["user"] == {"token": "abc"}
    assert tok["current-context"] == "kubeop-local"


def test_node_manifest_is_adopted_by_kwok() -> None:
    node = node_manifest("n1")
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node["status"]["allocatable"]["pods"] == "110"
    assert "taints" not in node["spec"]


def test_namespace_names_are_valid_and_unique() -> None:
    import re

    names = {namespace_name("test_Something[param-1/ÄÖ]" * 5) for _ in range(20)}
    assert len(names) == 20
    for name in names:
        assert len(name) <= 63
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name), name
