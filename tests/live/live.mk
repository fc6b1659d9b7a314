# tests/live/live.mk: `make test` opens the live pages (--live) in headless
# chromium, lets them run the programs compiled to WebAssembly (make wasm)
# and compares what they compute with the native programs
# (tests/live/test_live.sh; a few minutes, most of them the ladder's 500
# steps trained in a worker, the wasm build aside).  The
# pages and their screenshots stay in $(BUILD)/live/.
.PHONY: live-test
live-test: $(BUILD)/translate $(BUILD)/gpt $(BUILD)/backward_tour $(BUILD)/ladder wasm
	bash tests/live/test_live.sh $(BUILD)
TEST_SUITES += live-test

# `make live-times`: each live page's size, its time to a first computed
# picture in headless chromium and the tour's training step in the page
# against native (tests/live/time_live.sh, on the pages live-test leaves;
# about two minutes; a measurement: on a quiet machine, not in make test).
.PHONY: live-times
live-times: live-test
	bash tests/live/time_live.sh $(BUILD)
