"""Names: what init and create api accept, the messages when they do not, and the derived names."""

from __future__ import annotations

import pytest

from kubeop.scaffold import ApiNames, ProjectNames, ScaffoldError
from kubeop.scaffold.names import check_domain, check_repo, suggest_project_name


def test_project_names_derive_package_namespace_and_objects() -> None:
    names = ProjectNames("guestbook-operator")
    assert names.package == "guestbook_operator"
    assert names.namespace == "guestbook-operator-system"
    assert names.service_account == "guestbook-operator-controller-manager"
    assert names.prefixed("manager-role") == "guestbook-operator-manager-role"


@pytest.mark.parametrize(
    ("name", "fix"),
    [
        ("Guestbook", "--project-name guestbook"),
        ("my_operator", "--project-name my-operator"),
        ("1st-operator", "--project-name st-operator"),
        ("x" * 31, "--project-name " + "x" * 30),
    ],
)
def test_bad_project_names_say_what_to_pass(name: str, fix: str) -> None:
    with pytest.raises(ScaffoldError, match="not a lower-case DNS label") as info:
        ProjectNames(name)
    assert fix in str(info.value)


@pytest.mark.parametrize("name", ["json", "kubeop", "tests", "class"])
def test_a_project_name_must_not_make_a_taken_package(name: str) -> None:
    with pytest.raises(ScaffoldError, match=f"--project-name {name}-operator"):
        ProjectNames(name)


def test_suggestions() -> None:
    assert suggest_project_name("My Operator!") == "my-operator"
    assert suggest_project_name("123") == ""


def test_domain_and_repo() -> None:
    assert check_domain("example.com") == "example.com"
    with pytest.raises(ScaffoldError, match=r"--domain 'Example\.com' is not a DNS subdomain"):
        check_domain("Example.com")
    with pytest.raises(ScaffoldError, match="--repo"):
        check_repo("github.com/a b")


def test_api_names() -> None:
    api = ApiNames("webapp", "v1beta1", "Guestbook", "example.com")
    assert api.full_group == "webapp.example.com"
    assert api.api_version == "webapp.example.com/v1beta1"
    assert api.plural == "guestbooks"
    assert api.module == "guestbook"
    assert api.sample_file == "webapp_v1beta1_guestbook.yaml"
    assert ApiNames("webapp", "v1", "Policy", "example.com").plural == "policies"
    assert ApiNames("webapp", "v1", "Class", "example.com").module == "class_"


@pytest.mark.parametrize(
    ("group", "version", "kind", "message"),
    [
        ("webapp", "v1", "guestbook", r"--kind: kind 'guestbook' is not CamelCase.*'Guestbook'"),
        ("webapp", "v1", "Guest_book", r"--kind: .*not CamelCase.*'GuestBook'"),
        ("web_app", "v1", "Guestbook", r"--group 'web_app' is not a DNS subdomain.*--group webapp"),
        ("WebApp", "v1", "Guestbook", r"--group 'WebApp' is not a DNS subdomain"),
        ("webapp", "1", "Guestbook", r"--version: version '1' is not a Kubernetes version name.*'v1beta1'"),
        ("webapp", "v1.0", "Guestbook", r"--version: .*v<N>beta<M>"),
        ("webapp", "V1", "Guestbook", r"--version"),
    ],
)
def test_bad_api_names_name_the_flag_and_the_fix(group: str, version: str, kind: str, message: str) -> None:
    with pytest.raises(ScaffoldError, match=message):
        ApiNames(group, version, kind, "example.com")


def test_a_group_in_a_reserved_domain_is_refused() -> None:
    with pytest.raises(ScaffoldError, match="reserved for Kubernetes"):
        ApiNames("apps", "v1", "Thing", "k8s.io")
