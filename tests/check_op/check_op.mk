# tests/check_op/check_op.mk: `make check-op OP=<name>`, the quick loop for
# one op (docs/contributing.md): its gradient-check cases in both kernel
# modes (build/gradcheck --op); the mutation check, its backward scaled
# by 1.0001 (build/gradcheck --mutate 1.0001 --op), where every case must
# fail but those whose gradient is zero (no error to scale); its float
# edges (tests/edge/float_edges.c --op); its own tests
# (tests/test_<name>.c), and, for it alone (AG_CHECK_OP), the op-table
# walks of the kernels-vs-reference test and of the error walk, in double
# and in float.  It builds the libraries and a Criterion binary of those
# three test files only, $(BUILD)/check_op/<name>_f64 and _f32; make test
# runs the rest.
.PHONY: check-op
ifneq ($(filter check-op,$(MAKECMDGOALS)),)
ifeq ($(OP),)
$(error make check-op needs OP=<name>, an op of the list AG_OPS in include/attograd_core.h)
endif
endif
CHECK_OP_SRC = $(wildcard tests/test_$(OP).c) tests/test_kernels_vs_ref.c tests/test_error_walk.c
CHECK_OP_BIN = $(BUILD)/check_op/$(OP)
$(CHECK_OP_BIN)_f64: $(CHECK_OP_SRC:%.c=$(BUILD)/f64/%.o) $(LIB64)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ -lcriterion $(LDLIBS)
$(CHECK_OP_BIN)_f32: $(CHECK_OP_SRC:%.c=$(BUILD)/f32/%.o) $(LIB32)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ -lcriterion $(LDLIBS)
check-op: check-criterion $(BUILD)/gradcheck $(BUILD)/float_edges64 $(BUILD)/float_edges32 $(CHECK_OP_BIN)_f64 \
          $(CHECK_OP_BIN)_f32
	@grep -q 'X($(OP), ' include/attograd_core.h || { echo "check-op: $(OP) is not in the list AG_OPS of include/attograd_core.h"; exit 1; }
	@set -e; for mode in fast reference; do \
	  echo "check-op: build/gradcheck --op $(OP), AG_KERNELS=$$mode"; \
	  AG_KERNELS=$$mode $(BUILD)/gradcheck --op $(OP) > $(CHECK_OP_BIN).gradcheck || \
	    { cat $(CHECK_OP_BIN).gradcheck; exit 1; }; \
	  tail -n 1 $(CHECK_OP_BIN).gradcheck; \
	done
	@if grep -q '\.backward = NULL' ops/$(OP).c; then \
	  echo "check-op: $(OP) has no backward: no mutation check"; \
	else \
	  echo "check-op: build/gradcheck --mutate 1.0001 --op $(OP): its backward 1e-4 off must fail every case"; \
	  $(BUILD)/gradcheck --mutate 1.0001 --op $(OP) > $(CHECK_OP_BIN).mutate || { cat $(CHECK_OP_BIN).mutate; exit 1; }; \
	  awk -F' *[|] *' '$$2 == "$(OP)" && $$7 == "pass" && $$4 + 0 != 0 { print "check-op: the mutated $(OP) passes case \"" $$3 "\": the strict stage misses a backward 1e-4 off"; bad = 1 } \
	    $$2 == "$(OP)" && $$7 == "pass" && $$4 + 0 == 0 { print "check-op:   case \"" $$3 "\" passes mutated: its gradient is zero (nothing to scale)" } \
	    /^mutation by/ { print "check-op: " $$0 } END { exit bad }' $(CHECK_OP_BIN).mutate; \
	fi
	@echo "check-op: $(OP)'s float forward and backward against the double build's (tests/edge/float_edges.c)"
	@$(BUILD)/float_edges64 --op $(OP) > $(CHECK_OP_BIN).edges64
	@$(BUILD)/float_edges32 --op $(OP) --against $(CHECK_OP_BIN).edges64
	@[ -f tests/test_$(OP).c ] || echo "check-op: no tests/test_$(OP).c (docs/contributing.md asks for one)"
	@set -e; for p in f64 f32; do \
	  echo "check-op: $(OP)'s tests and the op-table walks, $$p"; \
	  AG_CHECK_OP=$(OP) $(CHECK_OP_BIN)_$$p --filter '@($(OP)|error_walk)/*'; \
	  AG_CHECK_OP=$(OP) $(CHECK_OP_BIN)_$$p \
	    --filter 'kernels_vs_ref/@(every_op_of_the_table_on_its_gradcheck_cases|a_forward_in_one_mode_and_its_backward_in_the_other)'; \
	done
	@echo "check-op: $(OP) passed"

# The net under a new op: the list AG_OPS makes the enum and the table
# (a deleted line fails the build of its op, naming its id) and a call to
# an undeclared op fails the build (tests/check_op/test_op_list.sh).
.PHONY: op-list-test print-ag-flags
print-ag-flags:
	@echo '$(AG_FLAGS)'
op-list-test:
	bash tests/check_op/test_op_list.sh "$(CC)"
TEST_SUITES += op-list-test
