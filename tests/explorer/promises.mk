# tests/explorer/promises.mk: every promise of docs/explorer.md and
# docs/start.md mapped to the check that tests it
# (tests/explorer/promises.txt), and the map kept true: a promise whose
# words left its doc, a check gone from its test file, or a paragraph of
# docs/explorer.md with no row fails (tests/explorer/check_promises.pl;
# perl alone, a second).  A table with each of those faults must fail too.
.PHONY: promises-test
promises-test:
	perl tests/explorer/check_promises.pl tests/explorer/promises.txt
	@mkdir -p $(BUILD)
	@printf '%s\n' 'docs/explorer.md | words the page never says | tests/explorer/promises.mk: promises-test:' \
	  'docs/explorer.md | The SVG pictures | tests/lib.sh: a check nowhere' > $(BUILD)/promises-bad.txt
	@if perl tests/explorer/check_promises.pl $(BUILD)/promises-bad.txt > $(BUILD)/promises-bad.out; then \
	  echo "promises: a table with faults passed"; exit 1; fi
	@for want in 'no longer says "words the page never says"' 'has no check "a check nowhere"' \
	  'a paragraph with no row'; do grep -qF "$$want" $(BUILD)/promises-bad.out || \
	  { echo "promises: a faulty table did not give: $$want"; exit 1; }; done
	@echo "promises: a table with a lost promise, a lost check and a paragraph without a row fails"
TEST_SUITES += promises-test
