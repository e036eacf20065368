# Kaiwo operator — `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# uv drives the virtual environment and the lock file; fetched into .tools/ when absent.
UV_VERSION := 0.13.9
UV := $(shell command -v uv 2>/dev/null || echo $(CURDIR)/.tools/bin/uv)
RUN := $(UV) run --frozen
PACKAGES := kaiwo_contracts kaiwo_eventstore kaiwo_kube kaiwo_kubefake kaiwo_envtest kaiwo_runtime \
            kaiwo_watcher kaiwo_planner kaiwo_executor kaiwo_monitor kaiwo_recorder kaiwo_cli

.PHONY: help install lint fmt typecheck layers checks test test-fast crds run demo bench nats-credentials fuzz hostile

help: ## List the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-12s %s\n", $$1, $$2}'

$(CURDIR)/.tools/bin/uv:
	python3 -m venv $(CURDIR)/.tools
	$(CURDIR)/.tools/bin/pip install --quiet uv==$(UV_VERSION)

install: $(UV) ## Create .venv with every package and tool, exactly as uv.lock pins them
	$(UV) sync --frozen --all-packages

lint: install ## ruff lint and format check
	$(RUN) ruff check .
	$(RUN) ruff format --check .

fmt: install ## Format and autofix
	$(RUN) ruff format .
	$(RUN) ruff check --fix .

typecheck: install ## mypy (strict for the libraries and the planner)
	$(RUN) mypy $(addprefix -p ,$(PACKAGES))

layers: install ## import-linter: the layering contracts in .importlinter
	$(RUN) lint-imports

checks: lint typecheck layers ## Every static check

test: checks ## The whole test suite with every static check (what CI runs)
	$(RUN) pytest

test-fast: install ## Unit tests only
	$(RUN) pytest tests/unit -q

crds: install ## Regenerate deploy/k8s/crds/ from the pydantic models
	$(RUN) kaiwo crds --output-dir deploy/k8s/crds

run: install ## The main job: the operator on this machine against the current cluster (kaiwo up $(ARGS))
	$(RUN) kaiwo up $(ARGS)

demo: install ## The operator against a fake cluster with two 8-GPU nodes (kaiwo up --fake $(ARGS))
	$(RUN) kaiwo up --fake $(ARGS)

fuzz: install ## Fuzz every target (bus, kaiwo validate, planning, Kubernetes responses), 100,000 cases each
	HYPOTHESIS_PROFILE=fuzz $(RUN) pytest tests/fuzz -q -p no:cacheprovider --timeout=0 -s

hostile: install ## The hostile bus corpus through the real consumers, with its table
	$(RUN) pytest tests/hostile/bus -q -s -p no:cacheprovider

bench: install ## Benchmarks that print figures
	@for b in bench/*.py; do echo "== $$b"; $(RUN) python $$b || exit 1; done

nats-credentials: install ## New NATS keys and server config for deploy/compose and deploy/k8s (rotates every key)
	$(RUN) kaiwo nats credentials --out deploy/compose/nats-credentials
	$(RUN) kaiwo nats credentials --out deploy/k8s/base/nats-credentials --http 127.0.0.1:8222
