"""An operator process loads what it uses: the Manager without webhooks needs neither pydantic nor
cryptography (~23 MB of RSS together, measured by bench/operator), nor aiohttp."""

from __future__ import annotations

import subprocess
import sys


def test_manager_without_webhooks_stays_light() -> None:
    code = """
import sys
from kubeop.manager import Manager
from kubeop.controller import Controller
heavy = {'pydantic', 'cryptography', 'aiohttp', 'kubeop.webhook'} & set(sys.modules)
sys.exit(', '.join(sorted(heavy)) or 0)
"""
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, f"importing the Manager loaded {done.stderr.strip()}"


def test_operator_imports_from_kubeop_stay_light() -> None:
    """``from kubeop import ...`` loads only what the names need: no kinds, no pydantic."""
    code = """
import sys
from kubeop import Client, Context, Controller, Manager, Request, Result, TerminalError, set_condition
from kubeop import ApiResource, NotFound, PatchType, configure_logging, set_controller_reference
heavy = {'pydantic', 'cryptography', 'aiohttp', 'kubeop.webhook', 'kubeop.crd'} & set(sys.modules)
sys.exit(', '.join(sorted(heavy)) or 0)
"""
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, f"importing from kubeop loaded {done.stderr.strip()}"


def test_built_in_kinds_load_only_when_used() -> None:
    """``import kubeop.kinds`` is a table of names; a kind loads its group version on first use."""
    code = """
import sys
import kubeop.kinds
from kubeop.manager import Manager
heavy = {'pydantic', 'kubeop.kinds.core_v1', 'kubeop.kinds.meta_v1'} & set(sys.modules)
sys.exit(', '.join(sorted(heavy)) or 0)
"""
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, f"importing kubeop.kinds loaded {done.stderr.strip()}"


def test_kopf_handlers_without_admission_handlers_stay_light() -> None:
    """kubeop.kopf loads kubeop.webhook (pydantic, cryptography) only for @kopf.on.validate/mutate."""
    code = """
import sys
import kubeop.kopf as kopf
from kubeop.client import Client, ClientConfig
from kubeop.kopf.running import build_manager

@kopf.on.create('widgets.v1.bench.kubeop.dev')
async def create(**_): pass

build_manager(client=Client(ClientConfig(server='https://example.invalid')))
heavy = {'pydantic', 'cryptography', 'aiohttp', 'kubeop.webhook'} & set(sys.modules)
sys.exit(', '.join(sorted(heavy)) or 0)
"""
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, f"a kopf operator without admission handlers loaded {done.stderr.strip()}"
