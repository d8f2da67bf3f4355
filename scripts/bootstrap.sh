#!/usr/bin/env bash
# Creates .venv with kubeop and its development tools. Idempotent; quiet when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    echo "kubeop needs Python >= 3.11 (found: $("$PY" --version 2>&1)). Set PYTHON=/path/to/python3.11+." >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    echo "==> creating .venv"
    "$PY" -m venv .venv
fi
stamp=.venv/.kubeop-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "==> installing kubeop and its development tools into .venv"
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e '.[dev]'
    touch "$stamp"
fi
