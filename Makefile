# attograd: `make` builds the libraries and examples into build/;
# `make test` runs every test suite (installing with apt-get, as root, every
# package the suites use when missing: tests/deps.sh);
# `make run` runs the main job; `make asan` runs the suite under ASan+UBSan.

BUILD    ?= build
CC       ?= cc
# Debug info as DWARF 4 for clang (clang 14 writes DWARF 5 by default, which
# valgrind 3.19 cannot read: make valgrind and the leak checks need it).
AG_DEBUG := $(if $(shell $(CC) --version 2>/dev/null | grep -i clang),-gdwarf-4,-g)
CFLAGS   ?= -O2 $(AG_DEBUG)
# OpenMP: on when the compiler has it (OPENMP=0 or 1 decides).  Without
# it the loops that split among threads run on pthreads, with the same
# results.  Homebrew's libomp with Apple clang: see docs/building.md.
OPENMP_CFLAGS ?= -fopenmp
OPENMP_LIBS   ?= -fopenmp
ifeq ($(origin OPENMP),undefined)
OPENMP := $(shell printf '\043include <omp.h>\nint main(void){return omp_get_max_threads()<1;}\n' | \
            $(CC) $(OPENMP_CFLAGS) -x c - -o /dev/null $(OPENMP_LIBS) >/dev/null 2>&1 && echo 1 || echo 0)
endif
OMP_FLAGS := $(if $(filter 1,$(OPENMP)),$(OPENMP_CFLAGS),-fopenmp-simd -pthread)
OMP_LIBS  := $(if $(filter 1,$(OPENMP)),$(OPENMP_LIBS),-pthread)
# Flags the build needs, kept whatever the user puts in CFLAGS.  One
# rounding per operation (-ffp-contract=off, gcc's default in C11 mode,
# not clang's): the same numbers from either compiler.  No errno from
# sqrt, so that clang vectorises loops that take one.  A call to a
# function never declared is an error in every build (C89 would guess an
# int return and cut a pointer).  WERROR=1 (CI) turns warnings into errors.
AG_FLAGS := -std=c11 -Wall -Wextra -Iinclude -Isrc -MMD -MP -D_POSIX_C_SOURCE=200809L -ffp-contract=off \
            -fno-math-errno -Werror=implicit-function-declaration $(if $(filter -O2 -O3,$(CFLAGS)),-DAG_O2_BUILD) \
            $(OMP_FLAGS) $(if $(filter 1,$(WERROR)),-Werror)
LDLIBS   := $(OMP_LIBS) -lm
# The test scripts link their programs as the library is linked (OpenMP, or
# pthreads where the compiler has no OpenMP: clang without libomp).
export AG_LDLIBS := $(LDLIBS)
# MPI=1: `make` also builds build/gpt-mpi and build/translate-mpi, whose
# train commands split each step among mpirun's processes
# (examples/common/dist_mpi.c, with Open MPI's mpicc flags; see
# docs/building.md).  The library and the other programs stay the same.
MPI_CFLAGS = $(shell mpicc --showme:compile)
MPI_LIBS   = $(shell mpicc --showme:link)
DIST_NONE := $(BUILD)/f32/examples/common/dist_none.o
DIST_MPI  := $(BUILD)/f32/examples/common/dist_mpi.o

