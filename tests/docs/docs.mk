# tests/docs/docs.mk: make test compiles every C example of README.md,
# docs/*.md and examples/README.md, and runs the complete programs
# (tests/docs/check_docs.sh says how a block is marked); and it compares
# every number, table and excerpt those files quote with the program that
# prints it (tests/docs/quotes.pl; the sources in tests/docs/quotes.txt).
# `make docs` writes the quotes again from the programs.
#
# docs/benchmarks.md and docs/bf16-benchmarks.md are left out of the
# quotes: their figures are dated measurements of `make bench` and its
# sections, which run for minutes on a quiet machine.
.PHONY: docs-test docs
QUOTED_DOCS = README.md examples/README.md $(filter-out docs/benchmarks.md docs/bf16-benchmarks.md,$(wildcard docs/*.md))
# The reference build (gcc, the default CFLAGS): the one whose training
# runs and finite-difference errors the docs quote (as the pictures').
DOCS_REFERENCE = $(if $(shell $(CC) --version 2>/dev/null | grep -i clang)$(filter-out -O2 -g,$(CFLAGS)),,--reference)
DOCS_PROGRAMS = $(LIB32) $(LIB64) $(BUILD)/attention_demo $(BUILD)/backward_tour $(BUILD)/gradcheck $(BUILD)/precision_tour \
                $(BUILD)/translate $(BUILD)/gpt $(BUILD)/classify64
docs-test: $(DOCS_PROGRAMS)
	CC="$(CC)" bash tests/docs/check_docs.sh $(BUILD)
	perl tests/docs/quotes.pl --check $(DOCS_REFERENCE) $(BUILD) $(QUOTED_DOCS)
docs: $(DOCS_PROGRAMS)
	perl tests/docs/quotes.pl --write $(DOCS_REFERENCE) $(BUILD) $(QUOTED_DOCS)
TEST_SUITES += docs-test

# docs/contributing.md's op, added to a copy of the tree as the guide says,
# passes its checks; the guide's wrong backward fails them.
.PHONY: op-guide-test
op-guide-test:
	CC="$(CC)" bash tests/docs/check_op_guide.sh
TEST_SUITES += op-guide-test

# Every relative link of the docs leads to a file, and to a heading of it
# when it names one (docs/start.md's path is links into the tour).
.PHONY: links-test
links-test:
	perl tests/docs/check_links.pl README.md examples/README.md docs/*.md
TEST_SUITES += links-test
