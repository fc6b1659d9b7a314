# tests/explorer/explorer.mk: `make test` opens the explorer pages (--html)
# in headless chromium and checks what they show against the programs'
# numbers (tests/explorer/test_explorer.sh; about a minute and a half).  The pages
# and their screenshots stay in $(BUILD)/explorer/.
.PHONY: explorer-test
explorer-test: $(BUILD)/translate $(BUILD)/gpt $(BUILD)/backward_tour
	bash tests/explorer/test_explorer.sh $(BUILD)
TEST_SUITES += explorer-test
