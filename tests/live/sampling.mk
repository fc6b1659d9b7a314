# tests/live/sampling.mk: `make test` opens the GPT live page in headless
# chromium, asks it for temperature, top-k, top-p and a seed, and checks the
# distribution it draws against the native program's, and its messages for
# bad values (tests/live/test_sampling_page.sh; half a minute, the wasm
# build aside).
.PHONY: live-sampling-test
live-sampling-test: $(BUILD)/gpt wasm
	bash tests/live/test_sampling_page.sh $(BUILD)
TEST_SUITES += live-sampling-test
