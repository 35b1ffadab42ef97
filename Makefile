PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test bench demo clean compile coverage

# bin/ is installed as copies (the commands themselves): a change there reinstalls
$(STAMP): pyproject.toml $(wildcard bin/*)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --config-settings editable_mode=compat -e '.[test]'
	touch $(STAMP)

# Byte-compile the checkout as an installed package would be: the commands
# start many times a minute, and PYTHONDONTWRITEBYTECODE may be set.
compile: $(STAMP)
	$(BIN)/python -m compileall -q pantolib
	@# the man pages where man(1) looks for a PATH entry's pages (../share/man):
	@# `man panto` works once .venv/bin is on PATH (an editable install leaves them out)
	mkdir -p $(VENV)/share/man/man1 $(VENV)/share/man/man5
	ln -sf $(abspath $(wildcard man/*.1)) $(VENV)/share/man/man1/
	ln -sf $(abspath $(wildcard man/*.5)) $(VENV)/share/man/man5/

test: compile
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest $(PYTEST_ARGS)

# Line and branch coverage of the suite, console scripts included: each
# command the tests spawn writes its own data file (COVERAGE_FILE is absolute,
# so a command run in a test's own directory writes here too).
coverage: compile
	rm -f .coverage .coverage.* .coverage.json
	export COVERAGE_FILE="$(abspath .coverage)"; status=0; \
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m coverage run -m pytest $(PYTEST_ARGS) || status=$$?; \
	$(BIN)/python -m coverage combine -q && \
	$(BIN)/python -m coverage report --precision=1 && \
	$(BIN)/python -m coverage json -q -o .coverage.json && \
	$(BIN)/python -c 'import json; t = json.load(open(".coverage.json"))["totals"]; \
		print("line coverage %.1f%% (%d of %d lines), branch coverage %.1f%% (%d of %d branches)" % ( \
		100 * t["covered_lines"] / t["num_statements"], t["covered_lines"], t["num_statements"], \
		100 * t["covered_branches"] / t["num_branches"], t["covered_branches"], t["num_branches"]))'; \
	exit $$status

bench: compile
	PATH="$(abspath $(BIN)):$$PATH" bench/run-all

demo: compile
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python demo/demo.py

clean:
	rm -rf $(VENV) build *.egg-info .coverage .coverage.*
