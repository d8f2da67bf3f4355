"""Naming rules: each bad name is a DeclarationError that says how to fix it."""

from __future__ import annotations

import pytest

from kubeop.crd import DeclarationError
from kubeop.crd.names import (
    check_category,
    check_group,
    check_kind,
    check_plural,
    check_short_name,
    check_version,
    guess_plural,
    version_priority,
)


@pytest.mark.parametrize("kind", ["CronTab", "A", "Kafka2Topic", "HTTPRoute"])
def test_camel_case_kinds(kind: str) -> None:
    assert check_kind(kind) == kind


@pytest.mark.parametrize(
    ("kind", "hint"),
    [
        ("cronTab", "'CronTab'"),
        ("crontab", "'Crontab'"),
        ("cron_tab", "'CronTab'"),
        ("Cron-Tab", "'CronTab'"),
        ("2Tab", ""),
        ("", ""),
        ("A" * 64, ""),
    ],
)
def test_non_camel_case_kinds_suggest_a_fix(kind: str, hint: str) -> None:
    with pytest.raises(DeclarationError, match="is not CamelCase") as info:
        check_kind(kind)
    assert hint in str(info.value)


@pytest.mark.parametrize("group", ["stable.example.com", "a.b", "my-ops.example.io", "x1.y2"])
def test_dns_subdomain_groups(group: str) -> None:
    assert check_group(group) == group


@pytest.mark.parametrize(
    ("group", "message"),
    [
        ("Stable.example.com", "is not a DNS subdomain"),
        ("stable_example.com", "is not a DNS subdomain"),
        ("-a.example.com", "is not a DNS subdomain"),
        ("a..b", "is not a DNS subdomain"),
        ("", "is not a DNS subdomain"),
        ("stable", r"at least one dot: add your domain \(for example 'stable.example.com'\)"),
        ("apps.k8s.io", "reserved for Kubernetes itself"),
        ("kubernetes.io", "reserved for Kubernetes itself"),
    ],
)
def test_bad_groups(group: str, message: str) -> None:
    with pytest.raises(DeclarationError, match=message):
        check_group(group)


@pytest.mark.parametrize("version", ["v1", "v2", "v1beta1", "v10alpha3", "v2beta12"])
def test_kubernetes_versions(version: str) -> None:
    assert check_version(version) == version


@pytest.mark.parametrize("version", ["1", "V1", "v0", "v1beta", "v1gamma1", "v1beta0", "version1", "v1.2"])
def test_bad_versions(version: str) -> None:
    with pytest.raises(DeclarationError, match=r"not a Kubernetes version name: use v<N>"):
        check_version(version)


@pytest.mark.parametrize(
    ("check", "value"),
    [
        (check_plural, "CronTabs"),
        (check_plural, "cron_tabs"),
        (check_short_name, "1ct"),
        (check_category, "All"),
    ],
)
def test_lower_case_labels(check: object, value: str) -> None:
    with pytest.raises(DeclarationError, match="is not a lower-case DNS label"):
        check(value)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        ("CronTab", "crontabs"),
        ("Policy", "policies"),
        ("Gateway", "gateways"),
        ("Ingress", "ingresses"),
        ("Box", "boxes"),
        ("Patch", "patches"),
        ("Mesh", "meshes"),
        ("Key", "keys"),
    ],
)
def test_guess_plural(kind: str, plural: str) -> None:
    assert guess_plural(kind) == plural


def test_versions_sort_like_kubernetes() -> None:
    versions = ["v1alpha1", "v1", "v11beta2", "v10beta3", "v2", "v1beta1", "v12alpha1", "v3beta1", "foo"]
    assert sorted(versions, key=version_priority, reverse=True) == [
        "v2",
        "v1",
        "v11beta2",
        "v10beta3",
        "v3beta1",
        "v1beta1",
        "v12alpha1",
        "v1alpha1",
        "foo",
    ]
