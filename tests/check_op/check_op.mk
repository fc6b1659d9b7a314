# tests/check_op/check_op.mk: `make check-op OP=<name>`, the quick loop for
# one op (docs/contributing.md): its gradient-check cases in both kernel
# modes (build/gradcheck --op), its own tests (tests/test_<name>.c), and,
# for it alone (AG_CHECK_OP), the op-table walks of the kernels-vs-
# reference test and of the error walk, in double and in float.  It
# builds the libraries and a Criterion binary of those three test files
# only, $(BUILD)/check_op/<name>_f64 and _f32; make test runs the rest.
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
check-op: check-criterion $(BUILD)/gradcheck $(CHECK_OP_BIN)_f64 $(CHECK_OP_BIN)_f32
	@grep -q 'X($(OP), ' include/attograd_core.h || { echo "check-op: $(OP) is not in the list AG_OPS of include/attograd_core.h"; exit 1; }
	@set -e; for mode in fast reference; do \
	  echo "check-op: build/gradcheck --op $(OP), AG_KERNELS=$$mode"; \
	  AG_KERNELS=$$mode $(BUILD)/gradcheck --op $(OP) > $(CHECK_OP_BIN).gradcheck || \
	    { cat $(CHECK_OP_BIN).gradcheck; exit 1; }; \
	  tail -n 1 $(CHECK_OP_BIN).gradcheck; \
	done
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
