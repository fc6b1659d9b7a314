# tests/bench/bench.mk: `make bench` (the Makefile includes this file).
#
# Builds $(BUILD)/bench against the float library and runs it: sgemm against
# OpenBLAS, attention against PyTorch, translator training against
# tests/reference/translator.py, at 1 and 2 threads.  OpenBLAS is linked into
# the benchmark only, when pkg-config finds it; PyTorch is Debian's
# (/usr/bin/python3).  Nothing is installed: missing comparisons are named,
# with the apt-get line, and attograd's figures are printed alone.
# The table goes to stdout and to $(BENCH_OUT).

BENCH_OUT     ?= $(BUILD)/bench.md
BENCH_FLAGS   ?=
BENCH_PYTHON  ?= /usr/bin/python3
BENCH_WAIT    ?= passive
BENCH_BLAS_LIBS := $(shell pkg-config --libs openblas 2>/dev/null)
BENCH_BLAS_CFLAGS := $(if $(BENCH_BLAS_LIBS),-DHAVE_OPENBLAS $(shell pkg-config --cflags openblas 2>/dev/null))

# The classifier's section runs examples/classify's model and data code.
BENCH_CLASSIFY := examples/classify/model.c examples/classify/data.c
$(BUILD)/bench: tests/bench/bench.c tests/bench/gpt.h tests/bench/classifier.h tests/bench/scale.h tests/bench/long.h \
                examples/translate/seq2seq_data.h \
                examples/classify/classify.h $(BENCH_CLASSIFY) $(LIB32)
	$(CC) $(AG_FLAGS) $(CFLAGS) $(BENCH_BLAS_CFLAGS) $< $(BENCH_CLASSIFY) $(LIB32) -o $@ $(BENCH_BLAS_LIBS) $(LDLIBS)

# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (set on some machines) would make
# OpenBLAS run a kernel other than its best for this CPU: not for a benchmark.
# OMP_WAIT_POLICY=passive (attograd's and PyTorch's OpenMP alike): on a
# machine shared with other busy programs, a thread that spins at a barrier
# takes the core its partner needs, and two threads run slower than one.
bench: $(BUILD)/bench
	@if [ -z "$(BENCH_BLAS_LIBS)" ]; then \
	  echo "bench: OpenBLAS not found: sgemm without a comparison (sudo apt-get install libopenblas-dev pkg-config)"; fi
	@if ! $(BENCH_PYTHON) -c 'import torch' >/dev/null 2>&1; then \
	  echo "bench: PyTorch not found for $(BENCH_PYTHON): no comparison (sudo apt-get install python3-torch)"; fi
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=$(BENCH_WAIT) $(BUILD)/bench --out $(BENCH_OUT) --python $(BENCH_PYTHON) $(BENCH_FLAGS)

# The GPT's step at three sizes, up to GPT-2 small's body (minutes: not part
# of `make bench`).
.PHONY: bench-scale
bench-scale: $(BUILD)/bench
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=$(BENCH_WAIT) $(BUILD)/bench --only scale --out $(BUILD)/bench-scale.md --python $(BENCH_PYTHON) $(BENCH_FLAGS)

# GPT-2 small's body at B 1 and T 512 to 4096, one thread, against the
# PyTorch twin (tens of minutes: not part of `make bench`).
# BENCH_FLAGS=--smoke runs the section on a toy model in seconds.
.PHONY: bench-long
bench-long: $(BUILD)/bench
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=$(BENCH_WAIT) $(BUILD)/bench --only long --out $(BUILD)/bench-long.md --python $(BENCH_PYTHON) $(BENCH_FLAGS)
