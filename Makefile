# Kaiwo operator — `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# uv drives the virtual environment and the lock file; fetched into .tools/ when absent.
UV_VERSION := 0.13.9
UV := $(shell command -v uv 2>/dev/null || echo $(CURDIR)/.tools/bin/uv)
RUN := $(UV) run --frozen
# The image's tag is the project's version (pyproject.toml), as the manifests and the chart name it.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
IMAGE ?= ghcr.io/silogen/kaiwo-operator-py:$(VERSION)
# Helm's own library (Helm v4, in PyPI's helm-sdkpy wheel) for the chart tests: no helm binary
# ships on PyPI or in Debian.
HELM_SDK := $(CURDIR)/.tools/helm-sdkpy
HELM_SDK_VERSION := 0.1.32
PACKAGES := kaiwo_contracts kaiwo_eventstore kaiwo_kube kaiwo_kubefake kaiwo_envtest kaiwo_sandbox kaiwo_runtime \
            kaiwo_watcher kaiwo_planner kaiwo_executor kaiwo_monitor kaiwo_recorder kaiwo_gateway kaiwo_console kaiwo_cli

.PHONY: help install stack browser lint fmt typecheck layers checks test test-fast crds asyncapi scheduler run demo bench nats-credentials fuzz hostile image deploy-tools

help: ## List the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-12s %s\n", $$1, $$2}'

$(CURDIR)/.tools/bin/uv:
	python3 -m venv $(CURDIR)/.tools
	$(CURDIR)/.tools/bin/pip install --quiet uv==$(UV_VERSION)

# Bytecode is compiled here, once: where PYTHONDONTWRITEBYTECODE is set (as on some CI
# machines) Python never writes it itself, and every process would compile its imports again
# (1.4 s more for a service's start; the tests start hundreds of processes). compileall skips
# what is up to date.
install: $(UV) ## Create .venv with every package and tool, exactly as uv.lock pins them
	$(UV) sync --frozen --all-packages --compile-bytecode
	$(RUN) python -m compileall -q -j 0 libs services cli tests bench

stack: install ## Build the real Kubernetes stack (control plane, kube-scheduler, Kueue, kwok, ...) from pinned Go modules into ~/.cache/kaiwo/k8s-stack; a no-op once built
	$(RUN) python -m kaiwo_envtest build

lint: install ## ruff lint and format check
	$(RUN) ruff check .
	$(RUN) ruff format --check .

fmt: install ## Format and autofix
	$(RUN) ruff format .
	$(RUN) ruff check --fix .

typecheck: install ## mypy (strict but for the Kubernetes fake, the watcher, the executor and the CLI)
	$(RUN) mypy $(addprefix -p ,$(PACKAGES))

layers: install ## import-linter: the layering contracts in .importlinter
	$(RUN) lint-imports

checks: lint typecheck layers ## Every static check

# The console's browser tests drive Debian's chromium over the DevTools protocol (no driver).
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
browser: ## Debian's chromium for the console's browser tests, installed with apt when missing
	@command -v chromium > /dev/null || { \
	  echo "make browser: installing Debian's chromium (apt) for the console's browser tests"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    $(SUDO) apt-get install -y -qq --no-install-recommends chromium; }

# Two workers, each with the test files it is given whole (module fixtures start once), and
# every file of the whole real stack's tests on one of them, heaviest files first
# (tests/scheduling.py): most tests wait on servers they started, so two share two cores well.
# TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
test: checks deploy-tools stack browser ## The whole test suite with every static check (what CI runs)
	$(RUN) pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder)

test-fast: install ## Unit tests only
	$(RUN) pytest tests/unit -q

crds: install ## Regenerate deploy/k8s/crds/ (and the Helm chart's copy) from the pydantic models
	$(RUN) kaiwo crds --output-dir deploy/k8s/crds
	rm -f deploy/helm/kaiwo/crds/*.yaml && cp deploy/k8s/crds/*.yaml deploy/helm/kaiwo/crds/

asyncapi: install ## Regenerate docs/asyncapi.yaml (the public workload events) from the contracts
	$(RUN) kaiwo asyncapi --out docs/asyncapi.yaml

scheduler: install ## Copy deploy/k8s/scheduler into the CLI (kaiwo up installs it) and regenerate compose's config
	cp deploy/k8s/scheduler/scheduler.yaml cli/src/kaiwo_cli/stack/kaiwo-scheduler.yaml
	$(RUN) kaiwo scheduler manifests --compose > deploy/compose/kaiwo-scheduler.yaml

run: install ## The main job: the operator on this machine against the current cluster (kaiwo up $(ARGS))
	$(RUN) kaiwo up $(ARGS)

demo: install ## A simulated cluster (2x8 MI300X, 2x8 H100, 1 CPU node) running a scenario, with a live table (kaiwo demo $(ARGS))
	$(RUN) kaiwo demo $(ARGS)

fuzz: install ## Fuzz every target (bus, kaiwo validate, planning, Kubernetes responses), 100,000 cases each
	HYPOTHESIS_PROFILE=fuzz $(RUN) pytest tests/fuzz -q -p no:cacheprovider --timeout=0 -s

hostile: install ## The hostile bus and manifest corpora through the real consumers, with their tables
	$(RUN) pytest tests/hostile/bus tests/hostile/manifests/test_hostile_manifests.py -q -s -p no:cacheprovider

bench: install ## Benchmarks that print figures
	@# peer_kopf.py and pipeline_envtest.py are parts of pipeline.py, not benchmarks of their own.
	@for b in $(filter-out bench/peer_kopf.py bench/pipeline_envtest.py,$(wildcard bench/*.py)); do \
		echo "== $$b"; $(RUN) python $$b || exit 1; done

nats-credentials: install ## New NATS keys and server config for deploy/compose, deploy/k8s and the Helm chart (rotates every key)
	$(RUN) kaiwo nats credentials --out deploy/compose/nats-credentials
	$(RUN) kaiwo nats credentials --out deploy/k8s/base/nats-credentials --http 127.0.0.1:8222 --partitions 12
	$(RUN) kaiwo nats credentials --out deploy/helm/nats-credentials --http 127.0.0.1:8222 --partitions 12 --helm-values deploy/helm/nats-credentials.yaml

image: ## Build the operator's image (docker build; needs a Docker engine)
	@if ! command -v docker >/dev/null 2>&1; then \
	  echo "make image: docker is not installed; CI checks the Dockerfile and its context without it (tests/unit/deploy/test_image.py)" >&2; exit 2; fi
	@if ! docker info >/dev/null 2>&1; then \
	  echo "make image: no Docker engine answers (docker info failed); start one or build elsewhere with: docker build -f deploy/Dockerfile --build-arg VERSION=$(VERSION) -t $(IMAGE) ." >&2; exit 2; fi
	docker build -f deploy/Dockerfile --build-arg VERSION=$(VERSION) -t $(IMAGE) .


deploy-tools: $(HELM_SDK)/helm_sdkpy/__init__.py ## What the deploy tests need besides .venv: Helm's library

# helm-sdkpy declares Python >= 3.12, yet its wrapper runs on 3.11 (it calls the bundled Go
# library through cffi, which .venv has); so it stays out of uv.lock, which resolves for 3.11.
$(HELM_SDK)/helm_sdkpy/__init__.py: $(UV)
	$(UV) pip install --quiet --no-deps --target $(HELM_SDK) --python-version 3.12 helm-sdkpy==$(HELM_SDK_VERSION)
