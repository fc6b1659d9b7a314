# tests/explorer/glance.mk: `make test` clicks the model at a glance (the
# overview, the model view, the head lines) on the translator's and the
# GPT's pages, explorer and live, in headless chromium
# (tests/explorer/test_glance.sh; about a minute).
.PHONY: glance-test
glance-test: $(BUILD)/translate $(BUILD)/gpt $(BUILD)/ladder wasm
	bash tests/explorer/test_glance.sh $(BUILD)
TEST_SUITES += glance-test
