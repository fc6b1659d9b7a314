# make test also runs the example programs (tests/examples/test_examples.sh).
.PHONY: examples-test
examples-test: $(BUILD)/gradcheck $(BUILD)/attention_demo $(BUILD)/backward_tour $(BUILD)/precision_tour
	bash tests/examples/test_examples.sh $(BUILD)
TEST_SUITES += examples-test