LIB_SRC  := $(wildcard src/*/*.c) $(wildcard ops/*.c)
TEST_SRC := $(wildcard tests/*.c)
EXAMPLES := gradcheck attention_demo backward_tour precision_tour # and translate: examples/translate/translate.mk
EX_BIN   := $(foreach e,$(EXAMPLES),$(if $(wildcard examples/$(e).c),$(BUILD)/$(e)))

LIB32 := $(BUILD)/libattograd.a
LIB64 := $(BUILD)/libattograd64.a
OBJ32 := $(LIB_SRC:%.c=$(BUILD)/f32/%.o)
OBJ64 := $(LIB_SRC:%.c=$(BUILD)/f64/%.o)
TOBJ32 := $(TEST_SRC:%.c=$(BUILD)/f32/%.o)
TOBJ64 := $(TEST_SRC:%.c=$(BUILD)/f64/%.o)

.PHONY: all test check-criterion check-mpi run asan clean valgrind bench
.SECONDARY:
all: $(LIB32) $(LIB64) $(EX_BIN)

$(BUILD)/f32/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(AG_FLAGS) $(CFLAGS) -c $< -o $@
$(BUILD)/f64/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(AG_FLAGS) -DAG_DOUBLE $(CFLAGS) -c $< -o $@

$(LIB32): $(OBJ32)
	@rm -f $@
	$(AR) rcs $@ $^
$(LIB64): $(OBJ64)
	@rm -f $@
	$(AR) rcs $@ $^

# gradcheck and backward_tour run in double; the other examples in float.
$(BUILD)/gradcheck: $(BUILD)/f64/examples/gradcheck.o $(LIB64)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)
$(BUILD)/backward_tour: $(BUILD)/f64/examples/backward_tour.o $(LIB64)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)
# attention_demo is four files: attention_paths.c, attention_walk.c and attention_tiles.c beside it.
$(BUILD)/attention_demo: $(addprefix $(BUILD)/f32/examples/attention_,demo.o paths.o walk.o tiles.o) $(LIB32)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)
$(BUILD)/%: $(BUILD)/f32/examples/%.o $(LIB32)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# ---- tests: every test file runs twice, in float and in double ----------
check-criterion:
	@if ! printf '\043include <criterion/criterion.h>\n' | $(CC) $(CFLAGS) -E -x c - >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "Criterion missing: installing libcriterion-dev with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libcriterion-dev >/dev/null || exit 1; \
	  else \
	    echo "Criterion is missing: run  sudo apt-get install libcriterion-dev  (macOS: brew install criterion)"; exit 1; \
	  fi; \
	fi

# Open MPI for the MPI programs, installed like Criterion when missing.
check-mpi:
	@if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "Open MPI missing: installing openmpi-bin and libopenmpi-dev with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null || exit 1; \
	  else \
	    echo "Open MPI is missing: run  sudo apt-get install openmpi-bin libopenmpi-dev  (macOS: brew install open-mpi)"; exit 1; \
	  fi; \
	fi
$(DIST_MPI): examples/common/dist_mpi.c | check-mpi
	@mkdir -p $(dir $@)
	$(CC) $(AG_FLAGS) $(MPI_CFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/test_f32: $(TOBJ32) $(LIB32)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ -lcriterion $(LDLIBS)
$(BUILD)/test_f64: $(TOBJ64) $(LIB64)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ -lcriterion $(LDLIBS)
$(TOBJ32) $(TOBJ64): | check-criterion

# make test runs every suite to its end, even when one fails, and closes
# with one line, 'suites: N passed, N failed', after a line naming those
# that failed (it then exits 1).  A suite is a target that passes or fails on
# its own: the build (all), the two Criterion suites, and the target each
# tests/*/*.mk adds with `TEST_SUITES += <name>-test`.  They run under
# make -k (a failure stops only what needs it) and in parallel under -j;
# each one that passes leaves a mark in $(BUILD)/passed/.
TEST_SUITES := all criterion-f64 criterion-f32
.PHONY: criterion-f64 criterion-f32 test-suites
criterion-f64: check-criterion $(BUILD)/test_f64
	$(BUILD)/test_f64
criterion-f32: check-criterion $(BUILD)/test_f32
	$(BUILD)/test_f32
# Everything the suites run (tests/deps.sh: Criterion, chromium, ImageMagick,
# Graphviz, the wasm toolchain, ...) is installed first, in one apt-get call,
# and the first lines say what was installed.
.PHONY: deps
deps:
	@CC="$(CC)" bash tests/deps.sh install test || \
	  echo "make test: going on: the suites that need what is missing skip or fail, each with its own message"
test: deps
	@rm -rf $(BUILD)/passed
	@$(MAKE) --no-print-directory -k test-suites; st=$$?; pass=0; failed=; \
	for s in $(TEST_SUITES); do \
	  if [ -f $(BUILD)/passed/$$s ]; then pass=$$((pass + 1)); else failed="$$failed $$s"; fi; \
	done; \
	[ -z "$$failed" ] || echo "make test: failed:$$failed"; \
	echo "suites: $$pass passed, $$(echo $$failed | wc -w) failed"; \
	[ -z "$$failed" ] && [ $$st = 0 ]

# ---- sanitizers: a report of any kind (leaks too) fails the target ------
# A checking build (-DAG_CHECKS): every fresh gradient buffer is handed to
# its op's backward full of NaN (src/core/graph.c), so that a backward that
# adds into one where it should store fails its test.
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
SAN_CFLAGS := -O1 -g -DAG_CHECKS $(SAN)
asan: check-criterion
	$(MAKE) BUILD=build-asan CFLAGS="$(SAN_CFLAGS)" LDFLAGS="$(SAN)" all build-asan/test_f32 build-asan/test_f64
	@set -e; for t in test_f64 test_f32; do \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	    build-asan/$$t --jobs 1 > build-asan/$$t.log 2>&1 || { cat build-asan/$$t.log; exit 1; }; \
	  tail -n 3 build-asan/$$t.log; \
	  if grep -E -q 'ERROR: (Address|Leak)Sanitizer|runtime error:' build-asan/$$t.log; then \
	    grep -E -A 20 'ERROR: (Address|Leak)Sanitizer|runtime error:' build-asan/$$t.log | head -60; \
	    echo "asan: sanitizer report in $$t (see build-asan/$$t.log)"; exit 1; fi; \
	done; echo "asan: clean"

# The main job: train the toy translator on nine tenths of the shipped data
# (split by distinct source), print its scores on that training part and on
# the held-out tenth it never saw, then use it.
RUN_MODEL ?= $(BUILD)/translator.safetensors
RUN_FLAGS ?=
run: all
	$(BUILD)/translate split --data examples/data/eng-fra.tsv --train $(BUILD)/run-train.tsv --test $(BUILD)/run-heldout.tsv
	$(BUILD)/translate train --data $(BUILD)/run-train.tsv --test $(BUILD)/run-heldout.tsv --out $(RUN_MODEL) $(RUN_FLAGS)
	$(BUILD)/translate run --model $(RUN_MODEL) "go ." "i lost ." "i'm home ." "he's calm ." "we won ." "i'm ok ."

# The examples under valgrind: 0 errors and nothing definitely lost.
VG := valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite -q
valgrind: all
	$(VG) $(BUILD)/attention_demo > /dev/null
	$(VG) $(BUILD)/gradcheck --op layer_norm > /dev/null
	head -n 200 examples/data/eng-fra.tsv > $(BUILD)/vg.tsv
	$(VG) $(BUILD)/translate train --data $(BUILD)/vg.tsv --out $(BUILD)/vg.safetensors --epochs 1 --quiet
	$(VG) $(BUILD)/translate train --data $(BUILD)/vg.tsv --out $(BUILD)/vg2.safetensors --epochs 1 --threads 2 --quiet
	$(VG) $(BUILD)/translate run --model $(BUILD)/vg.safetensors "go ." > /dev/null
	$(VG) $(BUILD)/translate eval --model $(BUILD)/vg.safetensors --data $(BUILD)/vg.tsv > /dev/null
	$(VG) $(BUILD)/gpt train --data $(BUILD)/vg.tsv --out $(BUILD)/vg-gpt.safetensors --steps 3 --eval-every 3 --quiet
	$(VG) $(BUILD)/gpt sample --model $(BUILD)/vg-gpt.safetensors --prompt "I " --length 20 --seed 1 > /dev/null
	@echo "valgrind: clean"

# ---- the shared libraries and `make install` / `make uninstall` ------------
#
#   make shared                      build/libattograd.so, build/libattograd64.so
#   make install [PREFIX=/usr/local] [DESTDIR=]
#   make uninstall [PREFIX=...] [DESTDIR=...]   removes exactly what install put
#
# install puts the headers (include/attograd*.h) in $(PREFIX)/include; the
# static and shared libraries, float and double, in $(PREFIX)/lib; and
# attograd.pc (float) and attograd64.pc (double: -DAG_DOUBLE) in
# $(PREFIX)/lib/pkgconfig, so that a program builds with
#   cc prog.c $(pkg-config --cflags --libs attograd)
# The shared libraries are built from objects of their own, compiled with
# -fPIC: the static ones stay as they were.

# The soname (CHANGELOG.md): before 1.0 any minor version may break the ABI,
# so it carries the minor version, libattograd.so.0.MINOR (0.1.x shipped as
# libattograd.so.0); from 1.0 the major version alone.
AG_VERSION   := 0.2.0
AG_VPARTS    := $(subst ., ,$(AG_VERSION))
AG_SOVERSION := $(if $(filter 0,$(word 1,$(AG_VPARTS))),0.$(word 2,$(AG_VPARTS)),$(word 1,$(AG_VPARTS)))
PREFIX       ?= /usr/local
INCLUDEDIR   ?= $(PREFIX)/include
LIBDIR       ?= $(PREFIX)/lib
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
INSTALL      ?= install

SO32 := $(BUILD)/libattograd.so
SO64 := $(BUILD)/libattograd64.so
PIC32 := $(LIB_SRC:%.c=$(BUILD)/pic32/%.o)
PIC64 := $(LIB_SRC:%.c=$(BUILD)/pic64/%.o)
AG_HEADERS := $(notdir $(wildcard include/attograd*.h))

.PHONY: shared install uninstall
shared: $(SO32) $(SO64)

$(BUILD)/pic32/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(AG_FLAGS) -fPIC $(CFLAGS) -c $< -o $@
$(BUILD)/pic64/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(AG_FLAGS) -fPIC -DAG_DOUBLE $(CFLAGS) -c $< -o $@

# libattograd.so carries the soname libattograd.so.$(AG_SOVERSION) and exports the public
# ag_ names only (src/attograd.map); the link beside it lets a program linked
# against build/ run with LD_LIBRARY_PATH=build.
define ag_shared
	$(CC) -shared $(CFLAGS) $(LDFLAGS) -Wl,-soname,$(notdir $@).$(AG_SOVERSION) \
	  -Wl,--version-script=src/attograd.map $(filter %.o,$^) -o $@ $(LDLIBS)
	ln -sf $(notdir $@) $@.$(AG_SOVERSION)
endef
$(SO32): $(PIC32) src/attograd.map
	$(ag_shared)
$(SO64): $(PIC64) src/attograd.map
	$(ag_shared)

# attograd.pc and attograd64.pc for the PREFIX given to this make (written
# at every run, so that they never keep another PREFIX).
.PHONY: $(BUILD)/attograd.pc $(BUILD)/attograd64.pc
define ag_pc # name, description, extra cflags
	@mkdir -p $(BUILD)
	@printf '%s\n' 'prefix=$(PREFIX)' 'includedir=$(INCLUDEDIR)' 'libdir=$(LIBDIR)' '' \
	  'Name: $(1)' 'Description: $(2)' 'Version: $(AG_VERSION)' \
	  'Cflags: -I$${includedir}$(3)' 'Libs: -L$${libdir} -l$(1)' 'Libs.private: $(LDLIBS)' > $@
endef
$(BUILD)/attograd.pc:
	$(call ag_pc,attograd,tensors and reverse-mode autodiff in C11 (float),)
$(BUILD)/attograd64.pc:
	$(call ag_pc,attograd64,tensors and reverse-mode autodiff in C11 (double), -DAG_DOUBLE)

install: $(LIB32) $(LIB64) $(SO32) $(SO64) $(BUILD)/attograd.pc $(BUILD)/attograd64.pc
	$(INSTALL) -d $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR)
	$(INSTALL) -m 644 $(AG_HEADERS:%=include/%) $(DESTDIR)$(INCLUDEDIR)
	$(INSTALL) -m 644 $(LIB32) $(LIB64) $(DESTDIR)$(LIBDIR)
	@set -e; for l in attograd attograd64; do \
	  $(INSTALL) -m 755 $(BUILD)/lib$$l.so $(DESTDIR)$(LIBDIR)/lib$$l.so.$(AG_VERSION); \
	  ln -sf lib$$l.so.$(AG_VERSION) $(DESTDIR)$(LIBDIR)/lib$$l.so.$(AG_SOVERSION); \
	  ln -sf lib$$l.so.$(AG_SOVERSION) $(DESTDIR)$(LIBDIR)/lib$$l.so; \
	  echo "installed lib$$l.so.$(AG_VERSION) (and its links) in $(DESTDIR)$(LIBDIR)"; \
	done
	$(INSTALL) -m 644 $(BUILD)/attograd.pc $(BUILD)/attograd64.pc $(DESTDIR)$(PKGCONFIGDIR)

