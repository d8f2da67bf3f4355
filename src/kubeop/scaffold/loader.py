"""Importing a project's own code (its models and controllers), fresh, with errors that point at it.

The generators read the project by importing it, as controller-gen reads Go packages: every
module below ``<package>.api`` and ``<package>.controllers``. The project root goes first on
``sys.path`` and earlier imports of the package are dropped, so each call sees the files as
they are now (also for two projects with the same package name in one process, as in tests).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import traceback
from pathlib import Path
from types import ModuleType

from kubeop.scaffold.errors import ScaffoldError

__all__ = ["import_tree"]


def _forget(package: str) -> None:
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]


def _where(exc: BaseException, root: Path) -> str:
    """``path:line`` of the innermost frame inside the project, if the error came from there."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(str(root))]
    if isinstance(exc, SyntaxError) and exc.filename and exc.filename.startswith(str(root)):
        return f"{Path(exc.filename).relative_to(root)}:{exc.lineno}"
    if not frames:
        return ""
    last = frames[-1]
    return f"{Path(last.filename).relative_to(root)}:{last.lineno}"


def _import(name: str, root: Path, command: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and (e.name == name or name.startswith(e.name + ".")):
            raise ScaffoldError(
                f"cannot import {name}: no such module under {root}; check the package name in PROJECT"
            ) from None
        where = _where(e, root)
        raise ScaffoldError(
            f"importing {name} failed{' at ' + where if where else ''}: {e}; install what it needs "
            f"(pip install -e .) and run kubeop {command} again"
        ) from None
    except Exception as e:
        where = _where(e, root)
        raise ScaffoldError(
            f"importing {name} failed{' at ' + where if where else ''}: {type(e).__name__}: {e}\n"
            f"fix that and run kubeop {command} again"
        ) from None


def import_tree(root: Path, package: str, *, command: str) -> list[ModuleType]:
    """Import ``package`` (a dotted name under ``root``) and every module below it, in name order.

    A package that does not exist yields no modules; an import that fails is a
    :class:`ScaffoldError` naming the module, the file and line, and the error.
    """
    top = package.split(".", 1)[0]
    if not (root / top).is_dir():
        raise ScaffoldError(f"{root} has no package {top}/: the project's PROJECT names package {top!r}")
    if not (root / Path(*package.split("."))).is_dir():
        return []
    _forget(top)
    importlib.invalidate_caches()
    sys.path.insert(0, str(root))
    try:
        found: list[ModuleType] = []
        pending = [_import(package, root, command)]
        while pending:
            module = pending.pop(0)
            found.append(module)
            paths = getattr(module, "__path__", None)
            if paths is None:
                continue
            children = sorted(pkgutil.iter_modules(paths, prefix=module.__name__ + "."), key=lambda m: m.name)
            pending.extend(_import(child.name, root, command) for child in children)
        return found
    finally:
        sys.path.remove(str(root))
