# tests/kernels/kernels.mk: `make test-reference` runs both Criterion suites
# and the gradient checker with every op on its plain reference
# (AG_KERNELS=reference: ops/ without src/kernels/, docs/kernels.md).  The
# comparison of each kernel with its reference is part of the suites
# (tests/test_kernels_vs_ref.c).  CI runs it as its step "reference mode".
.PHONY: test-reference
test-reference: check-criterion $(BUILD)/test_f32 $(BUILD)/test_f64 $(BUILD)/gradcheck
	AG_KERNELS=reference $(BUILD)/test_f64
	AG_KERNELS=reference $(BUILD)/test_f32
	AG_KERNELS=reference $(BUILD)/gradcheck > $(BUILD)/gradcheck-reference.txt || { cat $(BUILD)/gradcheck-reference.txt; exit 1; }
	@tail -n 1 $(BUILD)/gradcheck-reference.txt
