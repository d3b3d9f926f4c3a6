# The two quick-start commands: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test test-pure lint clean replay-env install-check

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

# The tests against the compiled build, after the install check, then a part of them
# against the plain-Python build (test-pure). Four pytest-xdist workers, a test file
# each at a time: most tests wait on servers and child processes, not the CPU.
PARALLEL := -n 4 --dist loadfile
test: lint install-check replay-env
	.ci/postgres-up
	.ci/chromium-up
	$(BIN)/pytest -q $(PARALLEL)
	$(MAKE) --no-print-directory test-pure

# The plain-Python build (TRAWL_PURE=1) in a venv of its own, installed as a regular
# (not editable) install from a copy of what a build reads: no compiled module can
# shadow a source there, and neither src/ nor PYTHONPATH is on the tests' path. The
# files below test every module setup.py compiles (and the Python references of the two
# written in C) and crawl end to end; docs/DEVELOPMENT.md says why these.
PURE := .venv-pure
PURE_STAMP := $(PURE)/trawl.stamp
PURE_TESTS := \
	tests/test_urls.py tests/test_url_fast_paths.py tests/test_conformance_links.py \
	tests/test_links.py tests/test_scope.py tests/test_parser.py tests/test_parser_pieces.py \
	tests/test_recrawl.py tests/test_freshness.py tests/test_seen.py tests/test_committer.py \
	tests/test_known_ids.py tests/test_hosts.py tests/test_per_ip.py tests/test_frontier.py \
	tests/test_compiled.py tests/test_crawl.py tests/test_depth.py tests/test_traps.py \
	tests/test_extract_pool.py tests/test_cli.py tests/test_text.py \
	tests/test_forgotten_hosts.py tests/test_breaker.py

# What a build reads (setup.py, pyproject.toml, README.md and src/), copied to
# $(PURE)/checkout without compiled modules or caches: pip builds a local directory in
# place, and build/ in this tree is `make setup`'s.
PURE_COPY = rm -rf $(PURE)/checkout && mkdir -p $(PURE)/checkout && \
	tar --exclude='*.so' --exclude=__pycache__ --exclude='*.egg-info' \
	-cf - setup.py pyproject.toml README.md src | tar -C $(PURE)/checkout -xf -

$(PURE)/bin/pytest: pyproject.toml
	rm -rf $(PURE)
	$(PYTHON) -m venv $(PURE)
	$(PURE)/bin/pip install --quiet --upgrade pip
	$(PURE_COPY)
	TRAWL_PURE=1 $(PURE)/bin/pip install --quiet '$(PURE)/checkout[dev]'
	touch $@

# trawl installed again whenever a source changes.
$(PURE_STAMP): $(PURE)/bin/pytest setup.py $(shell find src -name '*.py' -o -name '*.c')
	$(PURE_COPY)
	TRAWL_PURE=1 $(PURE)/bin/pip install --quiet --no-deps --no-build-isolation \
		--force-reinstall $(PURE)/checkout
	rm -rf $(PURE)/checkout
	touch $@

# The check line prints where trawl is imported from and fails unless that is $(PURE).
test-pure: $(PURE_STAMP)
	.ci/postgres-up
	env -u PYTHONPATH $(PURE)/bin/python -P -c 'import trawl; print("test-pure:", trawl.__file__)' \
		| grep -F '$(abspath $(PURE))/'
	env -u PYTHONPATH TRAWL_PURE=1 $(PURE)/bin/pytest -q $(PARALLEL) $(PURE_TESTS)

# pip install as a user does it: a wheel built by the pip that comes with $(PYTHON), in
# clean venvs outside this tree, and every feature run from that install (.ci/install-check).
install-check:
	.ci/postgres-up
	PYTHON=$(PYTHON) .ci/install-check

# Crawl benchmark (bench/): serves a generated site on loopback (nginx if installed) and
# prints speed and correctness figures; exits non-zero only for wrong figures.
.PHONY: bench bench-large bench-store bench-workers bench-world bench-world-large

bench: setup
	$(BIN)/python -m bench.crawl --hosts 20 --pages 500

bench-large: setup
	$(BIN)/python -m bench.crawl --hosts 100 --pages 1000

bench-store: setup
	$(BIN)/python -m bench.store --urls 10000000

bench-workers: setup
	.ci/postgres-up
	$(BIN)/python -m bench.workers --hosts 20 --pages 500

# The world benchmark: a simulated web (DNS, TLS, latency, faults) crawled with trawl's
# default politeness; exits non-zero only for wrong counts or a politeness violation.
bench-world: setup
	$(BIN)/python -m bench.world --hosts 10000

bench-world-large: setup
	$(BIN)/python -m bench.world --hosts 100000

# pywb, for tests/test_replay.py, in a venv of its own: it requires brotlipy, whose
# `brotli` module would shadow the Brotli that trawl decodes with.
REPLAY := .venv-replay
replay-env: $(REPLAY)/bin/wayback
$(REPLAY)/bin/wayback:
	$(PYTHON) -m venv $(REPLAY)
	$(REPLAY)/bin/pip install --quiet pywb==2.10.0
