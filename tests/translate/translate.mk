# make test also runs the translator end to end (tests/translate/test_translate.sh).
.PHONY: translate-test
translate-test: $(BUILD)/translate
	bash tests/translate/test_translate.sh $(BUILD)
test: translate-test
