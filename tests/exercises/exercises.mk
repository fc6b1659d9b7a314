# tests/exercises/exercises.mk: the exercises of examples/exercises/ (the
# Makefile includes this file).
#
#   make exercise N=3      check exercise 3 as its file is now
#   make exercises-test    every stub fails its check, every answer of
#                          docs/answers.md passes it (part of make test)
#
# The exercises build in double, against libattograd64.a.

EX_SRC := $(sort $(wildcard examples/exercises/*.c))
EX_OBJ := $(EX_SRC:%.c=$(BUILD)/f64/%.o)
EX_CHECK_OBJ := $(BUILD)/f64/tests/exercises/check.o
$(EX_CHECK_OBJ): AG_FLAGS += -Iexamples/exercises
$(EX_CHECK_OBJ): tests/exercises/checks_math.h tests/exercises/checks_graph.h tests/exercises/report.h

$(BUILD)/exercise-check: $(EX_CHECK_OBJ) $(EX_OBJ) $(LIB64)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)

.PHONY: exercise exercises-test
exercise: $(BUILD)/exercise-check
	@if [ -z "$(N)" ]; then echo "usage: make exercise N=1 (1 to $(words $(EX_SRC)); docs/answers.md has the answers)"; exit 2; fi
	$(BUILD)/exercise-check $(N)

exercises-test: $(EX_CHECK_OBJ) $(LIB64)
	CC="$(CC)" bash tests/exercises/test_exercises.sh $(BUILD)
TEST_SUITES += exercises-test

-include $(EX_CHECK_OBJ:.o=.d) $(EX_OBJ:.o=.d)
