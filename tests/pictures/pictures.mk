# `make pictures` makes every picture of examples/pictures again: the cheap
# ones (a second) and those of a trained translator (a training run, about
# a minute and a half on 2 cores).  `make test` checks that the cheap ones
# are up to date (tests/pictures/check_pictures.sh).
.PHONY: pictures pictures-test
pictures: $(BUILD)/attention_demo $(BUILD)/backward_tour $(BUILD)/translate
	bash tests/pictures/make_pictures.sh $(BUILD) examples/pictures --trained
pictures-test: $(BUILD)/attention_demo $(BUILD)/backward_tour
	bash tests/pictures/check_pictures.sh $(BUILD)
test: pictures-test
