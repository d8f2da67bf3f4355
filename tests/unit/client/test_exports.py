"""The public API of kubeop.core and kubeop.client is what __all__ says, and it all imports."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["kubeop.core", "kubeop.client"])
def test_all_is_sorted_and_importable(module: str) -> None:
    mod = importlib.import_module(module)
    names = list(mod.__all__)
    assert names == sorted(names)
    for name in names:
        assert getattr(mod, name) is not None


def test_core_does_no_io() -> None:
    """kubeop.core must stay importable without the networking stack (checked in a fresh process)."""
    code = "import sys, kubeop.core; sys.exit('aiohttp' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_client_import_stays_light() -> None:
    """pydantic (for OpenAPI models) and cryptography (for certificate checks) load on demand."""
    code = "import sys, kubeop.client; sys.exit(bool({'pydantic', 'cryptography'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
