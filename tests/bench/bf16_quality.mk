# tests/bench/bf16_quality.mk: `make bench-bf16-quality` (the Makefile
# includes this file).
#
# Does training with bf16 products end where fp32 does?  The GPT example and
# the toy translator over 5 seeds each, the ladder's rungs and 50 steps of
# GPT-2 small's body, in fp32 and in bf16 (tests/bench/bf16_quality.py: a
# markdown table with a verdict per row on stdout, the loss curves as
# $(BF16_QUALITY_SVG)); about half an hour on one thread.
BF16_QUALITY_SVG ?= $(BUILD)/bf16_loss.svg
BF16_QUALITY_FLAGS ?=
.PHONY: bench-bf16-quality bf16-quality-test
bench-bf16-quality: $(BUILD)/gpt $(BUILD)/translate $(BUILD)/ladder
	/usr/bin/python3 tests/bench/bf16_quality.py $(BUILD) $(BF16_QUALITY_SVG) $(BF16_QUALITY_FLAGS)

# The same runs on toy sizes (2 seeds, a few steps): the script and its
# verdicts work, in seconds.
bf16-quality-test: $(BUILD)/gpt $(BUILD)/translate $(BUILD)/ladder
	/usr/bin/python3 tests/bench/bf16_quality.py $(BUILD) $(BUILD)/bf16_loss_smoke.svg --seeds 2 --smoke \
	  > $(BUILD)/bf16_quality_smoke.md
TEST_SUITES += bf16-quality-test
