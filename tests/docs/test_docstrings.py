"""Every public name has a docstring: the API reference is generated from them.

Public means: each name in the ``__all__`` of a kubeop package that is a class or a function,
and every method, property, classmethod and staticmethod a public class defines itself (not
inherited) whose name does not start with an underscore. Constants and type aliases cannot
carry a docstring and are documented where their package's docstring lists them.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from typing import Any

import kubeop


def _packages() -> list[str]:
    names = ["kubeop"]
    for info in pkgutil.walk_packages(kubeop.__path__, "kubeop."):
        if info.ispkg:
            names.append(info.name)
    return [n for n in names if hasattr(importlib.import_module(n), "__all__")]


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            value = value.fget
        if inspect.isfunction(value):
            yield name, value


def _public() -> Iterator[tuple[str, Any, bool]]:
    """(where, object, is it documented) for each public class, function and member, once."""
    seen: set[tuple[str, str]] = set()
    for package in _packages():
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            key = (getattr(obj, "__module__", ""), getattr(obj, "__qualname__", name))
            if key in seen:
                continue
            seen.add(key)
            own = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
            yield f"{package}.{name}", obj, bool(own and own.strip())
            if inspect.isclass(obj):
                for member, func in _members(obj):
                    doc = func.__doc__
                    yield f"{package}.{name}.{member}", func, bool(doc and doc.strip())


def test_every_public_name_has_a_docstring() -> None:
    names = list(_public())
    missing = [where for where, _, documented in names if not documented]
    covered = len(names) - len(missing)
    assert len(names) > 800, f"only {len(names)} public names found: is the package walk broken?"
    assert not missing, (
        f"docstrings: {covered} of {len(names)} public names ({covered / len(names):.1%}); missing:\n"
        + "\n".join(missing)
    )
