# tests/link/link.mk: `make test` checks that a program compiled for one
# precision does not link with the other precision's library
# (tests/link/test_link.sh).
.PHONY: link-test
link-test: $(LIB32) $(LIB64)
	bash tests/link/test_link.sh $(BUILD) "$(CC)" "$(LDLIBS)"
TEST_SUITES += link-test
