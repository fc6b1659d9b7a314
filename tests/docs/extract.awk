# tests/docs/extract.awk: the C examples of a Markdown file, one file each.
#
# Every block fenced as ```c is written to OUT/NNN.c (NNN counts the blocks
# of the file from 001), with a first line `#line N "FILE"` so that compiler
# messages point into the Markdown.  A block fenced as ```output holds the
# exact standard output of the nearest ```c block above it: it goes to
# OUT/NNN.out.  OUT/list gets one line per C block: NNN and its line number.
# A block fenced as ```markdown goes to OUT/mNNN.md (with a first line
# `<!-- line N -->`), listed in OUT/mdlist the same way: docs/contributing.md
# gives the lines an op adds to docs/ops.md and CHANGELOG.md so.
# Usage: awk -v out=DIR -f extract.awk FILE.md
/^```c[ \t]*$/      { n++; id = sprintf("%03d", n); f = out "/" id ".c"
                      printf "#line %d \"%s\"\n", FNR + 1, FILENAME > f
                      print id, FNR + 1 >> (out "/list"); mode = "c"; next }
/^```markdown[ \t]*$/ { m++; f = out "/m" sprintf("%03d", m) ".md"
                      printf "<!-- line %d -->\n", FNR + 1 > f
                      print "m" sprintf("%03d", m), FNR + 1 >> (out "/mdlist"); mode = "md"; next }
/^```output[ \t]*$/ { if (n == 0) { print FILENAME ":" FNR ": an output block with no C block above it" > "/dev/stderr"; bad = 1 }
                      f = out "/" id ".out"; mode = "out"; next }
/^```/ && mode != "" { close(f); mode = ""; next }
mode != ""          { print > f }
END                 { exit bad }
