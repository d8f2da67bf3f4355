"""Copying a project's files into an image build context (or a chart into a project) without
taking anything from outside it.

``shutil.copytree`` follows symbolic links, so one link committed in a pull request
(``op/data -> /home/ci/.docker/config.json``) would put any file of the building machine into the
context, and so into the image. Here links are copied as links, and only links that stay inside
``within``: a link is refused when its target is absolute, when its text climbs out
(``../../x``), or when the whole chain resolves outside (a link to a link that leaves, a link
through a linked directory, a loop). Only regular files, directories and links are copied: a
FIFO, socket or device is refused (and never opened, so a FIFO cannot block the copy). Regular
files are opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked again on the open descriptor, so a
file swapped for a link or a FIFO meanwhile is refused too.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

from kubeop.scaffold.errors import ScaffoldError

__all__ = ["Ignore", "check_entry", "copy_entry", "existing_entries", "read_regular"]

#: What ``shutil.ignore_patterns`` makes: (directory, names) -> the names to leave out.
Ignore = Callable[[str, list[str]], Collection[str]]

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file, directory or link")


def _special(path: Path, mode: int) -> ScaffoldError:
    return ScaffoldError(
        f"{path} is {_kind(mode)}: a build context holds regular files, directories and links only; "
        "remove it from the project"
    )


def _check_link(link: Path, within: Path) -> str:
    """The target of ``link`` if it stays inside ``within`` (the whole chain), else a ScaffoldError."""
    target = os.readlink(link)
    fix = (
        "the build would copy a file of this machine that is not part of the project: remove the link, "
        "or replace it with the file it stands for"
    )
    if os.path.isabs(target):
        raise ScaffoldError(
            f"{link} is a symbolic link to the absolute path {target}: {fix} (or make it a relative link "
            "to a file inside the project)"
        )
    base = within.resolve()
    try:
        resolved = link.resolve()  # the whole chain; a loop raises
    except (OSError, RuntimeError):
        raise ScaffoldError(
            f"{link} is a symbolic link to {target} that never ends (a loop): remove it"
        ) from None
    climbed = Path(os.path.normpath(link.parent.resolve() / target))
    if not climbed.is_relative_to(base) or not resolved.is_relative_to(base):
        raise ScaffoldError(
            f"{link} is a symbolic link to {target}, which resolves to {resolved}, outside {within}: {fix}"
        )
    return target


def check_entry(path: Path, within: Path) -> os.stat_result:
    """``path``'s own status (not its link's target's), refusing a link leaving ``within`` or a
    special file; a missing ``path`` raises FileNotFoundError."""
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        _check_link(path, within)
    elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise _special(path, st.st_mode)
    return st


def existing_entries(root: Path, names: Iterable[str]) -> list[str]:
    """Those of ``names`` that exist in ``root`` (a link counts), each checked as
    :func:`check_entry` does: a link leaving ``root`` or a special file is refused."""
    found = []
    for name in names:
        try:
            check_entry(root / name, root)
        except FileNotFoundError:
            continue
        found.append(name)
    return found


def _open_regular(path: Path) -> tuple[int, os.stat_result]:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise ScaffoldError(
            f"cannot read {path}: {e.strerror or e} (it changed while being copied?)"
        ) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise _special(path, st.st_mode)
    return fd, st


def read_regular(path: Path) -> bytes:
    """The bytes of ``path``, which must be a regular file itself (not a link, not a FIFO)."""
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        raise ScaffoldError(
            f"{path} is a symbolic link (to {os.readlink(path)}): the build context rewrites it, so it must "
            "be a regular file; replace the link with the file"
        )
    fd, _ = _open_regular(path)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _copy_file(source: Path, dest: Path) -> None:
    fd, st = _open_regular(source)
    with os.fdopen(fd, "rb") as src:
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
            os.fchmod(dst.fileno(), stat.S_IMODE(st.st_mode) & 0o777)
            os.utime(dst.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))


def copy_entry(source: Path, dest: Path, *, within: Path, ignore: Ignore | None = None) -> None:
    """Copy ``source`` (a file, a directory with everything below it, or a link) to ``dest``, which
    must not exist: links as links, and only those whose whole chain stays inside ``within``;
    special files refused (ScaffoldError naming the path and the fix). ``ignore`` leaves names
    out, as ``shutil.copytree``'s does."""
    st = source.lstat()
    if stat.S_ISLNK(st.st_mode):
        os.symlink(_check_link(source, within), dest)  # the very text checked
    elif not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        raise _special(source, st.st_mode)
    elif stat.S_ISREG(st.st_mode):
        _copy_file(source, dest)
    else:
        os.mkdir(dest, 0o700)
        names = sorted(os.listdir(source))
        left_out = set(ignore(str(source), names)) if ignore is not None else set()
        for name in names:
            if name not in left_out:
                copy_entry(source / name, dest / name, within=within, ignore=ignore)
        os.chmod(dest, stat.S_IMODE(st.st_mode) & 0o777 | 0o700)
        os.utime(dest, ns=(st.st_atime_ns, st.st_mtime_ns))
