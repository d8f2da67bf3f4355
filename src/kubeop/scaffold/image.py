"""The image build context of a project: what ``docker build`` needs, and nothing else.

``kubeop docker-build`` writes it to ``build/image`` (then builds it, where an engine runs): the
Dockerfile, pyproject.toml, README.md, the package, and ``kubeop-requirements.txt``, which says
where the image gets kubeop (the Dockerfile installs ``-r kubeop-requirements.txt .``):

* by default, from ``wheels/kubeop-<version>-py3-none-any.whl`` in the context: the kubeop running
  this command, packed by :func:`kubeop.scaffold.wheel.kubeop_wheel` (no index serving kubeop
  is needed; its dependencies come from the usual index);
* ``kubeop_from=<index URL>``: ``kubeop==<this version>`` from that index (checked to serve it),
  given to pip as ``--index-url``: the only index pip asks, so no other index can offer a
  ``kubeop`` of its own (dependency confusion); it must serve kubeop's dependencies too, as a
  mirror or proxy of the public index does;
* ``kubeop_from=<VCS URL>`` (``git+https://...@tag``): pip builds kubeop from there.

A login in either URL (``https://user:token@host/...``) is used here to check the index, and
never written into the context: the requirement names the URL without it, and the login goes
to the build as the secret :data:`SECRET_ID` (a netrc file, ``docker build --secret``), which
the Dockerfile mounts as ``/root/.netrc`` for its pip line only (:data:`SECRET_MOUNT`).

Nothing is pinned by hash: pip's hash checking is all or nothing (one ``--hash`` makes it demand
a hash for every dependency, and the project directory ``.`` cannot have one), and the default
wheel travels in the same context as the requirement that would carry its hash.

A pyproject.toml that depends on a local checkout (``kubeop @ file:///...``) is given to the image
asking for plain ``kubeop``: the image does not depend on paths of this machine.
"""

from __future__ import annotations

import base64
import html.parser
import http.client
import re
import shutil
import tomllib
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse, urlsplit, urlunsplit

from kubeop.scaffold.confined_copy import Ignore, copy_entry, existing_entries, read_regular
from kubeop.scaffold.errors import ScaffoldError
from kubeop.scaffold.project import Project
from kubeop.scaffold.wheel import WHEEL_DIR, kubeop_dist, kubeop_wheel

__all__ = [
    "CONTEXT_MARKER",
    "ENV_VAR",
    "REQUIREMENTS_FILE",
    "SECRET_ID",
    "SECRET_MOUNT",
    "BuildContext",
    "copy_into_context",
    "local_kubeop",
    "prepare_context",
    "write_build_context",
    "write_kubeop_source",
]

CONTEXT_MARKER = ".kubeop-build-context"
#: The file of the context that says where the image's pip gets kubeop.
REQUIREMENTS_FILE = "kubeop-requirements.txt"
#: The environment variable that stands for ``--kubeop-from``.
ENV_VAR = "KUBEOP_FROM"
#: The build secret holding the login of the ``--kubeop-from`` URL (netrc lines).
SECRET_ID = "kubeop-netrc"
#: How the Dockerfile's pip line mounts it (pip and git read ~/.netrc; absent, the line runs as before).
SECRET_MOUNT = f"--mount=type=secret,id={SECRET_ID},target=/root/.netrc"
_HOST = re.compile(r"^[A-Za-z0-9.\-\[\]:]+\Z")
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", ".pytest_cache", ".ruff_cache")
_VCS = re.compile(r"^(git|hg|svn|bzr)\+(https?|ssh|file|git)://\S+\Z")
# one token: a space or line break would add pip options to kubeop-requirements.txt
_INDEX = re.compile(r"^https?://\S+\Z")
_FIX_FROM = (
    "or take kubeop from an index or a VCS URL: kubeop docker-build --kubeop-from "
    "https://<index>/simple | git+https://<host>/<repo>@<tag>"
)

# the runtime dependency and the dev extra's kubeop[cli]
_LOCAL_KUBEOP = re.compile(r"""(["'])kubeop(\[[A-Za-z0-9_,\s-]*\])?\s*@\s*file:[^"'\n]*\1""", re.IGNORECASE)
_NO_FROM = "or build the image from this kubeop's wheel: kubeop docker-build (without --kubeop-from)"


