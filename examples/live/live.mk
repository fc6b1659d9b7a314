# examples/live/live.mk: `make wasm` builds the programs whose live pages
# (--live PAGE.html, docs/explorer.md) run them in the browser:
# build/wasm/translate.wasm, gpt.wasm, backward_tour.wasm and ladder.wasm,
# the same sources as build/translate, build/gpt, build/backward_tour and
# build/ladder (library,
# ops and program), compiled by clang for wasm32-wasi against Debian's
# wasi-libc and linked by lld.  Each is a WASI command: the page runs it as a shell
# would, with arguments, stdin and stdout (src/viz/live_js.c).
#
# What differs from the native build: no threads (src/core/threads.c runs
# every loop on the calling thread under __wasi__), the portable kernels
# (no x86 intrinsics: the ISA guards of src/core/internal.h), and WASI's
# getpid emulation for the crash-safe writer's temporary names, and its
# signal header (no signal ever arrives: examples/common/stop_signal.h).
# -msimd128: the portable kernels' 16-byte vectors become WebAssembly's
# SIMD128 instructions (every browser since 2021 runs them) instead of four
# scalar operations each: the same bits, in less time (`make live-times`
# measures the ladder's step against the native one).  The
# toolchain (clang, lld, wasi-libc, compiler-rt's wasm32 builtins) is
# installed with apt-get when missing, as Criterion is.
WASM_CC     ?= clang
WASM_AR     ?= llvm-ar
WASI_INC    ?= /usr/include/wasm32-wasi
WASI_LIB    ?= /usr/lib/wasm32-wasi
WASM        := $(BUILD)/wasm
WASM_FLAGS  := --target=wasm32-wasi -msimd128 -nostdlibinc -isystem $(WASI_INC) -D_WASI_EMULATED_GETPID -D_WASI_EMULATED_SIGNAL \
               -std=c11 -Wall -Wextra -Iinclude -Isrc -Iexamples -D_POSIX_C_SOURCE=200809L -ffp-contract=off \
               -fno-math-errno -Werror=implicit-function-declaration -O2 -MMD -MP $(if $(filter 1,$(WERROR)),-Werror)
WASM_LDFLAGS := --target=wasm32-wasi -L$(WASI_LIB) -Wl,--strip-all -Wl,-z,stack-size=1048576 \
                -Wl,--initial-memory=16777216 -Wl,--max-memory=2147483648
WASM_LIBS   := -lwasi-emulated-getpid -lwasi-emulated-signal -lm

WASM_OBJ32 := $(LIB_SRC:%.c=$(WASM)/f32/%.o)
WASM_OBJ64 := $(LIB_SRC:%.c=$(WASM)/f64/%.o)
WASM_TRANSLATE := $(patsubst %.c,$(WASM)/f32/%.o,$(wildcard examples/translate/*.c) examples/common/dist_none.c)
WASM_GPT := $(patsubst %.c,$(WASM)/f32/%.o,$(wildcard examples/gpt/*.c) examples/common/dist_none.c)
WASM_LADDER := $(patsubst %.c,$(WASM)/f32/%.o,$(wildcard examples/ladder/*.c))

.PHONY: wasm check-wasm
wasm: $(WASM)/translate.wasm $(WASM)/gpt.wasm $(WASM)/backward_tour.wasm $(WASM)/ladder.wasm

check-wasm:
	@if ! printf '\043include <stdio.h>\nint main(void){return puts("");}\n' | \
	    $(WASM_CC) --target=wasm32-wasi -nostdlibinc -isystem $(WASI_INC) -L$(WASI_LIB) -x c - \
	    -o /dev/null >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "wasm toolchain missing: installing clang, lld, wasi-libc and libclang-rt-14-dev-wasm32 with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang lld wasi-libc \
	      libclang-rt-14-dev-wasm32 llvm >/dev/null || exit 1; \
	  else \
	    echo "the wasm toolchain is missing: run  sudo apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32 llvm"; \
	    exit 1; \
	  fi; \
	fi

$(WASM_OBJ32) $(WASM_OBJ64) $(WASM_TRANSLATE) $(WASM_GPT) $(WASM_LADDER) $(WASM)/f64/examples/backward_tour.o: | check-wasm
$(WASM)/f32/%.o: %.c
	@mkdir -p $(dir $@)
	$(WASM_CC) $(WASM_FLAGS) -c $< -o $@
$(WASM)/f64/%.o: %.c
	@mkdir -p $(dir $@)
	$(WASM_CC) $(WASM_FLAGS) -DAG_DOUBLE -c $< -o $@
$(WASM)/libattograd.a: $(WASM_OBJ32)
	@rm -f $@
	$(WASM_AR) rcs $@ $^
$(WASM)/libattograd64.a: $(WASM_OBJ64)
	@rm -f $@
	$(WASM_AR) rcs $@ $^

$(WASM)/translate.wasm: $(WASM_TRANSLATE) $(WASM)/libattograd.a
	$(WASM_CC) $(WASM_LDFLAGS) $^ -o $@ $(WASM_LIBS)
$(WASM)/gpt.wasm: $(WASM_GPT) $(WASM)/libattograd.a
	$(WASM_CC) $(WASM_LDFLAGS) $^ -o $@ $(WASM_LIBS)
$(WASM)/ladder.wasm: $(WASM_LADDER) $(WASM)/libattograd.a
	$(WASM_CC) $(WASM_LDFLAGS) $^ -o $@ $(WASM_LIBS)
$(WASM)/backward_tour.wasm: $(WASM)/f64/examples/backward_tour.o $(WASM)/libattograd64.a
	$(WASM_CC) $(WASM_LDFLAGS) $^ -o $@ $(WASM_LIBS)

-include $(WASM_OBJ32:.o=.d) $(WASM_OBJ64:.o=.d) $(WASM_TRANSLATE:.o=.d) $(WASM_GPT:.o=.d) $(WASM_LADDER:.o=.d) \
         $(WASM)/f64/examples/backward_tour.d
