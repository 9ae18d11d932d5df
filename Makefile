# cudaep — build the C shared library, run every test layer, install, run the demo.
#
#   make                 build/libcudaep.so and build/include/cudaep.h
#   make test            every test layer in order, stopping at the first that fails
#   make test-ort        CudaEp inside ONNX Runtime 1.30.0 and 1.24.3 (ORT_MODE=cpu: the harness only)
#   make demo            build the library and run cmd/cudaep-demo with -backend=auto
#   make wheel           build/wheel/onnxruntime_ep_cudaep-VERSION-py3-none-manylinux_*.whl (pip install it)
#   make install PREFIX=/opt/cudaep   library, header, pkg-config file, CMake package
#   make ctest-build     the C tests and the example in build/ctests, to carry to a GPU machine
#   make bench           bench/cudaep-bench on the available backend (on sim: not performance numbers)
#   make python-decls    regenerate python/cudaep/_cudaep_h.py (ctypes declarations) from the header
#   make help            this list, and the single layers (make test-c, …)

SHELL := /bin/bash
GO ?= go
PREFIX ?= /usr/local
DESTDIR ?=
BUILD := build
LIB := $(BUILD)/libcudaep.so
HEADER := include/cudaep.h
# The copy the cgo preambles include: Go's build cache only sees headers inside the package.
# Both are tracked (so `go build ./...` works in a fresh clone); edit include/cudaep.h only and
# let make refresh the copy (scripts/header-copy.sh, which fails on a stale committed copy).
HEADER_COPY := capi/cudaep.h
EXPORTS_MAP := capi/exports.map
MODULE := github.com/cudaep/cudaep

