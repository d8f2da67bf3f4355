"""Built-in kinds as models: identity on the class, snake_case attributes with the wire names as
aliases, unknown fields kept through a round trip, quantities and int-or-string as the server
spells them."""

from __future__ import annotations

import copy
import subprocess
import sys
from typing import Any

import pydantic
import pytest

from kubeop.core.model import from_dict, is_model_class, model_gvk, model_resource, to_dict
from kubeop.kinds import (
    ClusterRole,
    ConfigMap,
    CronJob,
    DaemonSet,
    Deployment,
    Ingress,
    Job,
    Lease,
    Namespace,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    Role,
    RoleBinding,
    Secret,
    Service,
    ServiceAccount,
    StatefulSet,
)
from kubeop.kinds.core_v1 import Container, ResourceRequirements, ServicePort
from kubeop.kinds.events_v1 import Event

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}, "aFutureMetaField": 1},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "web"}},
        "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "hostIPC": False,
                "containers": [
                    {
                        "name": "web",
                        "image": "nginx",
                        "ports": [{"containerPort": 80, "name": "http"}],
                        "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}},
                        "aFieldFromANewerServer": {"nested": [1, 2]},
                    }
                ],
            },
        },
    },
    "status": {"replicas": 2, "readyReplicas": 2},
}


def test_every_kind_is_a_resource_handle() -> None:
    kinds = [ConfigMap, Secret, Service, Pod, Deployment, StatefulSet, DaemonSet, Job, CronJob]
    kinds += [PersistentVolumeClaim, PersistentVolume, Namespace, ServiceAccount, Role, RoleBinding]
    kinds += [ClusterRole, Ingress, Lease, Event]
    for kind in kinds:
        assert is_model_class(kind), kind
        resource = model_resource(kind)
        assert resource is not None
        assert resource.api_version == kind.api_version == model_gvk(kind).api_version
        assert resource.kind == kind.kind
    assert Deployment.resource.plural == "deployments" and "scale" in Deployment.resource.subresources
    assert not Namespace.resource.namespaced and not ClusterRole.resource.namespaced
    assert Event.api_version == "events.k8s.io/v1"


def test_round_trip_keeps_unknown_fields_and_wire_names() -> None:
    before = copy.deepcopy(DEPLOYMENT)
    dep = from_dict(Deployment, DEPLOYMENT)
    assert before == DEPLOYMENT  # validation does not touch the input
    assert dep.spec is not None and dep.spec.template.spec is not None
    assert dep.spec.template.spec.host_ipc is False
    container = dep.spec.template.spec.containers[0]
    assert container.ports is not None and container.ports[0].container_port == 80
    assert container.model_extra == {"aFieldFromANewerServer": {"nested": [1, 2]}}
    assert dep.metadata.name == "web" and dep.metadata.model_extra == {"aFutureMetaField": 1}
    assert to_dict(dep) == DEPLOYMENT
    assert list(to_dict(dep))[:2] == ["apiVersion", "kind"]


def test_attributes_and_wire_names_both_validate() -> None:
    by_attr = Container(name="c", image_pull_policy="Always", termination_message_path="/t")
    by_wire = Container.model_validate(
        {"name": "c", "imagePullPolicy": "Always", "terminationMessagePath": "/t"}
    )
    assert by_attr == by_wire
    assert by_attr.model_dump(exclude_none=True) == {
        "name": "c",
        "imagePullPolicy": "Always",
        "terminationMessagePath": "/t",
    }
    svc = Service.model_validate({"spec": {"clusterIPs": ["10.0.0.1"], "ports": [{"port": 80}]}})
    assert svc.spec is not None and svc.spec.cluster_ips == ["10.0.0.1"]


def test_int_or_string_and_quantities_keep_their_spelling() -> None:
    assert ServicePort(port=80, target_port=8080).target_port == 8080
    assert ServicePort(port=80, target_port="http").target_port == "http"
    assert ServicePort.model_validate({"port": 80, "targetPort": "8080"}).target_port == "8080"
    resources = ResourceRequirements(limits={"cpu": 2, "memory": "1Gi"}, requests={"cpu": 0.5})
    assert resources.model_dump(exclude_none=True) == {
        "limits": {"cpu": "2", "memory": "1Gi"},
        "requests": {"cpu": "0.5"},
    }


def test_built_objects_carry_their_type_and_defaults() -> None:
    cm = ConfigMap(metadata={"name": "settings"}, data={"a": "1"})  # type: ignore[arg-type]
    assert to_dict(cm) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "data": {"a": "1"},
        "metadata": {"name": "settings"},
    }
    assert Secret().metadata.name is None  # metadata is always there


def test_the_wrong_kind_or_version_is_refused() -> None:
    with pytest.raises(
        pydantic.ValidationError, match="kind is 'StatefulSet', but Deployment is a Deployment"
    ):
        Deployment.model_validate({**DEPLOYMENT, "kind": "StatefulSet"})
    with pytest.raises(pydantic.ValidationError, match="apiVersion is 'apps/v1beta2'"):
        Deployment.model_validate({**DEPLOYMENT, "apiVersion": "apps/v1beta2"})


def test_a_missing_required_field_names_it() -> None:
    broken = copy.deepcopy(DEPLOYMENT)
    del broken["spec"]["template"]["spec"]["containers"][0]["name"]
    with pytest.raises(pydantic.ValidationError) as err:
        Deployment.model_validate(broken)
    assert err.value.errors()[0]["loc"] == ("spec", "template", "spec", "containers", 0, "name")


def test_importing_the_package_loads_no_model() -> None:
    code = """
import sys
import kubeop.kinds
loaded = sorted(m for m in sys.modules if m.startswith('kubeop.kinds.') or m == 'pydantic')
sys.exit(', '.join(loaded) or 0)
"""
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, f"import kubeop.kinds loaded {done.stderr.strip()}"


def test_one_kind_loads_only_its_group_version() -> None:
    code = """
import sys
from kubeop.kinds import Lease
loaded = sorted(m for m in sys.modules if m.startswith('kubeop.kinds.') and '._' not in m)
sys.exit(0 if loaded == ['kubeop.kinds.coordination_v1', 'kubeop.kinds.meta_v1'] else ', '.join(loaded))
"""
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, f"importing Lease loaded {done.stderr.strip()}"
