"""Names of a project and of its APIs: checked once, then derived everywhere from one place.

A project name is a DNS label (it prefixes every Kubernetes object ``deploy`` creates, and its
namespace is ``<name>-system``); the Python package is the same name in snake_case. An API is a
group (``--group`` joined with the project's domain), a version and a CamelCase kind; the rules
are kubeop.crd's (:mod:`kubeop.crd.names`), reported here with the flag to change.
"""

from __future__ import annotations

import keyword
import re
import sys
from dataclasses import dataclass

from kubeop.crd import DeclarationError, check_group, check_kind, check_version, guess_plural
from kubeop.crd.names import check_plural
from kubeop.scaffold.errors import ScaffoldError

__all__ = [
    "MAX_PROJECT_NAME",
    "ApiNames",
    "ProjectNames",
    "check_domain",
    "check_namespace",
    "check_repo",
    "suggest_project_name",
]

# Derived names must stay DNS labels of at most 63 characters: the namespace, the metrics Service,
# and the pods of "<name>-controller-manager" (the ReplicaSet and pod suffixes add 17 more).
MAX_PROJECT_NAME = 30
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RESERVED_PACKAGES = frozenset({"kubeop", "tests", "test", "config", "api", "controllers"})


def suggest_project_name(text: str) -> str:
    """A valid project name close to ``text`` (a directory name, say), or "" if none is."""
    label = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    label = re.sub(r"^[^a-z]+", "", label)[:MAX_PROJECT_NAME].rstrip("-")
    return label


@dataclass(frozen=True)
class ProjectNames:
    """Everything named after the project: package, namespace, object names, image."""

    name: str

    def __post_init__(self) -> None:
        name = self.name
        if not _DNS1035_LABEL.match(name) or len(name) > MAX_PROJECT_NAME:
            suggestion = suggest_project_name(name)
            hint = f" (for example --project-name {suggestion})" if suggestion else ""
            raise ScaffoldError(
                f"project name {name!r} is not a lower-case DNS label of at most {MAX_PROJECT_NAME} "
                "characters: it names the namespace (<name>-system) and every object deploy creates; "
                f"use lower-case letters, digits and '-', starting with a letter{hint}"
            )
        package = self.package
        if keyword.iskeyword(package) or package in _RESERVED_PACKAGES or package in sys.stdlib_module_names:
            raise ScaffoldError(
                f"project name {name!r} would make the Python package {package!r}, which is taken "
                f"(a keyword, a standard-library module or a name kubeop uses); "
                f"pass --project-name {name}-operator"
            )

    @property
    def package(self) -> str:
        """The project's Python package: ``guestbook-operator`` -> ``guestbook_operator``."""
        return self.name.replace("-", "_")

    @property
    def namespace(self) -> str:
        """Where ``deploy`` puts the operator (kubebuilder's ``<project>-system``)."""
        return f"{self.name}-system"

    def prefixed(self, suffix: str) -> str:
        """An object name: ``<project>-<suffix>`` (kubebuilder's namePrefix, applied up front)."""
        return f"{self.name}-{suffix}"

    @property
    def service_account(self) -> str:
        """The operator's ServiceAccount name."""
        return self.prefixed("controller-manager")

    @property
    def deployment(self) -> str:
        """The operator's Deployment name."""
        return self.prefixed("controller-manager")

    @property
    def leader_election_id(self) -> str:
        """The operator's leader election Lease name."""
        return self.prefixed("leader")


def check_domain(domain: str, *, source: str = "--domain") -> str:
    """The project's domain: API groups are ``<group>.<domain>``."""
    if not domain or len(domain) > 200 or not _DNS1123_SUBDOMAIN.match(domain):
        raise ScaffoldError(
            f"{source} {domain!r} is not a DNS subdomain: use lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit (for example --domain example.com)"
        )
    return domain


