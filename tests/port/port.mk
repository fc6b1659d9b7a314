# tests/port/port.mk: the builds beyond the default one (the Makefile
# includes this file).  docs/building.md explains them; .ci/run runs them.
#
#   make cell CELL=clang-O0-omp0   one cell of the matrix: compiler, -O level,
#                                  OpenMP on (omp1) or off (omp0), with -Werror,
#                                  into build-cells/<cell>; then the Criterion
#                                  suites (float and double)
#   make matrix                    every cell of MATRIX, each timed
#   make omp-parity                the OpenMP and the pthreads (OPENMP=0) builds
#                                  train the translator for an epoch on 2
#                                  threads: the checkpoints must be equal bytes
#   make arm64-test                cross-compiled with aarch64-linux-gnu-gcc:
#                                  gradcheck and a named subset of the suites
#                                  under qemu-aarch64 (as root, the tools are
#                                  installed with apt-get when missing)
#   make subset-test               that subset, natively

.PHONY: cell matrix omp-parity subset-test arm64-deps arm64-test port-clean

# ---- the matrix: {gcc, clang} x {-O0, -O2} x {OpenMP, pthreads} ------------
# The -O0 cells are checking builds too (-DAG_CHECKS: fresh gradient buffers
# filled with NaN, src/core/graph.c).
MATRIX ?= gcc-O2-omp1 gcc-O2-omp0 gcc-O0-omp1 gcc-O0-omp0 clang-O2-omp1 clang-O2-omp0 clang-O0-omp1 clang-O0-omp0
CELL   ?= gcc-O2-omp1
cell_word = $(word $(2),$(subst -, ,$(1)))
CELL_DIR := build-cells/$(CELL)

cell: check-criterion
	$(MAKE) --no-print-directory BUILD=$(CELL_DIR) CC=$(call cell_word,$(CELL),1) \
	  CFLAGS="-$(call cell_word,$(CELL),2) -g $(if $(filter O0,$(call cell_word,$(CELL),2)),-DAG_CHECKS)" OPENMP=$(patsubst omp%,%,$(call cell_word,$(CELL),3)) WERROR=1 \
	  all $(CELL_DIR)/test_f64 $(CELL_DIR)/test_f32
	$(CELL_DIR)/test_f64
	$(CELL_DIR)/test_f32

# One line per cell: passed or FAILED, and its minutes.
matrix:
	@mkdir -p build-cells; rm -f build-cells/summary; fail=0; \
	for c in $(MATRIX); do \
	  t0=$$(date +%s); \
	  if $(MAKE) --no-print-directory cell CELL=$$c > build-cells/$$c.log 2>&1; then r=passed; else r=FAILED; fail=1; fi; \
	  t=$$(( $$(date +%s) - t0 )); \
	  printf 'matrix: %-14s %s in %d:%02d\n' $$c $$r $$((t / 60)) $$((t % 60)) | tee -a build-cells/summary; \
	  if [ $$r = FAILED ]; then tail -n 30 build-cells/$$c.log; fi; \
	done; exit $$fail

# ---- the pthreads build gives the OpenMP build's bits ---------------------
omp-parity:
	$(MAKE) --no-print-directory BUILD=build-cells/parity-omp1 OPENMP=1 build-cells/parity-omp1/translate
	$(MAKE) --no-print-directory BUILD=build-cells/parity-omp0 OPENMP=0 build-cells/parity-omp0/translate
	head -n 300 examples/data/eng-fra.tsv > build-cells/parity.tsv
	for o in 1 0; do \
	  build-cells/parity-omp$$o/translate train --data build-cells/parity.tsv --epochs 1 --threads 2 --quiet \
	    --out build-cells/parity-omp$$o.safetensors || exit 1; done
	cmp build-cells/parity-omp1.safetensors build-cells/parity-omp0.safetensors
	@echo "omp-parity: OpenMP and pthreads builds wrote the same checkpoint ($$(wc -c < build-cells/parity-omp1.safetensors) bytes)"

# ---- arm64: cross-compiled, run under qemu-aarch64 --------------------------
# Under qemu-user Criterion cannot start its workers (it forks and
# re-executes the program: the second needs binfmt_misc, and qemu-aarch64
# 7.2 on this machine's kernel hangs in a forked child), and Debian 12's arm64 Criterion cannot
# be installed beside the host's (libnanomsg5 differs in version between
# the two architectures, which multiarch forbids).  So under emulation a
# subset of the Criterion files runs through a small runner with the same
# assertions (tests/port/runner.c): the portable kernels against their
# reference loops, the cross-architecture losses and gemm, the bf16
# products; plus gradcheck over every op.  The float subset runs twice: on
# qemu's default CPU ("max", which has FEAT_BF16: the BFMLAL kernel) and on
# a Cortex-A72 (without it: the fp32 kernel on rounded copies), each
# asserting which bf16 kernel it ran.  `make subset-test` runs the same
# programs natively.
PORT_SUITES := tests/test_kernels.c tests/test_losses.c tests/test_gemm.c tests/test_kernels_vs_ref.c tests/test_bf16.c
PORT_DEPS   := $(PORT_SUITES) tests/port/runner.c tests/port/criterion/criterion.h tests/common.h
PORT_FLAGS   = $(filter-out -MMD -MP,$(AG_FLAGS)) -Itests/port

$(BUILD)/port_f32: $(PORT_DEPS) $(LIB32)
	$(CC) $(PORT_FLAGS) $(CFLAGS) $(LDFLAGS) $(PORT_SUITES) tests/port/runner.c $(LIB32) -o $@ $(LDLIBS)
$(BUILD)/port_f64: $(PORT_DEPS) $(LIB64)
	$(CC) $(PORT_FLAGS) -DAG_DOUBLE $(CFLAGS) $(LDFLAGS) $(PORT_SUITES) tests/port/runner.c $(LIB64) -o $@ $(LDLIBS)

subset-test: $(BUILD)/port_f64 $(BUILD)/port_f32
	$(BUILD)/port_f64
	$(BUILD)/port_f32

ARM_CC    ?= aarch64-linux-gnu-gcc
ARM_AR    ?= aarch64-linux-gnu-ar
ARM_BUILD ?= build-arm64
QEMU      ?= qemu-aarch64 -L /usr/aarch64-linux-gnu

arm64-deps:
	@if ! command -v $(ARM_CC) >/dev/null || ! command -v qemu-aarch64 >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "arm64: installing the cross compiler and qemu-user with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      gcc-aarch64-linux-gnu qemu-user >/dev/null || exit 1; \
	  else \
	    echo "arm64: missing tools: run  sudo apt-get install gcc-aarch64-linux-gnu qemu-user"; exit 1; \
	  fi; \
	fi

arm64-test: arm64-deps
	$(MAKE) --no-print-directory BUILD=$(ARM_BUILD) CC=$(ARM_CC) AR=$(ARM_AR) WERROR=$(WERROR) \
	  $(ARM_BUILD)/gradcheck $(ARM_BUILD)/port_f64 $(ARM_BUILD)/port_f32
	$(QEMU) $(ARM_BUILD)/gradcheck | tail -n 1
	$(QEMU) $(ARM_BUILD)/port_f64
	AG_EXPECT_BF16_KERNEL=neonbf16 $(QEMU) $(ARM_BUILD)/port_f32
	AG_EXPECT_BF16_KERNEL="fp32 kernel" $(QEMU) -cpu cortex-a72 $(ARM_BUILD)/port_f32

clean: port-clean
port-clean:
	rm -rf build-cells $(ARM_BUILD)
