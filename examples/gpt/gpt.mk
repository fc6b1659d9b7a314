# examples/gpt/gpt.mk: the character-level GPT example (the Makefile
# includes this file).
#
#   make gpt        build $(BUILD)/gpt (part of `make`, too), and $(BUILD)/gpt64,
#                   the same in double (`gpt64 gradcheck`)
#   make gpt-run    train it on the English side of examples/data/eng-fra.tsv,
#                   then score and sample it (GPT_FLAGS adds train flags)

GPT_SRC   := $(wildcard examples/gpt/*.c)
GPT_OBJ   := $(GPT_SRC:%.c=$(BUILD)/f32/%.o)
GPT_OBJ64 := $(GPT_SRC:%.c=$(BUILD)/f64/%.o)
GPT_MODEL ?= $(BUILD)/gpt.safetensors
GPT_FLAGS ?=

.PHONY: gpt gpt-run
all: $(BUILD)/gpt
gpt: $(BUILD)/gpt $(BUILD)/gpt64

$(BUILD)/gpt: $(GPT_OBJ) $(DIST_NONE) $(LIB32)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)
# the same program in double, for `gpt64 gradcheck`
all: $(BUILD)/gpt64
$(BUILD)/gpt64: $(GPT_OBJ64) $(BUILD)/f64/examples/common/dist_none.o $(LIB64)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)
# the same program, whose train splits each step among mpirun's processes
$(BUILD)/gpt-mpi: $(GPT_OBJ) $(DIST_MPI) $(LIB32)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS) $(MPI_LIBS)
ifeq ($(MPI),1)
all: $(BUILD)/gpt-mpi
endif

gpt-run: $(BUILD)/gpt
	$(BUILD)/gpt train --data examples/data/eng-fra.tsv --out $(GPT_MODEL) --plot $(BUILD)/gpt_loss.svg $(GPT_FLAGS)
	$(BUILD)/gpt eval --model $(GPT_MODEL) --data examples/data/eng-fra.tsv
	$(BUILD)/gpt sample --model $(GPT_MODEL) --prompt "I " --length 300 --temperature 0.8 --top-k 10 --seed 1

-include $(GPT_OBJ:.o=.d) $(GPT_OBJ64:.o=.d)
