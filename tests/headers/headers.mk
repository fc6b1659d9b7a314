# tests/headers/headers.mk: `make test` checks the public headers: their
# comments stay contracts (tests/headers/ratio.sh), and the deprecated names
# live in attograd_compat.h, hidden by AG_NO_DEPRECATED
# (tests/headers/test_compat.sh).
.PHONY: headers-test
headers-test:
	bash tests/headers/ratio.sh .
	bash tests/headers/test_compat.sh "$(CC)"
TEST_SUITES += headers-test
