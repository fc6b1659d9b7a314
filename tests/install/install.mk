# tests/install/install.mk: make test installs into a temporary DESTDIR,
# builds the README's first example with pkg-config against the installed
# libraries, runs it, and uninstalls (tests/install/test_install.sh).
.PHONY: install-test
install-test: $(LIB32) $(LIB64) $(SO32) $(SO64)
	MAKE="$(MAKE)" CC="$(CC)" bash tests/install/test_install.sh $(BUILD)
TEST_SUITES += install-test
