#!/usr/bin/env bash
# The release check, as a user meets kubeop before it is on an index:
#   1. `python -m build` makes the sdist and the wheel, and `twine check --strict` reads their
#      metadata as an index would;
#   2. the wheel holds kubeop and its metadata only, at the version kubeop.__version__ says, with the
#      command line's dependencies in the `cli` extra;
#   3. the wheel alone, installed into a fresh venv (no checkout on the path), runs `kubeop init` and
#      `kubeop create api`, and the generated project's README install step and `make test` pass.
# Prints the sizes it sees (wheel; the runtime's site-packages). Needs the control plane's binaries
# (make binaries) for step 3; KEEP=1 keeps the work directory.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
work=$(mktemp -d)
[ "${KEEP:-}" = 1 ] || trap 'rm -rf "$work"' EXIT
echo "==> build: sdist and wheel into $work/dist"
"$PY" -m build --sdist --wheel --outdir "$work/dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
"$PY" -m twine check --strict "$work"/dist/*
wheel=$(ls "$work"/dist/kubeop-*.whl)
"$PY" scripts/check_wheel.py "$wheel"

echo "==> the runtime alone: kubeop from the wheel, no extras"
"$PY" -m venv "$work/runtime"
"$work/runtime/bin/python" -m pip install --quiet "$wheel"
"$work/runtime/bin/python" -c 'import kubeop.manager, kubeop.crd, kubeop.webhook' # an operator's imports
if "$work/runtime/bin/kubeop" --help >"$work/nocli.log" 2>&1; then
    echo "kubeop --help worked without the cli extra: typer is a runtime dependency again" >&2
    exit 1
fi
grep -q "pip install 'kubeop\[cli\]'" "$work/nocli.log" || { cat "$work/nocli.log"; exit 1; }
site=$("$work/runtime/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "runtime site-packages (kubeop and its dependencies, without pip): $(
    du -sk --exclude='pip' --exclude='pip-*' "$site" | awk '{printf "%.1f MB", $1 / 1024}')"

echo "==> a generated project, installed as its README says, tested with the wheel's kubeop"
"$PY" -m venv "$work/venv"
export PATH="$work/venv/bin:$PATH" VIRTUAL_ENV="$work/venv"
unset PYTHONPATH
pip install --quiet "$wheel[cli]"
(
    cd "$work"
    kubeop init --domain example.com --repo github.com/example/memcached-operator --dir memcached-operator
    cd memcached-operator
    kubeop create api --group cache --version v1alpha1 --kind Memcached
    grep -q "pip install -e '.\[dev\]'" README.md
    pip install --quiet -e '.[dev]'
    python -c 'import kubeop, sys; sys.exit(0 if "/venv/" in kubeop.__file__ else f"kubeop from {kubeop.__file__}")'
    make test PYTHON=python
)
echo "==> dist ok: $(basename "$wheel") and its sdist"