@dataclass(frozen=True)
class BuildContext:
    """What :func:`write_build_context` wrote: its top-level entries, and where kubeop comes from."""

    path: Path
    entries: list[str]
    kubeop: str  # one line for the user: the version and its origin
    #: The login the image build needs (netrc lines; "" for none), for the build secret SECRET_ID:
    #: never in the context, never in a repr.
    netrc: str = field(default="", repr=False)


@dataclass(frozen=True)
class _Source:
    lines: list[str]  # of kubeop-requirements.txt
    origin: str
    netrc: str = field(default="", repr=False)


def _kubeop_requirement(pyproject: dict[str, object]) -> str | None:
    project = pyproject.get("project")
    deps = project.get("dependencies", []) if isinstance(project, dict) else []
    for dep in deps if isinstance(deps, list) else []:
        text = str(dep).strip()
        if text.split("@", 1)[0].strip().lower() == "kubeop" and "@" in text:
            return text.split("@", 1)[1].strip()
    return None


def _parse_pyproject(path: Path, text: str) -> dict[str, object]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScaffoldError(f"{path} is not valid TOML: {e}") from None


def _read_pyproject(project: Project) -> dict[str, object]:
    path = project.root / "pyproject.toml"
    try:
        return _parse_pyproject(path, path.read_text())
    except FileNotFoundError:
        raise ScaffoldError(f"{path} is missing: restore it (kubeop init --force)") from None


def local_kubeop(project: Project) -> Path | None:
    """The local kubeop checkout pyproject.toml depends on (``kubeop @ file:///...``), if any."""
    return _local_kubeop(_read_pyproject(project))


def _local_kubeop(pyproject: dict[str, object]) -> Path | None:
    url = _kubeop_requirement(pyproject)
    if url is None or not url.startswith("file:"):
        return None
    source = Path(unquote(urlparse(url).path))
    if not (source / "pyproject.toml").is_file():
        raise ScaffoldError(
            f"pyproject.toml depends on kubeop at {source}, which is not a kubeop checkout; fix that line"
        )
    return source


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.files: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.files.append(unquote(urlparse(href).path.rsplit("/", 1)[-1]))


def redact_url(url: str) -> str:
    """``url`` with the password (or a lone token) of its user part replaced by ``***``, to show."""
    netloc = urlsplit(url).netloc
    if "@" not in netloc:
        return url
    userinfo, host = netloc.rsplit("@", 1)
    user, has_password, _ = userinfo.partition(":")
    shown = f"{user}:***" if has_password else "***"
    return url.replace(netloc, f"{shown}@{host}", 1)


def _index_request(url: str) -> urllib.request.Request:
    """A GET of ``url`` with its user part sent as basic auth (urllib does not read it from a URL)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return urllib.request.Request(url)
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
    return urllib.request.Request(
        parts._replace(netloc=host).geturl(), headers={"Authorization": f"Basic {token}"}
    )


def _index_versions(index: str, timeout: float = 15.0) -> set[str]:
    """The kubeop versions a PEP 503 index serves (file names ``kubeop-<version>...``)."""
    url = index.rstrip("/") + "/kubeop/"
    shown_index, shown_url = redact_url(index), redact_url(url)
    try:
        with urllib.request.urlopen(_index_request(url), timeout=timeout) as resp:
            page = resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return set()
        raise ScaffoldError(
            f"the index {shown_index} answered HTTP {e.code} for {shown_url}: fix the URL, {_NO_FROM}"
        ) from None
    except (OSError, ValueError, http.client.HTTPException) as e:
        raise ScaffoldError(
            f"cannot read the index {shown_index} ({shown_url}: {e}): fix the URL, {_NO_FROM}"
        ) from None
    links = _Links()
    links.feed(page)
    found = set()
    for name in links.files:
        m = re.match(r"kubeop-([0-9][^-]*?)(?:\.tar\.gz|\.zip|-.*\.whl)$", name, re.IGNORECASE)
        if m:
            found.add(m.group(1))
    return found


def _check_wanted(pyproject: dict[str, object], version: str) -> None:
    """Refuse a kubeop version the project's own dependency line would not accept."""
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:  # pip checks it in the image build anyway
        return
    project = pyproject.get("project")
    deps = project.get("dependencies", []) if isinstance(project, dict) else []
    for dep in deps if isinstance(deps, list) else []:
        try:
            req = Requirement(str(dep))
        except InvalidRequirement:
            continue
        if req.name.lower() == "kubeop" and req.url is None and not req.specifier.contains(version, True):
            raise ScaffoldError(
                f"pyproject.toml asks for {dep!s}, but the image would get kubeop {version}: upgrade "
                f"kubeop here (pip install -U kubeop) or relax that line, {_FIX_FROM}"
            )


