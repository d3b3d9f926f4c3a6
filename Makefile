# The two quick-start commands: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint clean replay-env install-check

# The editable install skips the mypyc build (TRAWL_PURE): the rule below runs it with
# the venv's own mypy, once, and again whenever a source of trawl changes.
$(BIN)/trawl: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	TRAWL_PURE=1 $(BIN)/pip install --quiet -e '.[dev]'
	touch $(BIN)/trawl

# setup.py's modules compiled to C next to their sources (tests/conftest.py refuses to
# run against a compiled module older than its source). Every source is a prerequisite:
# a compiled module is built with the types of the modules it imports. The old build goes
# first (here and in build/, which a wheel is made from), so that a module taken off the
# list is imported from its source again.
COMPILED_STAMP := build/compiled.stamp
$(COMPILED_STAMP): $(BIN)/trawl setup.py $(shell find src -name '*.py' -o -name '*.c')
	rm -rf build/lib.* src/*.so
	find src/trawl -name '*.so' -delete
	$(BIN)/python setup.py --quiet build_ext --inplace
	mkdir -p build && touch $@

# Byte-compile trawl as a regular (not editable) install does: every trawl process and
# extract worker then loads in about 0.12 s less, also where PYTHONDONTWRITEBYTECODE
# keeps Python from caching what it compiles (compileall skips files still current).
setup: $(COMPILED_STAMP)
	$(BIN)/python -m compileall -q src

# Back to the plain-Python build (run the tests with TRAWL_PURE=1 after it).
clean:
	rm -rf build src/*.so
	find src/trawl -name '*.so' -delete

demo: setup
	$(BIN)/trawl demo

lint: setup
	$(BIN)/ruff check setup.py src tests bench
	$(BIN)/ruff format --check setup.py src tests bench
	$(BIN)/mypy

# The tests, after the install check (pytest's summary stays the last line).
test: lint install-check replay-env
	.ci/postgres-up
	.ci/chromium-up
	$(BIN)/pytest -q

# pip install as a user does it: a wheel built by the pip that comes with $(PYTHON), in
# clean venvs outside this tree, and every feature run from that install (.ci/install-check).
install-check:
	.ci/postgres-up
	PYTHON=$(PYTHON) .ci/install-check

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

# pywb, for tests/test_replay.py, in a venv of its own: it requires brotlipy, whose
# `brotli` module would shadow the Brotli that trawl decodes with.
REPLAY := .venv-replay
replay-env: $(REPLAY)/bin/wayback
$(REPLAY)/bin/wayback:
	$(PYTHON) -m venv $(REPLAY)
	$(REPLAY)/bin/pip install --quiet pywb==2.10.0
