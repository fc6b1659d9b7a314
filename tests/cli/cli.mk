# tests/cli/cli.mk: the translate CLI on bad flags, bad data files and model
# files of the wrong kind (tests/cli/test_cli.sh); part of make test.
.PHONY: cli-test
cli-test: $(BUILD)/translate
	bash tests/cli/test_cli.sh $(BUILD)
TEST_SUITES += cli-test
