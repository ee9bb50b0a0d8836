# The two commands: `make run` and `make test`. Everything else is a step they share.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
# the install also compiles param_server's table and zo_pair's sign stream (setup.py), so
# their sources are in the stamp
BUILD_FILES := pyproject.toml setup.py worker/tessera_ml/algorithms/param_server/native_table.c \
	worker/tessera_ml/algorithms/zo_pair/native_signs.c
STAMP := $(VENV)/.installed-$(shell cat $(BUILD_FILES) | cksum | cut -d' ' -f1)
PYTEST_ARGS ?=
# processes for the tests that may share the machine; those marked serial run after them, alone
PYTEST_WORKERS ?= 2
# where pip looks for torch: empty for pip's own index; a machine whose index serves the CUDA
# build can ask for the CPU one with TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
TORCH_INDEX_URL ?=

.PHONY: run test install lint typecheck pytest frontend frontend-test clean

# make run [PORT=8000]: the control plane, the dashboard and the demo parties' workers
run: install frontend
	$(BIN)/tessera up $(if $(PORT),--port $(PORT))

test: install frontend lint typecheck frontend-test pytest

install: $(STAMP)

$(STAMP): $(BUILD_FILES)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first and pinned, so the project's install keeps the build chosen here: the CPU one
	# where the index serves it (or TORCH_INDEX_URL points at one), the CUDA one on a GPU host
	$(BIN)/pip install --quiet $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL)) torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

frontend:
	@if [ -f frontend/package.json ]; then $(MAKE) -C frontend build; fi

frontend-test:
	@if [ -f frontend/package.json ]; then $(MAKE) -C frontend test; fi

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck:
	$(BIN)/mypy

# exit status 5: no test of that kind among those PYTEST_ARGS selected; PYTEST_ARGS with a -m
# of its own runs in one pass
pytest:
ifneq ($(filter -m,$(PYTEST_ARGS)),)
	$(BIN)/pytest $(PYTEST_ARGS)
else
	$(BIN)/pytest -n $(PYTEST_WORKERS) -m "not serial" $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(BIN)/pytest -m serial $(PYTEST_ARGS) || [ $$? -eq 5 ]
endif

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache frontend/node_modules frontend/dist
