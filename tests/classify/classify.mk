# tests/classify/classify.mk: `make test` runs tests/classify/test_classify.sh:
# bad flags and data, a full training run's accuracy, the same seed's same
# numbers, and the figures docs/classifier.md quotes.
.PHONY: classify-test
classify-test: $(BUILD)/classify
	bash tests/classify/test_classify.sh $(BUILD) $(DOCS_REFERENCE)
TEST_SUITES += classify-test
