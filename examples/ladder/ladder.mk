# examples/ladder/ladder.mk: the ladder of experiments (the Makefile includes
# this file).
#
#   make ladder       build $(BUILD)/ladder (part of `make`, too) and run
#                     every rung, then the copy and reverse tasks, drawing
#                     their attention into $(BUILD)/ladder_*.svg

LADDER_SRC := $(wildcard examples/ladder/*.c)
LADDER_OBJ := $(LADDER_SRC:%.c=$(BUILD)/f32/%.o)

.PHONY: ladder
all: $(BUILD)/ladder

$(BUILD)/ladder: $(LADDER_OBJ) $(LIB32)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)

ladder: $(BUILD)/ladder
	$(BUILD)/ladder all --quiet --svg $(BUILD)/ladder
	$(BUILD)/ladder copy --quiet --svg $(BUILD)/ladder_copy
	$(BUILD)/ladder reverse --quiet --svg $(BUILD)/ladder_reverse

-include $(LADDER_OBJ:.o=.d)
