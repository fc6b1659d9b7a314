# tests/gpt/gpt.mk: `make test` runs tests/gpt/test_gpt_cli.sh: bad flags,
# a short train / eval / sample round trip, and --resume.
.PHONY: gpt-test
gpt-test: $(BUILD)/gpt
	bash tests/gpt/test_gpt_cli.sh $(BUILD)
TEST_SUITES += gpt-test