uninstall:
	rm -f $(AG_HEADERS:%=$(DESTDIR)$(INCLUDEDIR)/%)
	rm -f $(foreach l,attograd attograd64,$(DESTDIR)$(LIBDIR)/lib$(l).a \
	  $(DESTDIR)$(LIBDIR)/lib$(l).so $(DESTDIR)$(LIBDIR)/lib$(l).so.$(AG_SOVERSION) \
	  $(DESTDIR)$(LIBDIR)/lib$(l).so.$(AG_VERSION) $(DESTDIR)$(PKGCONFIGDIR)/$(l).pc)

-include $(PIC32:.o=.d) $(PIC64:.o=.d)

clean:
	rm -rf build build-asan build-fuzz

# Header dependencies of every object built (examples', bench's and fuzz's
# too: a changed header must rebuild whatever includes it).
-include $(OBJ32:.o=.d) $(OBJ64:.o=.d) $(TOBJ32:.o=.d) $(TOBJ64:.o=.d) $(DIST_NONE:.o=.d) $(DIST_MPI:.o=.d) \
         $(wildcard $(BUILD)/f32/examples/*.d $(BUILD)/f64/examples/*.d)

# Targets that live beside their code (tests/bench/bench.mk, tests/fuzz/fuzz.mk,
# examples/translate/translate.mk, ...).
-include $(wildcard tests/*/*.mk examples/*/*.mk)

# The marks of make test: one per suite that passed (TEST_SUITES is complete
# once the files above are read).
TEST_MARKS := $(TEST_SUITES:%=$(BUILD)/passed/%)
test-suites: $(TEST_MARKS)
$(TEST_MARKS): $(BUILD)/passed/%: %
	@mkdir -p $(@D) && touch $@
