# tests/bench/kv_decode.mk: `make bench-kv` (the Makefile includes this file).
#
# A decoder written from the public calls (ag_kv_cache and
# ag_scaled_dot_product_attention) against ag_gpt_sample on the same
# weights, greedy: whether the tokens agree and the time ratio
# (tests/bench/kv_decode.c).  KV_FLAGS=--smoke: a toy model in a second.
KV_FLAGS ?=
$(BUILD)/kv_decode: tests/bench/kv_decode.c $(LIB32)
	$(CC) $(AG_FLAGS) $(CFLAGS) $< $(LIB32) -o $@ $(LDLIBS)

.PHONY: bench-kv
bench-kv: $(BUILD)/kv_decode
	OMP_WAIT_POLICY=passive $(BUILD)/kv_decode $(KV_FLAGS)
