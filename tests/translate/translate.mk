# make test also runs the translator end to end (tests/translate/test_translate.sh).
.PHONY: translate-test
translate-test: $(BUILD)/translate
	bash tests/translate/test_translate.sh $(BUILD)
TEST_SUITES += translate-test
# and, in double, takes the twin's steps (tests/translate/test_lockstep.sh)
.PHONY: lockstep-test
lockstep-test: $(BUILD)/translate $(BUILD)/translate64
	bash tests/translate/test_lockstep.sh $(BUILD)
TEST_SUITES += lockstep-test

# make asan runs the translator's scripts too, on an ASan + UBSan build of
# it: ASan's reports (leaks on error paths too) go to files that fail the
# target whatever the scripts check; a UBSan report ends the process with
# status 87, which no check accepts (test_translate.sh names one known
# report of the library's and skips that check).
TRANSLATE_SAN_LOG := build-asan/translate-san
.PHONY: translate-asan
translate-asan:
	$(MAKE) BUILD=build-asan CFLAGS="$(SAN_CFLAGS)" LDFLAGS="$(SAN)" build-asan/translate build-asan/translate64
	@rm -rf $(TRANSLATE_SAN_LOG) && mkdir -p $(TRANSLATE_SAN_LOG)
	@set -e; for t in tests/cli/test_cli.sh tests/translate/test_translate.sh tests/translate/test_lockstep.sh; do \
	  log=$(TRANSLATE_SAN_LOG)/$$(basename $$t .sh).log; \
	  SANITIZED=1 ASAN_OPTIONS=detect_leaks=1:exitcode=86:log_path=$(CURDIR)/$(TRANSLATE_SAN_LOG)/asan \
	    UBSAN_OPTIONS=print_stacktrace=1:exitcode=87 bash $$t build-asan > $$log 2>&1 || { cat $$log; exit 1; }; \
	  grep '^skip' $$log || true; tail -n 1 $$log; \
	done
	@if ls $(TRANSLATE_SAN_LOG)/asan.* > /dev/null 2>&1; then head -n 40 $(TRANSLATE_SAN_LOG)/asan.*; \
	  echo "translate-asan: sanitizer report (see $(TRANSLATE_SAN_LOG))"; exit 1; fi
	@echo "translate-asan: clean"
asan: translate-asan
