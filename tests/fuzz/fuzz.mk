# tests/fuzz/fuzz.mk: libFuzzer targets for the two parsers of outside input,
# the safetensors reader (ag_safetensors_parse) and the data-file reader
# (ag_pairs_parse), built with clang under ASan + UBSan into build-fuzz/.
#
#   make fuzz                      each target for FUZZ_SECONDS (default 300)
#   make fuzz FUZZ_SECONDS=60
#   make fuzz-replay               every seed (and regression input) once
#
# The seeds come from tests/st_corpus.h (the corrupt and valid files the
# Criterion tests check), two small reference checkpoints, runs of lines of
# examples/data/eng-fra.tsv and one file per kind of bad data line.  The
# fuzzers grow their corpora in build-fuzz/corpus/; an input that crashes
# is written to build-fuzz/crash-* (copy it into tests/fuzz/regress/<target>/
# once fixed, so fuzz-replay keeps checking it).

FUZZ_DIR     ?= build-fuzz
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 300
# clang 14 does not define __SANITIZE_ADDRESS__ under -fsanitize=address (GCC
# does); the library keys its ifunc dispatch (target_clones) off it.
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
                -D__SANITIZE_ADDRESS__=1
FUZZ_CFLAGS  := $(AG_FLAGS) -O1 -g $(FUZZ_SAN) -Wno-pass-failed
FUZZ_TARGETS := fuzz_safetensors fuzz_pairs
FUZZ_OBJ     := $(LIB_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
FUZZ_BIN     := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/%)
FUZZ_SEEDED  := $(FUZZ_DIR)/seeds/.done
FUZZ_OPTS    := -max_len=65536 -timeout=10 -print_final_stats=1
FUZZ_ENV     := ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.PHONY: fuzz fuzz-build fuzz-replay

-include $(FUZZ_OBJ:.o=.d)

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_DIR)/libattograd.a: $(FUZZ_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_DIR)/libattograd.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $^ -o $@ -lm

$(FUZZ_DIR)/make_seeds: tests/fuzz/make_seeds.c tests/st_corpus.h include/attograd.h
	@mkdir -p $(dir $@)
	$(CC) $(AG_FLAGS) -Itests -O1 $< -o $@

# Fresh seed directories, then the corpora start from them (kept between runs).
$(FUZZ_SEEDED): $(FUZZ_DIR)/make_seeds examples/data/eng-fra.tsv tests/st_corpus.h
	rm -rf $(FUZZ_DIR)/seeds
	mkdir -p $(FUZZ_DIR)/seeds/safetensors $(FUZZ_DIR)/seeds/pairs
	$(FUZZ_DIR)/make_seeds $(FUZZ_DIR)/seeds/safetensors $(FUZZ_DIR)/seeds/pairs examples/data/eng-fra.tsv
	cp tests/reference/ops.safetensors tests/reference/blocks.safetensors $(FUZZ_DIR)/seeds/safetensors/
	@touch $@

fuzz-build: $(FUZZ_BIN) $(FUZZ_SEEDED)

# Each target for FUZZ_SECONDS; a crash, leak or sanitizer report fails.
fuzz: fuzz-build
	@set -e; for t in safetensors pairs; do \
	  mkdir -p $(FUZZ_DIR)/corpus/$$t; \
	  echo "fuzz_$$t: $(FUZZ_SECONDS) s (log: $(FUZZ_DIR)/fuzz_$$t.log)"; \
	  $(FUZZ_ENV) $(FUZZ_DIR)/fuzz_$$t $(FUZZ_OPTS) -max_total_time=$(FUZZ_SECONDS) \
	    -artifact_prefix=$(FUZZ_DIR)/crash-$$t- $(FUZZ_DIR)/corpus/$$t $(FUZZ_DIR)/seeds/$$t \
	    > $(FUZZ_DIR)/fuzz_$$t.log 2>&1 || { tail -n 60 $(FUZZ_DIR)/fuzz_$$t.log; echo "fuzz_$$t: FAILED"; exit 1; }; \
	  grep -E '^stat::(number_of_executed_units|peak_rss_mb|new_units_added)' $(FUZZ_DIR)/fuzz_$$t.log | sed "s/^/fuzz_$$t: /"; \
	  grep -E '^Done [0-9]+ runs' $(FUZZ_DIR)/fuzz_$$t.log | sed "s/^/fuzz_$$t: /"; \
	done; echo "fuzz: no crash"

# Every seed and every saved regression input, run once.
fuzz-replay: fuzz-build
	@set -e; for t in safetensors pairs; do \
	  dirs="$(FUZZ_DIR)/seeds/$$t"; \
	  if [ -d tests/fuzz/regress/$$t ]; then dirs="$$dirs tests/fuzz/regress/$$t"; fi; \
	  $(FUZZ_ENV) $(FUZZ_DIR)/fuzz_$$t $(FUZZ_OPTS) -runs=0 $$dirs > $(FUZZ_DIR)/replay_$$t.log 2>&1 \
	    || { tail -n 60 $(FUZZ_DIR)/replay_$$t.log; echo "fuzz-replay: fuzz_$$t FAILED"; exit 1; }; \
	  echo "fuzz-replay: fuzz_$$t: $$(ls $$dirs | wc -l) inputs, no crash"; \
	done
