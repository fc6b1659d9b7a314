# tests/launch/launch.mk: `make test` checks that the tests which send
# signals pass however they were started: in the foreground, in the
# background, under nohup, with stdin closed, under setsid.
.PHONY: launch-test
launch-test: $(BUILD)/gpt
	bash tests/launch/test_launch.sh $(BUILD)
TEST_SUITES += launch-test
