# examples/classify/classify.mk: the encoder-only classifier example (the
# Makefile includes this file).
#
#   make classify       build $(BUILD)/classify (part of `make`, too) and
#                       $(BUILD)/classify64, in double (`classify64 gradcheck`)
#   make classify-run   train it on examples/data/eng-fra.tsv with three
#                       seeds and print the held-out accuracy of each

CLASSIFY_SRC := $(wildcard examples/classify/*.c)
CLASSIFY_OBJ := $(CLASSIFY_SRC:%.c=$(BUILD)/f32/%.o)
CLASSIFY_OBJ64 := $(CLASSIFY_SRC:%.c=$(BUILD)/f64/%.o)

.PHONY: classify classify-run
all: $(BUILD)/classify
classify: $(BUILD)/classify $(BUILD)/classify64

$(BUILD)/classify: $(CLASSIFY_OBJ) $(LIB32)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)
# the same program in double, for `classify64 gradcheck`
all: $(BUILD)/classify64
$(BUILD)/classify64: $(CLASSIFY_OBJ64) $(LIB64)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)

classify-run: $(BUILD)/classify
	$(BUILD)/classify --data examples/data/eng-fra.tsv --seeds 3 --quiet

-include $(CLASSIFY_OBJ:.o=.d) $(CLASSIFY_OBJ64:.o=.d)
