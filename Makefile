# attention-scaling: `make serve` and `make test` set everything up from a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PORT   ?= 5006
ARGS   ?=

.PHONY: serve test bench bench-quick chromium clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

# Editable install with the test extras; redone when pyproject.toml changes.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e ".[test]"
	touch $@

## serve: create .venv if missing, install, and serve the app on http://127.0.0.1:$(PORT)/
serve: $(STAMP)
	$(BIN)/attention-scaling serve --port $(PORT) $(ARGS)

## chromium: make sure a Chromium exists for the browser tests
chromium: $(STAMP)
	PLAYWRIGHT=$(BIN)/playwright scripts/ensure-chromium

## nginx: make sure Debian's nginx exists for the reverse-proxy tests (installed when root)
.PHONY: nginx
nginx:
	scripts/ensure-nginx

## test: install, make sure Chromium exists, run the whole suite (browser tests included),
## after the JavaScript's lint and unit tests: one process per core (TEST_JOBS;
## scripts/run-tests)
test: js-test $(STAMP) chromium nginx
	PYTHON=$(BIN)/python scripts/run-tests $(ARGS)

# eslint and its configs from package-lock.json; redone when it changes.
NODE_STAMP := node_modules/.installed
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

## js-test: eslint on the browser programs (assets/js) and their tests, then their unit tests
## (node's test runner, tests/js/)
.PHONY: js-test
js-test: $(NODE_STAMP)
	npx --no-install eslint assets/js tests/js eslint.config.js
	node --test tests/js/

## test-docker: build the Dockerfile offline (local stand-in base image, host wheelhouse),
## lint it with hadolint, run it read-only under podman and smoke-test it in Chromium
.PHONY: test-docker
test-docker: $(STAMP) chromium
	PYTHON=$(BIN)/python scripts/docker-test-prepare
	$(BIN)/python -m pytest -m docker $(ARGS)

## bench: the benchmark suite (table printed, JSON written to benchmarks/results/)
bench: $(STAMP) chromium
	$(BIN)/python -m benchmarks.run $(ARGS)

## bench-quick: the same with few iterations (CI runs it, when time allows, to keep it working)
bench-quick: $(STAMP) chromium
	$(BIN)/python -m benchmarks.run --quick $(ARGS)

## loadtest: 300 concurrent websocket sessions driven at a human rate, then 1,000 open/close
## cycles (latency, errors, memory; JSON in benchmarks/results/), ~20-30 minutes, against the
## set-up docs/deploy.md recommends for a full class: two processes behind sticky nginx
## (LOADTEST_SERVER; LOADTEST_SERVER= tests one process). ARGS=--quick: a one-minute smoke
## run; ARGS="--burst 300": a class opening the link in the same second (time to first chart),
## then 2 minutes of driving; more options in `python -m benchmarks.loadtest --help`
LOADTEST_SERVER ?= --backends 2
.PHONY: loadtest
loadtest: $(STAMP) nginx
	$(BIN)/python -m benchmarks.loadtest $(LOADTEST_SERVER) $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache node_modules
