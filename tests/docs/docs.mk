# tests/docs/docs.mk: make test compiles every C example of README.md,
# docs/*.md and examples/README.md, and runs the complete programs
# (tests/docs/check_docs.sh says how a block is marked).
.PHONY: docs-test
docs-test: $(LIB32) $(LIB64)
	CC="$(CC)" bash tests/docs/check_docs.sh $(BUILD)
test: docs-test

# docs/contributing.md's op, added to a copy of the tree as the guide says,
# passes its checks; the guide's wrong backward fails them.
.PHONY: op-guide-test
op-guide-test:
	CC="$(CC)" bash tests/docs/check_op_guide.sh
test: op-guide-test