def check_namespace(namespace: str, *, source: str = "--namespace") -> str:
    """Where ``deploy`` puts the operator: a DNS label (RFC 1123) of at most 63 characters."""
    if not namespace or len(namespace) > 63 or not _DNS1123_LABEL.match(namespace):
        raise ScaffoldError(
            f"{source} {namespace!r} is not a namespace name: use at most 63 lower-case letters, digits "
            "and '-', starting and ending with a letter or digit (for example --namespace my-operator-system)"
        )
    return namespace


_NOT_IN_REPO = frozenset('"\\`<>{}|^')


def check_repo(repo: str, *, source: str = "--repo") -> str:
    """The project's repository (kubebuilder's Go module path; here its home page)."""
    # a URL's characters only: a quote or backslash would end the strings it is written into
    if not repo or any(c.isspace() or c in _NOT_IN_REPO for c in repo) or len(repo) > 500:
        raise ScaffoldError(
            f"{source} {repo!r} must be the project's repository, without spaces, quotes or backslashes "
            "(for example --repo github.com/example/guestbook-operator)"
        )
    return repo


@dataclass(frozen=True)
class ApiNames:
    """One API (group, version, kind) of a project, with its derived names.

    ``group`` is what ``--group`` says (``webapp``); :attr:`full_group` adds the domain
    (``webapp.example.com``), as kubebuilder does. A group given in full (``webapp.example.com``,
    its suffix the domain) is taken as its first part, so it never becomes
    ``webapp.example.com.example.com``. ``explicit_plural`` is ``--plural``: the resource name
    when English plural rules guess it wrong (``Person`` -> ``people``).
    """

    group: str
    version: str
    kind: str
    domain: str
    explicit_plural: str = ""

    def __post_init__(self) -> None:
        try:
            check_kind(self.kind)
        except DeclarationError as e:
            raise ScaffoldError(f"--kind: {e}") from None
        if self.domain and (self.group == self.domain or self.group.endswith("." + self.domain)):
            object.__setattr__(self, "group", self.group[: -len(self.domain)].rstrip("."))
        if self.explicit_plural:
            try:
                check_plural(self.explicit_plural)
            except DeclarationError as e:
                raise ScaffoldError(f"--plural: {e}") from None
        if self.group and not _DNS1123_SUBDOMAIN.match(self.group):
            raise ScaffoldError(
                f"--group {self.group!r} is not a DNS subdomain: use lower-case letters, digits, '-' and "
                f"'.', starting and ending with a letter or digit (for example --group webapp, which makes "
                f"the API group webapp.{self.domain or 'example.com'})"
            )
        try:
            check_group(self.full_group)
        except DeclarationError as e:
            raise ScaffoldError(f"--group {self.group!r} (with --domain {self.domain!r}): {e}") from None
        try:
            check_version(self.version)
        except DeclarationError as e:
            raise ScaffoldError(f"--version: {e}") from None

    @property
    def full_group(self) -> str:
        """The API group with the project's domain (``cache.example.com``)."""
        return ".".join(p for p in (self.group, self.domain) if p)

    @property
    def api_version(self) -> str:
        """``<full group>/<version>``."""
        return f"{self.full_group}/{self.version}"

    @property
    def plural(self) -> str:
        """The kind's plural resource name: the one given (``--plural``), else guessed as kubebuilder does."""
        return self.explicit_plural or guess_plural(self.kind)

    @property
    def lower(self) -> str:
        """The kind in lower case."""
        return self.kind.lower()

    @property
    def module(self) -> str:
        """The module name of the kind's model and controller (``guestbook``; ``class_`` for Class)."""
        return self.lower + "_" if keyword.iskeyword(self.lower) else self.lower

    @property
    def group_prefix(self) -> str:
        """The first label of the group, for file names (``webapp`` in ``webapp_v1_guestbook.yaml``)."""
        return self.full_group.split(".", 1)[0]

    @property
    def sample_file(self) -> str:
        """The sample's file name under config/samples."""
        return f"{self.group_prefix}_{self.version}_{self.lower}.yaml"
