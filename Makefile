# The two quick-start commands: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint

$(BIN)/trawl: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(BIN)/trawl

# Byte-compile trawl as a regular (not editable) install does: every trawl process and
# extract worker then loads in about 0.12 s less, also where PYTHONDONTWRITEBYTECODE
# keeps Python from caching what it compiles (compileall skips files still current).
setup: $(BIN)/trawl
	$(BIN)/python -m compileall -q src

demo: setup
	$(BIN)/trawl demo

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

test: lint
	.ci/postgres-up
	.ci/chromium-up
	$(BIN)/pytest -q

# Crawl benchmark (bench/): serves a generated site on loopback (nginx if installed) and
# prints speed and correctness figures; exits non-zero only for wrong figures.
.PHONY: bench bench-large bench-store bench-workers

bench: setup
	$(BIN)/python -m bench.crawl --hosts 20 --pages 500

bench-large: setup
	$(BIN)/python -m bench.crawl --hosts 100 --pages 1000

bench-store: setup
	$(BIN)/python -m bench.store --urls 10000000

bench-workers: setup
	.ci/postgres-up
	$(BIN)/python -m bench.workers --hosts 20 --pages 500