def _netrc_value(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _without_login(url: str, shown: str) -> tuple[str, str]:
    """``url`` without the login of its user part, and that login as a netrc line ("" if none)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, ""
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, has_password, password = userinfo.partition(":")
    if parts.scheme.endswith("ssh"):  # git+ssh://git@host/...: a user name for ssh keys, no login
        if has_password:
            raise ScaffoldError(
                f"--kubeop-from {shown}: an ssh URL logs in with keys, not a password; remove the password"
            )
        return url, ""
    user, password = unquote(user), unquote(password)
    hostname = parts.hostname or ""
    if not _HOST.match(hostname) or any(ord(c) < 32 or ord(c) == 127 for c in user + password):
        raise ScaffoldError(
            f"--kubeop-from {shown}: its host or login holds characters a netrc file cannot carry; "
            "fix the URL"
        )
    line = f"machine {hostname} login {_netrc_value(user)} password {_netrc_value(password)}\n"
    return urlunsplit(parts._replace(netloc=host)), line


def _kubeop_source(value: str | None, pyproject: dict[str, object], dest: Path) -> _Source:
    """The lines of kubeop-requirements.txt, the line telling the user where kubeop comes from, and
    the login the build needs (kept out of the lines)."""
    choice = (value or "wheel").strip()
    if choice == "wheel":
        dist = kubeop_dist()
        _check_wanted(pyproject, dist.version)
        wheel, dist = kubeop_wheel(dest / WHEEL_DIR)
        shown = f"{WHEEL_DIR}/{wheel.name}"
        return _Source(
            [f"./{shown}"], f"the image installs kubeop {dist.version} from {shown} ({dist.source})"
        )
    shown = redact_url(choice)
    secret = f"; its login goes to the build as the secret {SECRET_ID}, not into the context"
    if _VCS.match(choice) and "+file://" in choice:
        raise ScaffoldError(
            f"--kubeop-from {shown}: the image build cannot reach paths of this machine; build from this "
            "kubeop's wheel (kubeop docker-build without --kubeop-from) or use a VCS URL it can fetch"
        )
    if _VCS.match(choice):
        bare, netrc = _without_login(choice, shown)
        origin = f"the image installs kubeop from {shown} (the version it holds){secret if netrc else ''}"
        return _Source([f"kubeop @ {bare}"], origin, netrc)
    if _INDEX.match(choice):
        parts = urlsplit(choice)
        if parts.query or parts.fragment:
            hidden = redact_url(urlunsplit(parts._replace(query="***" if parts.query else "", fragment="")))
            raise ScaffoldError(
                f"--kubeop-from {hidden}: an index URL has no query or fragment; give a token as the "
                "URL's login (https://<user>:<token>@<host>/simple), which goes to the build as a secret"
            )
        bare, netrc = _without_login(choice, shown)
        version = kubeop_dist().version
        _check_wanted(pyproject, version)
        served = _index_versions(choice)
        if version not in served:
            has = f"it serves {', '.join(sorted(served))}" if served else "it serves no kubeop"
            raise ScaffoldError(
                f"the index {shown} has no kubeop {version} ({has}): publish it there, {_NO_FROM}"
            )
        # --index-url: pip asks this index alone, so no other index can offer its own kubeop
        lines = [f"--index-url {bare}", f"kubeop=={version}"]
        origin = (
            f"the image installs kubeop {version} from the index {shown}, the only index its pip asks "
            f"(it must serve kubeop's dependencies too){secret if netrc else ''}"
        )
        return _Source(lines, origin, netrc)
    raise ScaffoldError(
        f"--kubeop-from {shown!r} (or ${ENV_VAR}) is neither 'wheel', an index URL (https://...) nor a "
        "VCS URL (git+https://...): e.g. kubeop docker-build --kubeop-from git+https://<host>/<repo>@<tag>"
    )


def write_kubeop_source(
    dest: Path, kubeop_from: str | None, pyproject: dict[str, object] | None = None
) -> tuple[str, str]:
    """Write where the image gets kubeop into the build context ``dest``: kubeop-requirements.txt
    (and, by default, the wheel in wheels/); ``pyproject``'s kubeop requirement must accept the
    version. Returns the line telling the user and the login the build needs (netrc lines for
    the secret :data:`SECRET_ID`, "" for none), which is not written. Python and Helm projects'
    contexts both use it."""
    try:
        source = _kubeop_source(kubeop_from, pyproject or {}, dest)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    (dest / REQUIREMENTS_FILE).write_text(
        "# Where the image gets kubeop; written by kubeop docker-build (--kubeop-from).\n"
        + "\n".join(source.lines)
        + "\n"
    )
    return source.origin, source.netrc


def prepare_context(dest: Path, copies: tuple[Path, ...] = ()) -> None:
    """An empty ``dest`` marked as kubeop's (an earlier context is replaced, anything else refused);
    ``dest`` must not lie inside a directory of ``copies`` (the copy would copy itself)."""
    for source in copies:
        if dest.resolve().is_relative_to(source.resolve()):
            raise ScaffoldError(
                f"{dest} is inside {source.name}/, which the context copies; choose another --context-dir "
                "(default: build/image)"
            )
    if dest.exists():
        if not (dest / CONTEXT_MARKER).is_file() and any(dest.iterdir()):
            raise ScaffoldError(
                f"{dest} exists and is not a build context kubeop wrote; choose another --context-dir"
            )
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    (dest / CONTEXT_MARKER).write_text("written by kubeop docker-build; rewritten on every run\n")


def write_build_context(project: Project, dest: Path, kubeop_from: str | None = None) -> BuildContext:
    """Write the context into ``dest`` (replacing an earlier one), kubeop taken as ``kubeop_from``
    says (``None`` or ``"wheel"``: a wheel of this kubeop; an index URL; a VCS URL)."""
    project.require_own_package(
        "docker-build", "write a Dockerfile that also copies the parent packages it imports, and build that"
    )
    root = project.root
    # Every entry is checked before anything is read: no link out of the project, no FIFO.
    copied = existing_entries(root, ("Dockerfile", ".dockerignore", "README.md", project.package))
    for needed in ("Dockerfile", "pyproject.toml", project.package):
        if needed not in copied and not existing_entries(root, (needed,)):
            raise ScaffoldError(
                f"{root / needed} is missing: restore it (kubeop init --force) to build an image"
            )
    pyproject_path = root / "pyproject.toml"
    pyproject = read_regular(pyproject_path).decode()
    pyproject_data = _parse_pyproject(pyproject_path, pyproject)
    checkout = _local_kubeop(pyproject_data)
    prepare_context(dest, (root / project.package,))
    origin, netrc = write_kubeop_source(dest, kubeop_from, pyproject_data)
    copy_into_context(dest, root, copied, ignore=_SKIP)
    if checkout is not None:
        # "kubeop @ file:///..." (or 'kubeop@file:...') becomes "kubeop", "kubeop[cli] @ ..." "kubeop[cli]":
        # no path of this machine
        pyproject = _LOCAL_KUBEOP.sub(r"\1kubeop\2\1", pyproject)
    (dest / "pyproject.toml").write_text(pyproject)
    return BuildContext(dest, sorted(p.name for p in dest.iterdir()), origin, netrc)


def copy_into_context(dest: Path, root: Path, names: list[str], ignore: Ignore | None = None) -> None:
    """Copy ``root``'s entries ``names`` into the context ``dest`` confined to ``root`` (links as
    links); on a refusal the context is removed, not left half-written."""
    try:
        for name in names:
            copy_entry(root / name, dest / name, within=root, ignore=ignore)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
