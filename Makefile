# The two commands of the README. Both work on a fresh machine: they create .venv, install
# kubeop, and build the control-plane binaries from pinned Go modules into ~/.cache/kubeop
# (first time ~10 min on 2 cores, then cached).
.PHONY: demo test lint unit e2e faults bootstrap binaries bench docs docs-serve

PY := .venv/bin/python

bootstrap:
	@./scripts/bootstrap.sh

binaries: bootstrap
	@./scripts/ensure-go.sh
	@$(PY) -m kubeop cluster build --helm

demo: binaries
	@$(PY) -m examples.application.demo

lint: bootstrap
	.venv/bin/ruff check src tests bench examples
	.venv/bin/ruff format --check src tests bench examples
	.venv/bin/mypy
	.venv/bin/lint-imports

unit: bootstrap
	.venv/bin/pytest tests/unit -q

e2e: binaries
	.venv/bin/pytest tests/e2e -q

# The fault suite at full scale (repetitions, 500-1,000 objects; ~15 min on 2 cores). `make test`
# runs its short version (fewer repetitions and objects, the same assertions and recovery bounds).
# kopf's own e2e suite runs whole here (17 tests, ~3 min), 3 of its tests in `make test`.
faults: binaries
	KUBEOP_FAULTS=full .venv/bin/pytest tests/faults tests/e2e/kopf/test_kopf_suite.py -q

test: binaries lint
	.venv/bin/pytest -q

# The documentation site (docs/, mkdocs.yml) into site/: the generated reference pages are
# refreshed first, then the build fails on any warning (a broken link, a missing API name).
docs: bootstrap
	@$(PY) scripts/docs_gen.py
	@NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet
	@echo "==> site/index.html"

docs-serve: bootstrap
	@$(PY) scripts/docs_gen.py
	@NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve --strict
