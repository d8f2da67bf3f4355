"""docs/migration/from-kopf.md's compatibility table is what scripts/kopf_compat.py generates from
the code and the tests now (kopf's names from its pinned sdist: :mod:`.sdist`), so it cannot go
stale; and what the table says a name does is what it does where it says "not supported".
No control plane is needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import kubeop.kopf as kopf

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))

import kopf_compat  # noqa: E402


def test_the_pages_table_is_the_generated_one() -> None:
    proc = subprocess.run(
        [sys.executable, "scripts/kopf_compat.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_kopf_name_has_a_row_and_the_unsupported_ones_raise() -> None:
    generated = kopf_compat.table()
    names = kopf_compat.kopf_names()
    assert all(f"| `kopf.{name}` |" in generated for name in names)
    unsupported = {n for n, (status, _) in kopf_compat.behaviour().items() if status == "not supported"}
    assert unsupported == {"AiohttpSession", "WebhookNgrokTunnel", "spawn_tasks", "run_tasks"}
    with pytest.raises(TypeError, match="ConnectionInfo"):
        kopf.AiohttpSession()
