# `make pictures` makes every picture of examples/pictures again: the cheap
# ones (a second) and those of a trained translator (three training runs:
# the default, --pre-norm and --qk-norm, each about twenty seconds to a
# minute and a half on 2 cores).  `make test` checks
# that they are up to date (tests/pictures/check_pictures.sh).
.PHONY: pictures pictures-test
pictures: $(BUILD)/attention_demo $(BUILD)/backward_tour $(BUILD)/translate
	bash tests/pictures/make_pictures.sh $(BUILD) examples/pictures --trained
# The trained pictures were made by gcc's build with the default CFLAGS:
# compared only in such a build.
PICTURES_TRAINED := $(if $(shell $(CC) --version 2>/dev/null | grep -i clang)$(filter-out -O2 -g,$(CFLAGS)),,--trained)
pictures-test: $(BUILD)/attention_demo $(BUILD)/backward_tour $(BUILD)/translate
	bash tests/pictures/check_pictures.sh $(BUILD) $(PICTURES_TRAINED)
test: pictures-test
