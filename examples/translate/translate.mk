# examples/translate/translate.mk: build/translate from the files of
# examples/translate/, in float (the Makefile includes this file).
TRANSLATE_OBJ := $(patsubst %.c,$(BUILD)/f32/%.o,$(wildcard examples/translate/*.c))

all: $(BUILD)/translate
$(BUILD)/translate: $(TRANSLATE_OBJ) $(LIB32)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)

-include $(TRANSLATE_OBJ:.o=.d)
