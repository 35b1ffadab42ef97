PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test bench demo clean compile

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --config-settings editable_mode=compat -e '.[test]'
	touch $(STAMP)

# Byte-compile the checkout as an installed package would be: the commands
# start many times a minute, and PYTHONDONTWRITEBYTECODE may be set.
compile: $(STAMP)
	$(BIN)/python -m compileall -q pantolib

test: compile
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest $(PYTEST_ARGS)

bench: compile
	PATH="$(abspath $(BIN)):$$PATH" bench/run-all

demo: compile
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python demo/demo.py

clean:
	rm -rf $(VENV) build *.egg-info
