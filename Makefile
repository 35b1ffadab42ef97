PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test bench demo clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --config-settings editable_mode=compat -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" bench/run-all

demo: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python demo/demo.py

clean:
	rm -rf $(VENV) build *.egg-info
