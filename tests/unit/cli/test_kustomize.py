"""The kustomize subset deploy reads: resources (files and directories) and images."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubeop.scaffold import ScaffoldError, build_kustomization
from kubeop.scaffold.kustomize import image_name

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "m"},
    "spec": {"template": {"spec": {"containers": [{"name": "manager", "image": "controller:latest"}]}}},
}


def _tree(tmp_path: Path, images: list[dict[str, str]] | None = None) -> Path:
    (tmp_path / "manager").mkdir()
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}
    (tmp_path / "manager" / "manager.yaml").write_text(yaml.safe_dump_all([namespace, DEPLOYMENT]))
    manager = {"resources": ["manager.yaml"]}
    if images is not None:
        manager["images"] = images  # type: ignore[assignment]
    (tmp_path / "manager" / "kustomization.yaml").write_text(yaml.safe_dump(manager))
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / "svc.yaml").write_text("kind: Service\napiVersion: v1\nmetadata: {name: s}\n")
    default = {"resources": ["../manager", "svc.yaml"]}
    (tmp_path / "default" / "kustomization.yaml").write_text(yaml.safe_dump(default))
    return tmp_path / "default"


def _image(objs: list[dict[str, object]]) -> str:
    dep = next(o for o in objs if o["kind"] == "Deployment")
    return str(dep["spec"]["template"]["spec"]["containers"][0]["image"])  # type: ignore[index]


def test_resources_are_followed_in_order(tmp_path: Path) -> None:
    objs = build_kustomization(_tree(tmp_path))
    assert [o["kind"] for o in objs] == ["Namespace", "Deployment", "Service"]
    assert _image(objs) == "controller:latest"


def test_images_entries_and_overrides(tmp_path: Path) -> None:
    entry = {"name": "controller", "newName": "reg.example.com/op", "newTag": "v1"}
    default = _tree(tmp_path, images=[entry])
    assert _image(build_kustomization(default)) == "reg.example.com/op:v1"
    assert _image(build_kustomization(default, images={"controller": "reg:5000/op:v2"})) == "reg:5000/op:v2"


def test_an_override_applies_without_an_images_entry(tmp_path: Path) -> None:
    assert _image(build_kustomization(_tree(tmp_path), images={"controller": "op:dev"})) == "op:dev"


def test_what_only_kustomize_understands_is_refused(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: []\nnamePrefix: x-\n")
    with pytest.raises(ScaffoldError, match=r"uses namePrefix.*kubectl apply -k"):
        build_kustomization(tmp_path)


def test_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(ScaffoldError, match=r"has no kustomization\.yaml"):
        build_kustomization(tmp_path)
    (tmp_path / "kustomization.yaml").write_text("resources: [gone.yaml]\n")
    with pytest.raises(ScaffoldError, match=r"lists gone\.yaml, which does not exist"):
        build_kustomization(tmp_path)


@pytest.mark.parametrize(
    ("image", "name"),
    [
        ("controller", "controller"),
        ("controller:latest", "controller"),
        ("reg:5000/op", "reg:5000/op"),
        ("reg:5000/op:v1", "reg:5000/op"),
        ("op@sha256:abc", "op"),
    ],
)
def test_image_name(image: str, name: str) -> None:
    assert image_name(image) == name


def test_namespace_moves_namespaced_objects_and_what_refers_to_them(tmp_path: Path) -> None:
    objs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "old"}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa", "namespace": "old"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "b"},
            "subjects": [
                {"kind": "ServiceAccount", "name": "sa", "namespace": "old"},
                {"kind": "ServiceAccount", "name": "other", "namespace": "elsewhere"},
                {"kind": "User", "name": "alice"},
            ],
        },
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}},
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "v"},
            "webhooks": [{"name": "w", "clientConfig": {"service": {"name": "svc", "namespace": "old"}}}],
        },
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "c"},
            "spec": {
                "conversion": {
                    "strategy": "Webhook",
                    "webhook": {"clientConfig": {"service": {"name": "svc", "namespace": "old"}}},
                }
            },
        },
    ]
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all(objs))
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump({"namespace": "new", "resources": ["all.yaml"]})
    )
    ns, sa, svc, binding, role, hook, crd = build_kustomization(tmp_path)
    assert ns["metadata"] == {"name": "new"}
    assert sa["metadata"]["namespace"] == svc["metadata"]["namespace"] == "new"
    assert "namespace" not in role["metadata"] and "namespace" not in binding["metadata"]
    assert "namespace" not in hook["metadata"] and "namespace" not in crd["metadata"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "sa", "namespace": "new"},
        {"kind": "ServiceAccount", "name": "other", "namespace": "elsewhere"},
        {"kind": "User", "name": "alice"},
    ]
    assert hook["webhooks"][0]["clientConfig"]["service"]["namespace"] == "new"
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["namespace"] == "new"


def _patched(tmp_path: Path, patch: object, **entry: object) -> list[dict[str, object]]:
    (tmp_path / "d.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "m", "namespace": "ns"},
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "manager",
                                    "image": "controller:latest",
                                    "args": ["--a"],
                                    "env": [{"name": "A", "value": "1"}],
                                    "ports": [{"containerPort": 8080, "name": "metrics"}],
                                },
                                {"name": "sidecar", "image": "s"},
                            ]
                        }
                    }
                },
            }
        )
    )
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(patch))
    kustomization = {"resources": ["d.yaml"], "patches": [{"path": "p.yaml", **entry}]}
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return build_kustomization(tmp_path)


def test_a_strategic_merge_patch_merges_lists_by_their_key(tmp_path: Path) -> None:
    patch = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "other-name-the-target-wins"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "manager",
                            "args": ["--b"],
                            "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}],
                            "ports": [{"containerPort": 9443, "name": "webhook-server"}],
                        }
                    ],
                    "volumes": [{"name": "certs", "emptyDir": {}}],
                }
            }
        },
    }
    (dep,) = _patched(tmp_path, patch, target={"kind": "Deployment", "name": "m"})
    assert dep["metadata"] == {"name": "m", "namespace": "ns"}
    pod = dep["spec"]["template"]["spec"]  # type: ignore[index]
    manager, sidecar = pod["containers"]
    assert manager["args"] == ["--b"]  # a list without a merge key is replaced
    assert manager["env"] == [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]
    assert [p["containerPort"] for p in manager["ports"]] == [9443, 8080]  # kustomize's order
    assert manager["image"] == "controller:latest" and sidecar == {"name": "sidecar", "image": "s"}
    assert pod["volumes"] == [{"name": "certs", "emptyDir": {}}]


def test_a_patch_finds_its_target_by_its_own_name_and_null_deletes(tmp_path: Path) -> None:
    patch = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "m"},
        "spec": {"template": None},
    }
    (dep,) = _patched(tmp_path, patch)
    assert dep["spec"] == {}


def test_a_patch_that_matches_nothing_or_is_a_json_patch_is_refused(tmp_path: Path) -> None:
    patch = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "zzz"}}
    with pytest.raises(ScaffoldError, match="matches no object"):
        _patched(tmp_path, patch)
    with pytest.raises(ScaffoldError, match="strategic-merge patches only"):
        _patched(tmp_path, [{"op": "remove", "path": "/spec"}], target={"kind": "Deployment"})


@pytest.mark.parametrize(
    ("kustomization", "message"),
    [
        ("resources: [\n", "kustomization.yaml is not valid YAML"),
        ("- resources\n", "kustomization.yaml is not a kustomization"),
        ("resources: svc.yaml\n", "resources must be a list"),
        ("resources: [svc.yaml]\npatches: [patch.yaml]\n", "a patches entry must be a mapping"),
        (
            "resources: [svc.yaml]\npatches: [{path: p.yaml, target: {labelSelector: app=x}}]\n",
            "target.labelSelector",
        ),
        ("resources: [svc.yaml]\npatches: [{path: p.yaml, target: Service}]\n", "target must be a mapping"),
        ("resources: [.]\n", "includes itself"),
        ("resources: [bad.yaml]\n", "bad.yaml is not valid YAML"),
        ("resources: []\nnamespace: My NS\n", "namespace 'My NS' is not a namespace name"),
        ("resources: []\nnamespace: [a]\n", "namespace .* is not a namespace name"),
    ],
)
def test_a_kustomization_it_cannot_read_is_one_line(tmp_path: Path, kustomization: str, message: str) -> None:
    (tmp_path / "svc.yaml").write_text("kind: Service\napiVersion: v1\nmetadata: {name: s}\n")
    (tmp_path / "p.yaml").write_text("kind: Service\napiVersion: v1\nmetadata: {name: s, labels: {a: b}}\n")
    (tmp_path / "bad.yaml").write_text("kind: [\n")
    (tmp_path / "kustomization.yaml").write_text(kustomization)
    with pytest.raises(ScaffoldError, match=message) as caught:
        build_kustomization(tmp_path)
    assert "\n" not in str(caught.value)


def test_the_refusal_of_other_fields_names_patches_as_understood(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: []\nnamePrefix: x-\n")
    with pytest.raises(ScaffoldError, match="understands only resources, images, namespace and patches"):
        build_kustomization(tmp_path)
