# examples/translate/translate.mk: build/translate from the files of
# examples/translate/, in float, and build/translate64, the same program in
# double (the lock-step comparison with PyTorch, docs/translator.md); the
# Makefile includes this file.
TRANSLATE_OBJ := $(patsubst %.c,$(BUILD)/f32/%.o,$(wildcard examples/translate/*.c))
TRANSLATE_OBJ64 := $(patsubst %.c,$(BUILD)/f64/%.o,$(wildcard examples/translate/*.c))

all: $(BUILD)/translate $(BUILD)/translate64
$(BUILD)/translate: $(TRANSLATE_OBJ) $(DIST_NONE) $(LIB32)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)
$(BUILD)/translate64: $(TRANSLATE_OBJ64) $(BUILD)/f64/examples/common/dist_none.o $(LIB64)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)
# the same program, whose train splits each step among mpirun's processes
$(BUILD)/translate-mpi: $(TRANSLATE_OBJ) $(DIST_MPI) $(LIB32)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS) $(MPI_LIBS)
ifeq ($(MPI),1)
all: $(BUILD)/translate-mpi
endif

-include $(TRANSLATE_OBJ:.o=.d) $(TRANSLATE_OBJ64:.o=.d)
