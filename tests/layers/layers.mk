# tests/layers/layers.mk: `make test` checks that every source file includes
# only the headers its layer may use (tests/layers/check_layers.sh).
.PHONY: layers-test
layers-test:
	bash tests/layers/check_layers.sh .
TEST_SUITES += layers-test
