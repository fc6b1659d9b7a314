# tests/gradmodel/gradmodel.mk: the whole-model gradient check and its node
# walk through the examples (docs/testing.md).
#
#   make gradmodel-test     (in make test) classify64 gradcheck unbroken and
#                           with layer norm broken, and the flags' errors
#   make gradmodel-mutate   each op on the tape of the GPT, the translator
#                           and the classifier broken by 1e-4 in turn: the
#                           whole check fails and the walk names it first
#                           (some minutes)
#   make gradmodel-seeds    the three models unbroken over seeds 1 to 20
.PHONY: gradmodel-test gradmodel-mutate gradmodel-seeds
gradmodel-test: $(BUILD)/classify64 $(BUILD)/classify $(BUILD)/gpt
	bash tests/gradmodel/test_gradmodel_cli.sh $(BUILD)
TEST_SUITES += gradmodel-test

gradmodel-mutate: $(BUILD)/classify64 $(BUILD)/gpt64 $(BUILD)/translate64
	@set -e; for m in classify gpt translate; do bash tests/gradmodel/mutate.sh $(BUILD) $$m; done

gradmodel-seeds: $(BUILD)/classify64 $(BUILD)/gpt64 $(BUILD)/translate64
	@for m in classify gpt translate; do for s in $$(seq 1 20); do \
	    out=$$($(BUILD)/$${m}64 gradcheck --data examples/data/eng-fra.tsv --seed $$s) || { echo "$$out"; exit 1; }; \
	    echo "$$out" | sed -n "s/^whole model: /$$m seed $$s: /p"; \
	done; done
