# tests/saturation/saturation.mk: the measured tables of docs/translator.md's
# "Cures: pre-norm and QK-norm" match their committed measurements.
.PHONY: saturation-test
saturation-test:
	bash tests/saturation/check_saturation.sh
TEST_SUITES += saturation-test
