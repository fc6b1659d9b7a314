# tests/ladder/ladder.mk: `make test` runs tests/ladder/test_ladder.sh: bad
# flags, the copy and reverse tasks, and every rung of the ladder against
# the table docs/ladder.md quotes.
.PHONY: ladder-test
ladder-test: $(BUILD)/ladder
	bash tests/ladder/test_ladder.sh $(BUILD) $(DOCS_REFERENCE)
TEST_SUITES += ladder-test
