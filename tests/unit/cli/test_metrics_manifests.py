"""What a scaffolded project deploys for its metrics: HTTPS on 8443 with authentication and
authorization through the API server (so the generated metrics-reader ClusterRole means
something), the role that lets the manager ask, the Service, and an optional ServiceMonitor."""

from __future__ import annotations

import runpy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeop.scaffold import Project, build_kustomization
from kubeop.scaffold.helm import helm_project_files

NAME = "guestbook-operator"
NS = f"{NAME}-system"
SA = {"kind": "ServiceAccount", "name": f"{NAME}-controller-manager", "namespace": NS}


def _objects(root: Path) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in build_kustomization(root / "config" / "default")}


def _container(objs: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    pod = objs[("Deployment", f"{NAME}-controller-manager")]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return container  # type: ignore[no-any-return]


@pytest.fixture
def helm_root(tmp_path: Path) -> Path:
    root = tmp_path / NAME
    files = helm_project_files(domain="example.com", repo=f"github.com/example/{NAME}", project_name=NAME)
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)
    return root


@pytest.fixture(params=["python", "helm"])
def root(request: pytest.FixtureRequest, project: Project, helm_root: Path) -> Path:
    return project.root if request.param == "python" else helm_root


def test_the_deployment_serves_metrics_over_https_on_8443_and_probes_apart(root: Path) -> None:
    container = _container(_objects(root))
    args = container["args"]
    assert "--metrics-bind-address=0.0.0.0:8443" in args and "--metrics-secure" in args
    assert not any(a.startswith("--metrics-bind-address=") and a.endswith(":8080") for a in args)
    assert "--health-probe-bind-address=0.0.0.0:8081" in args  # the kubelet probes the pod's IP
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == 8443 and ports["health"] == 8081
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] == "health"


def test_the_metrics_service_is_https_on_8443(root: Path) -> None:
    service = _objects(root)[("Service", f"{NAME}-metrics-service")]
    assert service["metadata"]["namespace"] == NS
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 8443, "protocol": "TCP", "targetPort": "metrics"}
    ]


def test_the_manager_may_review_tokens_and_scrapers_need_the_reader_role(root: Path) -> None:
    objs = _objects(root)
    auth = objs[("ClusterRole", f"{NAME}-metrics-auth-role")]
    assert auth["rules"] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    ]
    binding = objs[("ClusterRoleBinding", f"{NAME}-metrics-auth-rolebinding")]
    assert binding["roleRef"]["name"] == f"{NAME}-metrics-auth-role" and binding["subjects"] == [SA]
    reader = objs[("ClusterRole", f"{NAME}-metrics-reader")]
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    # nobody is given the reader role by default: Prometheus's ServiceAccount is the user's to bind
    assert not [
        o
        for (kind, _), o in objs.items()
        if kind.endswith("Binding") and o["roleRef"]["name"] == reader["metadata"]["name"]
    ]


def test_an_optional_service_monitor_scrapes_https_with_a_bearer_token(root: Path) -> None:
    assert (
        "../prometheus"
        not in yaml.safe_load((root / "config/default/kustomization.yaml").read_text())["resources"]
    )
    (monitor,) = yaml.safe_load_all((root / "config/prometheus/monitor.yaml").read_text())
    assert yaml.safe_load((root / "config/prometheus/kustomization.yaml").read_text()) == {
        "resources": ["monitor.yaml"]
    }
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https" and endpoint["port"] == "https" and endpoint["path"] == "/metrics"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    service = _objects(root)[("Service", f"{NAME}-metrics-service")]
    labels = service["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())
    assert monitor["metadata"]["namespace"] == NS


def test_optional_network_policies_let_in_only_the_served_ports(root: Path) -> None:
    default = yaml.safe_load((root / "config/default/kustomization.yaml").read_text())
    assert "../network-policy" not in default["resources"]  # opt-in, as ../prometheus
    folder = root / "config/network-policy"
    assert yaml.safe_load((folder / "kustomization.yaml").read_text()) == {
        "resources": ["allow-metrics-traffic.yaml"]  # this project serves no webhooks
    }
    (policy,) = yaml.safe_load_all((folder / "allow-metrics-traffic.yaml").read_text())
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": 8443, "protocol": "TCP"}]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"metrics": "enabled"}}}]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    pods = policy["spec"]["podSelector"]["matchLabels"]
    objs = _objects(root)
    template = objs[("Deployment", f"{NAME}-controller-manager")]["spec"]["template"]
    assert all(template["metadata"]["labels"].get(k) == v for k, v in pods.items())  # selects the manager
    assert {p["name"]: p["containerPort"] for p in _container(objs)["ports"]}["metrics"] == 8443


def test_a_project_with_webhooks_lets_the_api_server_reach_the_webhook_port() -> None:
    folder = Path(__file__).parents[3] / "examples/crontab/config/network-policy"
    assert yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"] == [
        "allow-metrics-traffic.yaml",
        "allow-webhook-traffic.yaml",
    ]
    (policy,) = yaml.safe_load_all((folder / "allow-webhook-traffic.yaml").read_text())
    (rule,) = policy["spec"]["ingress"]
    assert rule == {"ports": [{"port": 9443, "protocol": "TCP"}]}  # kube-apiserver, from the host network


@pytest.fixture
def main_py(project: Project, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    for var in ("METRICS_BIND_ADDRESS", "METRICS_SECURE", "METRICS_CERT_DIR", "HEALTH_PROBE_BIND_ADDRESS"):
        monkeypatch.delenv(var, raising=False)
    yield runpy.run_path(str(project.package_dir / "main.py"), run_name="scaffolded_main")


def test_the_deployments_arguments_make_a_manager_with_secure_metrics(
    project: Project, main_py: dict[str, Any]
) -> None:
    args = main_py["parse_args"](_container(_objects(project.root))["args"])
    manager = main_py["build_manager"](args)
    assert manager.metrics_secure is True
    assert manager._metrics_address == "0.0.0.0:8443" and manager._health_address == "0.0.0.0:8081"


def test_main_py_flags_and_environment(main_py: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    parse, build = main_py["parse_args"], main_py["build_manager"]
    assert build(parse([])).metrics_secure is False  # a local run: loopback, plain HTTP
    assert build(parse(["--metrics-bind-address=0.0.0.0:8080"])).metrics_secure is True
    assert (
        build(parse(["--metrics-bind-address=0.0.0.0:8080", "--no-metrics-secure"])).metrics_secure is False
    )
    manager = build(parse(["--metrics-secure", "--metrics-cert-dir=/certs"]))
    assert manager.metrics_secure is True and manager._metrics_cert_dir == "/certs"
    monkeypatch.setenv("METRICS_SECURE", "false")
    assert build(parse(["--metrics-bind-address=0.0.0.0:8080"])).metrics_secure is False
    monkeypatch.setenv("METRICS_SECURE", "maybe")
    with pytest.raises(SystemExit, match="METRICS_SECURE must be true or false"):
        parse([])
