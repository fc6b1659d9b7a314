# tests/bench/user_gpt.mk: `make bench-user-gpt` (the Makefile includes this file).
#
# A GPT written from the public calls (ag_scaled_dot_product_attention and
# linear layers, no ag_gpt) against ag_gpt: GPT-2 small's body at T 2048
# with and without dropout on the attention weights, and one step at
# T 8192, each in a process of its own: step times and peak RSS as a
# markdown table (tests/bench/user_gpt.c; tens of minutes, one thread).
# USER_GPT_FLAGS=--smoke: the table on a toy in seconds; --rounds N.
USER_GPT_FLAGS ?=
$(BUILD)/user_gpt: tests/bench/user_gpt.c $(LIB32)
	$(CC) $(AG_FLAGS) $(CFLAGS) $< $(LIB32) -o $@ $(LDLIBS)

.PHONY: bench-user-gpt user-gpt-test
bench-user-gpt: $(BUILD)/user_gpt
	OMP_WAIT_POLICY=passive $(BUILD)/user_gpt $(USER_GPT_FLAGS)

# The toy user GPT on ag_gpt's weights gives ag_gpt's loss, its attentions
# take the flash path with and without dropout, it trains; the table runs.
user-gpt-test: $(BUILD)/user_gpt
	$(BUILD)/user_gpt --check
	$(BUILD)/user_gpt --smoke > $(BUILD)/user_gpt_smoke.md
TEST_SUITES += user-gpt-test
