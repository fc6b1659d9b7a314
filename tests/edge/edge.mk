# tests/edge/edge.mk: `make edge-test`, every op of the table at the edges
# of float (tests/edge/float_edges.c): the float build's forward and
# backward against the double build's, on the same inputs, and three
# mutants that must fail.  EDGE_FLAGS=--op NAME checks one op
# (make check-op does).
.PHONY: edge-test
EDGE_FLAGS ?=
$(BUILD)/float_edges64: $(BUILD)/f64/tests/edge/float_edges.o $(LIB64)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)
$(BUILD)/float_edges32: $(BUILD)/f32/tests/edge/float_edges.o $(LIB32)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)
edge-test: $(BUILD)/float_edges64 $(BUILD)/float_edges32
	@$(BUILD)/float_edges64 --mutants $(EDGE_FLAGS) > $(BUILD)/float_edges64.txt
	@$(BUILD)/float_edges32 --against $(BUILD)/float_edges64.txt --mutants $(EDGE_FLAGS)
TEST_SUITES += edge-test
-include $(BUILD)/f32/tests/edge/float_edges.d $(BUILD)/f64/tests/edge/float_edges.d
