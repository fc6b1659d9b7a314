# tests/live/live.mk: `make test` opens the live pages (--live) in headless
# chromium, lets them run the programs compiled to WebAssembly (make wasm)
# and compares what they compute with the native programs
# (tests/live/test_live.sh; about a minute, the wasm build aside).  The
# pages and their screenshots stay in $(BUILD)/live/.
.PHONY: live-test
live-test: $(BUILD)/translate $(BUILD)/gpt $(BUILD)/backward_tour $(BUILD)/ladder wasm
	bash tests/live/test_live.sh $(BUILD)
TEST_SUITES += live-test
