# KV-offload rollout harness. `make help` lists the targets.
# Every target that needs the virtual environment creates it first, so `make demo` and `make test` work on a fresh clone.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HARNESS := $(VENV)/bin/harness
STAMP := $(VENV)/.installed-stamp
RESULTS ?= results
PYTEST_ARGS ?=
# make test runs the suite in this many worker processes (pytest-xdist, whole files per worker: most tests wait on
# simulated servers, so two workers nearly halve the time on two cores); TEST_JOBS=0 runs it in one process.
TEST_JOBS ?= 2

# make benchmark: the default real scenario; model and image overridable from the environment.
BENCH_SCENARIO ?= scenarios/vllm-cpu-pilot.yaml
BENCH_IMAGE ?=
BENCH_MODEL ?=
# the engine's own check of every arm must run (docs/validation.md); BENCH_VALIDATION= to let a run go unvalidated
BENCH_VALIDATION ?= --require-validation

.DEFAULT_GOAL := help
.PHONY: help install test test-e2e demo benchmark perf decision-bench coverage-bench lint typecheck clean-venv cleanup

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  make %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required (set PYTHON=python3.11 or newer)")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP) ## create .venv and install the harness with its dev tools (idempotent)

test: $(STAMP) ## run the default test suite (unit, integration, reliability; no Docker needed)
	@bash scripts/install-chromium.sh || echo "warning: could not install chromium; the browser report test will fail"
	@$(PY) -m pytest -n $(TEST_JOBS) --dist loadfile $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests"; exit 1; fi; exit $$rc

test-e2e: $(STAMP) ## opt-in end-to-end tier: slow simulator tests, then real dockerd, a Docker-launched simulator, a real vLLM on the CPU
	@$(PY) -m pytest -m slow $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "error: pytest collected no slow tests"; exit 1; fi; exit $$rc
	bash scripts/e2e/run-e2e.sh

demo: $(STAMP) ## run the simulated rollout (baseline, CPU tier, tiered) and print where the report is (exit 0 on any verdict)
	@$(HARNESS) run scenarios/demo-sim.yaml --out $(RESULTS) --no-verdict-exit

benchmark: $(STAMP) ## GPU boxes: run the real vLLM CPU-tier pilot (BENCH_SCENARIO, BENCH_IMAGE, BENCH_MODEL)
	@$(HARNESS) gpu-check
	@$(HARNESS) run $(BENCH_SCENARIO) --out $(RESULTS) $(BENCH_VALIDATION) \
	  $(if $(BENCH_IMAGE),--set engine.image=$(BENCH_IMAGE)) $(if $(BENCH_MODEL),--set engine.model=$(BENCH_MODEL))

# The benchmarks live in tools/ (outside the installed package) and run from the repository root.
perf: $(STAMP) ## print performance figures (load path, analysis, simulator, report); exit 1: a goal missed, 3: a figure not measured
	$(PY) -m tools.perf

# make decision-bench: the statistics' calibration on the virtual clock (coverage, bias, A/A false go/no-go, power;
# docs/statistics.md "Calibration"); at most DECISION_MINUTES of rollouts started, over DECISION_JOBS processes.
DECISION_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
DECISION_MINUTES ?= 15
DECISION_AA_RUNS ?= 200
DECISION_BENEFIT_RUNS ?= 40
DECISION_COVERAGE_RUNS ?= 60
# the verdict rows' steps: 10 modelled seconds cannot resolve the p99 rule (docs/statistics.md, "Calibration")
DECISION_STEP_S ?= 33
decision-bench: $(STAMP) ## calibration of the statistics over many simulated rollouts on the virtual clock (~15-20 min on 2 cores)
	$(PY) -m tools.decision_bench.calibrate --out $(RESULTS)/decision-bench --jobs $(DECISION_JOBS) \
	  --max-minutes $(DECISION_MINUTES) --aa-runs $(DECISION_AA_RUNS) --benefit-runs $(DECISION_BENEFIT_RUNS) \
	  --coverage-runs $(DECISION_COVERAGE_RUNS) --decision-step-s $(DECISION_STEP_S)

COVERAGE_ROLLOUTS ?= 400
coverage-bench: $(STAMP) ## coverage of the ratio intervals (iid vs block bootstrap) on correlated synthetic series (~30 min on one core)
	$(PY) -m tools.bench.coverage --rollouts $(COVERAGE_ROLLOUTS) --json $(RESULTS)/coverage-bench.json

lint: $(STAMP) ## ruff and mypy --strict (the product, tools/ and tests/support/)
	$(VENV)/bin/ruff check harness tools tests
	$(VENV)/bin/mypy harness tools tests/support

cleanup: $(STAMP) ## stop and remove servers/containers of runs whose harness process is gone (never a live run)
	$(HARNESS) cleanup --all-stale

clean-venv: ## remove the virtual environment
	rm -rf $(VENV)