# The library version is ep.Version; the pkg-config and CMake files carry it.
VERSION := $(shell sed -n 's/^const Version = "\([^"]*\)"$$/\1/p' ep/*.go 2>/dev/null | head -n 1)

# Python and C tests find the library through this variable (python/cudaep falls back to
# build/ when it is unset).
export CUDAEP_LIBRARY := $(abspath $(LIB))

LAYERS := gofmt vet go fuzz abi nocgo c python wheel ort

# The ort layer runs CudaEp inside these ONNX Runtime builds (from npm's onnxruntime-node, cached
# in ORT_CACHE, which `make clean` keeps), ONNX's node tests from ORT_NODE_TESTS against the first.
# ORT_MODE=cpu runs only the harness's own checks against ORT's CPU EP (no EP library needed).
ORT_VERSIONS ?= 1.30.0 1.24.3
ORT_CACHE ?= .cache/ort
ORT_NODE_TESTS ?= /usr/share/libonnx-testdata/data/node
ORT_MODE ?= ep

# The fuzz layer runs each target for FUZZTIME, as PACKAGE:FuzzName (one package and one exact
# target per `go test -fuzz` run), or for its own count, as PACKAGE:FuzzName:COUNT. Append new
# targets here. FUZZTIME is a count of executions, not a duration: Go 1.26's fuzz coordinator
# can report a bare "context deadline exceeded" when a duration runs out under CPU contention,
# with no failing input (golang/go#75804, fixed in Go 1.27); a count has no deadline to race.
# 100000 executions take 5-10 s per target here; FuzzFuse runs each graph it writes on the
# simulator twice (a decode step and a prompt), 150-400 a second on 2 cores, so it takes fewer.
FUZZTIME ?= 100000x
FUZZ_TARGETS := \
	./capi/handles:FuzzHandleLookup \
	./cudadrv:FuzzParsePTX \
	./cudadrv/sim:FuzzModuleLoadData \
	./ep:FuzzOptionValue \
	./partition:FuzzFuse:12000x \
	./ep/kernels:FuzzGet \
	./capi/ort:FuzzParseOptions

# The folder `make ctest-build` fills: every C test executable, the example, libcudaep.so, a
# CTestTestfile.cmake and run-tests.sh, all relocatable (see docs/BUILDING.md, "GPU runs").
CARRY := $(BUILD)/ctests

# `make wheel` writes the onnxruntime-ep-cudaep wheel here; the wheel layer installs it into a
# fresh virtual environment in build/wheel-venv (both git-ignored, under build/).
WHEEL_DIR := $(BUILD)/wheel

.PHONY: all lib header-copy test $(addprefix test-,$(LAYERS)) python-decls ctest-build demo bench install clean help ort-node-table wheel

all: lib

# --- the library ------------------------------------------------------------------------------

# include/cudaep.h is the source; an edited one is copied into capi/. A copy edited by hand, or
# a commit whose copy differs from its header, is refused rather than built against.
header-copy:
	@scripts/header-copy.sh $(HEADER) $(HEADER_COPY)

# go build decides what is stale (it relinks only when an input changed), so lib always asks it.
lib: header-copy
	@mkdir -p $(BUILD)/include
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -trimpath \
	  -ldflags='-extldflags=-Wl,--version-script=$(abspath $(EXPORTS_MAP)),-soname,libcudaep.so' \
	  -o $(LIB) ./capi
	@rm -f $(BUILD)/libcudaep.h  # cgo's own header: not the public one, never shipped
	@cp $(HEADER) $(BUILD)/include/cudaep.h

# --- tests ------------------------------------------------------------------------------------

test:
	@for layer in $(LAYERS); do \
	  if $(MAKE) --no-print-directory test-$$layer; then \
	    echo "layer $$layer: ok"; \
	  else \
	    echo "layer $$layer: FAILED (make test-$$layer to rerun it)"; exit 1; \
	  fi; \
	done

test-gofmt:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

test-vet: header-copy
	$(GO) vet ./...

test-go: header-copy
	CUDAEP_TEST_BACKEND=$${CUDAEP_TEST_BACKEND:-sim} $(GO) test -race ./...
	@# Allocation budgets again without -race, whose instrumentation allocates. (The demo's
	@# process-wide count also sees the simulator's Go kernels on its stream workers, so it is
	@# asserted on the GPU only; replay's own path is asserted here by graphs and ep.)
	CUDAEP_TEST_BACKEND=$${CUDAEP_TEST_BACKEND:-sim} $(GO) test -count=1 -run 'Alloc' ./...

# go test -fuzz takes one package and one target: run them in turn, stopping at the first
# failure (its crasher is saved under the package's testdata/fuzz/ for `go test` to replay).
test-fuzz:
	@set -e; for target in $(FUZZ_TARGETS); do \
	  pkg=$${target%%:*}; rest=$${target#*:}; name=$${rest%%:*}; count=$(FUZZTIME); \
	  if [ "$$rest" != "$$name" ]; then count=$${rest#*:}; fi; \
	  echo "fuzz $$pkg $$name for $$count"; \
	  $(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$$count $$pkg; \
	done

test-abi: header-copy
	scripts/abi-check.sh
	@$(MAKE) --no-print-directory lib

test-nocgo:
	CGO_ENABLED=0 $(GO) build $$($(GO) list ./... | grep -vxE '$(MODULE)/capi(/ort)?')

test-c: lib
	scripts/require-tools.sh cmake:cmake pkg-config:pkg-config c++:g++
	cmake -S . -B $(BUILD)/ctest -DCUDAEP_LIBRARY=$(CUDAEP_LIBRARY) -DCUDAEP_VERSION=$(VERSION) >/dev/null
	env -u MAKEFLAGS -u MAKELEVEL cmake --build $(BUILD)/ctest -j 2
	ctest --test-dir $(BUILD)/ctest --output-on-failure

# CudaEp inside unmodified ORT (ctests/ort): see scripts/run-ort-tests.sh.
test-ort: lib
	CUDAEP_VERSION=$(VERSION) ORT_VERSIONS="$(ORT_VERSIONS)" ORT_CACHE=$(ORT_CACHE) \
	  ORT_NODE_TESTS=$(ORT_NODE_TESTS) ORT_MODE=$(ORT_MODE) BUILD_DIR=$(BUILD)/ctest-ort \
	  scripts/run-ort-tests.sh

# docs/ONNX_NODE_TESTS.md: every ONNX node test through ORT 1.30.0 on the simulator (after
# make test-ort built the host), with the H200's column from ORT_NODE_GPU_LOG when given (the
# node-tests.log that scripts/ort-gpu-check.sh run leaves in $$OUT).
ort-node-table: test-ort
	CUDAEP_ORT_LIBRARY=$(abspath $(ORT_CACHE))/1.30.0/libonnxruntime.so.1 CUDAEP_LIBRARY=$(abspath $(BUILD))/libcudaep.so \
	  CUDAEP_TEST_BACKEND=sim CUDAEP_ORT_NODE_LIST=1 \
	  $(BUILD)/ctest-ort/ctests/ort/ort_host node_tests --all-ops $(ORT_NODE_TESTS) > $(BUILD)/node-tests-sim.log
	python3 scripts/ort-node-table.py $(BUILD)/node-tests-sim.log $(ORT_NODE_GPU_LOG) > docs/ONNX_NODE_TESTS.md

test-python: lib
	CUDAEP_EXPECTED_VERSION=$(VERSION) scripts/run-python-tests.sh

# The onnxruntime-ep-cudaep wheel (scripts/build_wheel.py, standard library only): libcudaep.so,
# the helpers ONNX Runtime's plugin-EP packaging asks for and the ctypes package, version
# ep.Version, platform tag from the glibc versions the library needs.
wheel: lib
	@test -n "$(VERSION)" || { echo "error: cannot read const Version from ep/" >&2; exit 1; }
	python3 scripts/build_wheel.py --library $(LIB) --version $(VERSION) --out $(WHEEL_DIR)

# The wheel checked (RECORD, tags, Debian's wheel tool), installed offline into a fresh venv and
# run from there on the simulator: scripts/run-wheel-tests.py.
test-wheel: wheel
	python3 scripts/run-wheel-tests.py $(WHEEL_DIR) $(VERSION)

# The ctypes declarations are generated from the header; python/tests/test_generated.py fails
# while the committed file is stale.
python-decls:
	python3 scripts/gen_ctypes.py

# --- carrying the C tests to a GPU machine ----------------------------------------------------

# ctest-build builds the C tests and the example into $(CARRY) with CMake (CUDAEP_CARRY=ON):
# executables that find the copied libcudaep.so beside themselves, plus the folder's own
# CTestTestfile.cmake and run-tests.sh. Carry the folder (and python/ for the Python tests) and
# run `ctest --test-dir build/ctests` or `build/ctests/run-tests.sh` with
# CUDAEP_TEST_BACKEND=cuda; no source tree or Go toolchain is needed there.
ctest-build: lib
	scripts/require-tools.sh cmake:cmake c++:g++
	rm -rf $(CARRY)
	cmake -S . -B $(BUILD)/ctests-tree -DCUDAEP_CARRY=ON -DCUDAEP_CARRY_DIR=$(abspath $(CARRY)) \
	  -DCUDAEP_LIBRARY=$(CUDAEP_LIBRARY) -DCUDAEP_VERSION=$(VERSION) >/dev/null
	env -u MAKEFLAGS -u MAKELEVEL cmake --build $(BUILD)/ctests-tree -j 2
	@echo "ctest-build: $(CARRY) holds $$(ls $(CARRY) | wc -l) files; run it with CUDAEP_TEST_BACKEND=cuda $(CARRY)/run-tests.sh"

# --- demo, install ----------------------------------------------------------------------------

# demo builds the library too: README's Python snippet, run next, loads it.
demo: lib
	$(GO) build -o $(BUILD)/cudaep-demo ./cmd/cudaep-demo
	$(BUILD)/cudaep-demo -backend=auto

# BENCHFLAGS are passed to cudaep-bench (e.g. BENCHFLAGS=-rows=replay).
bench:
	bench/scripts/bench-gpu.sh local $(BENCHFLAGS)

install: lib
	@test -n "$(VERSION)" || { echo "error: cannot read const Version from ep/" >&2; exit 1; }
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/lib/cmake/cudaep $(DESTDIR)$(PREFIX)/include
	install -m 0755 $(LIB) $(DESTDIR)$(PREFIX)/lib/libcudaep.so
	install -m 0644 $(HEADER) $(DESTDIR)$(PREFIX)/include/cudaep.h
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' cmake/cudaep.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/cudaep.pc
	install -m 0644 cmake/cudaepConfig.cmake $(DESTDIR)$(PREFIX)/lib/cmake/cudaep/cudaepConfig.cmake
	sed -e 's|@VERSION@|$(VERSION)|g' cmake/cudaepConfigVersion.cmake.in \
	  > $(DESTDIR)$(PREFIX)/lib/cmake/cudaep/cudaepConfigVersion.cmake

clean:
	rm -rf $(BUILD)

help:
	@sed -n 's/^#   //p' Makefile
	@echo "layers of make test, each also a target: $(addprefix test-,$(LAYERS))"
