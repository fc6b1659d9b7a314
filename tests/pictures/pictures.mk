# `make pictures` makes every picture of examples/pictures again: the cheap
# ones (a second), the live pages' screenshots (ten seconds, after make
# wasm) and those of a trained translator (three training runs:
# the default (pre-norm), --post-norm and --post-norm --qk-norm, each about
# twenty seconds to a minute and a half on 2 cores).  `make test` checks
# that they are up to date (tests/pictures/check_pictures.sh).
.PHONY: pictures pictures-test
# They are made into $(BUILD)/pictures-made, then update_pictures.sh copies
# those that say something new: on another machine (another browser or
# Graphviz version, no AVX-512) make pictures changes no committed file.
# The trained pictures were made by gcc's build with the default CFLAGS on
# AVX-512 kernels: made and compared only in such a build, on such a CPU.
PICTURES_TRAINED := $(if $(shell $(CC) --version 2>/dev/null | grep -i clang)$(filter-out -O2 -g,$(CFLAGS)),,--trained)
pictures: $(BUILD)/attention_demo $(BUILD)/backward_tour $(BUILD)/translate $(BUILD)/gpt wasm
	rm -rf $(BUILD)/pictures-made
	bash tests/pictures/make_pictures.sh $(BUILD) $(BUILD)/pictures-made $(PICTURES_TRAINED)
	bash tests/pictures/update_pictures.sh $(BUILD)/pictures-made examples/pictures
# rsvg-convert renders the pictures in pictures-test: installed with
# apt-get when missing (as root), else the rendering is skipped with a note.
.PHONY: check-rsvg
check-rsvg:
	@if ! command -v rsvg-convert >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "rsvg-convert missing: installing librsvg2-bin with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq librsvg2-bin >/dev/null || exit 1; \
	  else \
	    echo "rsvg-convert is missing: the pictures will not be rendered (sudo apt-get install librsvg2-bin)"; \
	  fi; \
	fi
pictures-test: check-rsvg $(BUILD)/attention_demo $(BUILD)/backward_tour $(BUILD)/translate $(BUILD)/gpt wasm
	bash tests/pictures/check_pictures.sh $(BUILD) $(PICTURES_TRAINED)
TEST_SUITES += pictures-test
