# tests/bench/bench.mk: `make bench` (the Makefile includes this file).
#
# Builds $(BUILD)/bench against the float library and runs it: sgemm against
# OpenBLAS, attention against PyTorch, translator training against
# tests/reference/translator.py, at 1 and 2 threads.  OpenBLAS is linked into
# the benchmark only, when pkg-config finds it; PyTorch is Debian's
# (/usr/bin/python3).  Nothing is installed: missing comparisons are named,
# with the apt-get line, and attograd's figures are printed alone.
# The table goes to stdout and to $(BENCH_OUT).

# BENCH_ISA=amx|avx512bf16|avx512|avx2|baseline: attograd, PyTorch and OpenBLAS all at that
# instruction-set level (bench --isa; OpenBLAS's core type set here, as it
# picks its kernels when loaded), so that an AVX-512 machine reports the
# AVX2 and baseline tables too; each level's table goes to a file of its own.
BENCH_ISA     ?=
BENCH_CORETYPE_amx        := SkylakeX
BENCH_CORETYPE_avx512bf16 := SkylakeX
BENCH_CORETYPE_avx512   := SkylakeX
BENCH_CORETYPE_avx2     := Haswell
BENCH_CORETYPE_baseline := Nehalem
BENCH_SUFFIX  := $(if $(BENCH_ISA),-$(BENCH_ISA))
BENCH_OUT     ?= $(BUILD)/bench$(BENCH_SUFFIX).md
BENCH_FLAGS   ?=
BENCH_PYTHON  ?= /usr/bin/python3
BENCH_WAIT    ?= passive
BENCH_BLAS_LIBS := $(shell pkg-config --libs openblas 2>/dev/null)
BENCH_BLAS_CFLAGS := $(if $(BENCH_BLAS_LIBS),-DHAVE_OPENBLAS $(shell pkg-config --cflags openblas 2>/dev/null))

# The classifier's section runs examples/classify's model and data code.
BENCH_CLASSIFY := examples/classify/model.c examples/classify/data.c
$(BUILD)/bench: tests/bench/bench.c tests/bench/gpt.h tests/bench/classifier.h tests/bench/scale.h tests/bench/scale_bf16.h tests/bench/long.h \
                tests/bench/peak.h tests/bench/bf16.h tests/bench/loops.h examples/translate/seq2seq_data.h \
                examples/classify/classify.h $(BENCH_CLASSIFY) $(LIB32)
	$(CC) $(AG_FLAGS) $(CFLAGS) $(BENCH_BLAS_CFLAGS) $< $(BENCH_CLASSIFY) $(LIB32) -o $@ $(BENCH_BLAS_LIBS) $(LDLIBS)

# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (set on some machines) would make
# OpenBLAS run a kernel other than its best for this CPU: not for a benchmark
# (unless BENCH_ISA names a level: then that level's core type).
# OMP_WAIT_POLICY=passive (attograd's and PyTorch's OpenMP alike): on a
# machine shared with other busy programs, a thread that spins at a barrier
# takes the core its partner needs, and two threads run slower than one.
BENCH_ENV = env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
            $(if $(BENCH_ISA),OPENBLAS_CORETYPE=$(or $(BENCH_CORETYPE_$(BENCH_ISA)),unknown)) OMP_WAIT_POLICY=$(BENCH_WAIT)
BENCH_ISA_FLAG = $(if $(BENCH_ISA),--isa $(BENCH_ISA))
bench: $(BUILD)/bench
	@if [ -z "$(BENCH_BLAS_LIBS)" ]; then \
	  echo "bench: OpenBLAS not found: sgemm without a comparison (sudo apt-get install libopenblas-dev pkg-config)"; fi
	@if ! $(BENCH_PYTHON) -c 'import torch' >/dev/null 2>&1; then \
	  echo "bench: PyTorch not found for $(BENCH_PYTHON): no comparison (sudo apt-get install python3-torch)"; fi
	$(BENCH_ENV) $(BUILD)/bench --out $(BENCH_OUT) --python $(BENCH_PYTHON) $(BENCH_ISA_FLAG) $(BENCH_FLAGS)

# The GPT's step at three sizes, up to GPT-2 small's body (minutes: not part
# of `make bench`).
.PHONY: bench-scale
bench-scale: $(BUILD)/bench
	$(BENCH_ENV) $(BUILD)/bench --only scale --out $(BUILD)/bench-scale$(BENCH_SUFFIX).md --python $(BENCH_PYTHON) $(BENCH_ISA_FLAG) $(BENCH_FLAGS)

# The GPT's step at S, M and XL with bf16 products against attograd's fp32
# step, the PyTorch twin's fp32 step and its step under torch.autocast, in
# the same run, and the bf16 targets met or not (tests/bench/scale_bf16.h;
# minutes: not part of `make bench`).  BENCH_FLAGS="--threads 1,2".
.PHONY: bench-scale-bf16
bench-scale-bf16: $(BUILD)/bench
	$(BENCH_ENV) $(BUILD)/bench --only scale-bf16 --out $(BUILD)/bench-scale-bf16$(BENCH_SUFFIX).md --python $(BENCH_PYTHON) $(BENCH_ISA_FLAG) $(BENCH_FLAGS)

# GPT-2 small's body at B 1 and T 512 to 4096, one thread, against the
# PyTorch twin (tens of minutes: not part of `make bench`).
# BENCH_FLAGS=--smoke runs the section on a toy model in seconds.
.PHONY: bench-long
bench-long: $(BUILD)/bench
	$(BENCH_ENV) $(BUILD)/bench --only long --out $(BUILD)/bench-long$(BENCH_SUFFIX).md --python $(BENCH_PYTHON) $(BENCH_ISA_FLAG) $(BENCH_FLAGS)

# The peak memory of GPT-2 small's training step at T 1024 (B 1, one
# thread) as a user writes the loop, and with the fused end of step,
# against the PyTorch twin (minutes: not part of `make bench`).
# BENCH_FLAGS=--smoke runs the section on a toy model in seconds.
.PHONY: bench-loops
bench-loops: $(BUILD)/bench
	$(BENCH_ENV) $(BUILD)/bench --only loops --out $(BUILD)/bench-loops$(BENCH_SUFFIX).md --python $(BENCH_PYTHON) $(BENCH_ISA_FLAG) $(BENCH_FLAGS)

# docs/benchmarks.md's table per instruction-set level: make bench-scale at
# each level the CPU has (BENCH_ISAS="avx2 baseline" for some), written
# between the doc's markers (tests/bench/isa_tables.sh).  Minutes per level.
.PHONY: bench-isa
BENCH_ISAS ?=
bench-isa: $(BUILD)/bench
	BUILD=$(BUILD) bash tests/bench/isa_tables.sh $(BENCH_ISAS)

# llvm-mca's estimate of gemm's micro-kernels (tests/bench/mca.sh: NEON,
# AVX2, AVX-512) written into docs/kernels.md, between its mca markers.
# MCA_MEASURED=FILE (the table of `build/bench --only peak --out FILE`, from
# a quiet x86 machine) adds the measured share of peak to the x86 rows.
.PHONY: mca
MCA_MEASURED ?=
mca:
	@mkdir -p $(BUILD)
	bash tests/bench/mca.sh $(MCA_MEASURED) > $(BUILD)/mca.md
	awk -v f=$(BUILD)/mca.md '/<!-- mca: end -->/ {while ((getline l < f) > 0) print l; skip = 0} !skip {print} \
	  /<!-- mca: begin -->/ {skip = 1}' docs/kernels.md > $(BUILD)/kernels.md.new
	mv $(BUILD)/kernels.md.new docs/kernels.md
