#!/usr/bin/perl
# tests/explorer/check_promises.pl [TABLE]: the promises of docs/explorer.md
# and docs/start.md against the checks that test them
# (tests/explorer/promises.txt says the table's form).  Fails when
#   - a row's words are no longer in its doc (the promise changed: its
#     row, and perhaps its check, must follow);
#   - a row's check is no longer in its test file (the check was renamed or
#     removed: the promise would go unchecked unseen);
#   - a paragraph or list item of docs/explorer.md holds no row's words (a
#     new promise without a check, or a row to add saying it promises
#     nothing).
# Prints the unchecked promises and the reason for each, then
# 'promises: N passed, N failed'; exits 1 on a failure.  Run from the top
# of the tree.
use strict;
use warnings;

my $table = shift // 'tests/explorer/promises.txt';
my $covered_doc = 'docs/explorer.md';
my ($pass, $fail) = (0, 0);
sub no_ { $fail++; print "FAIL $_[0]\n"; }

sub slurp {
    my ($path) = @_;
    open my $fh, '<:encoding(UTF-8)', $path or return undef;
    local $/;
    return scalar <$fh>;
}
sub flat { my ($s) = @_; $s =~ s/\s+/ /g; $s =~ s/^ | $//g; return $s; }

my (%doc, %file, @rows, @unchecked);
open my $fh, '<:encoding(UTF-8)', $table or die "$table: $!\n";
while (my $line = <$fh>) {
    chomp $line;
    next if $line =~ /^\s*(#|$)/;
    my @f = split / \| /, $line, 3;
    if (@f != 3) { no_("$table:$.: not DOC | WORDS | CHECK: $line"); next; }
    push @rows, [$., @f];
}
close $fh;

for my $r (@rows) {
    my ($n, $doc, $words, $check) = @$r;
    $doc{$doc} //= slurp($doc);
    if (!defined $doc{$doc}) { no_("$table:$n: no file $doc"); next; }
    my $ok = 1;
    if (index(flat($doc{$doc}), flat($words)) < 0) {
        no_("$table:$n: $doc no longer says \"$words\"");
        $ok = 0;
    }
    if ($check =~ /^(unchecked|none): (.+)/) {
        push @unchecked, "$doc: \"$words\": $2" if $1 eq 'unchecked';
    } elsif ($check =~ /^(\S+): (.+)$/) {
        my ($test, $text) = ($1, $2);
        $file{$test} //= slurp($test);
        if (!defined $file{$test}) { no_("$table:$n: no test file $test"); $ok = 0; }
        elsif (index($file{$test}, $text) < 0) { no_("$table:$n: $test has no check \"$text\""); $ok = 0; }
    } else {
        no_("$table:$n: the check is neither FILE: TEXT, unchecked: WHY nor none: WHY: $check");
        $ok = 0;
    }
    $pass++ if $ok;
}

# every paragraph and list item of docs/explorer.md holds a row's words
# (headings, code, tables and the quoted program output are not prose)
my $text = slurp($covered_doc) // die "$covered_doc: $!\n";
my @words = map { flat($_->[2]) } grep { $_->[1] eq $covered_doc } @rows;
my (@blocks, @cur, $fence, $quote);
my $flush = sub { push @blocks, [@cur] if @cur; @cur = (); };
my $ln = 0;
for my $line (split /\n/, $text) {
    $ln++;
    if ($line =~ /^```/) { $fence = !$fence; $flush->(); next; }
    if ($line =~ /^<!--quote /) { $quote = 1; $flush->(); next; }
    if ($line =~ /^<!--\/quote-->/) { $quote = 0; next; }
    next if $fence || $quote;
    if ($line =~ /^\s*$/ || $line =~ /^(#|\||    )/) { $flush->(); next; }
    $flush->() if $line =~ /^- /;
    push @cur, [$ln, $line];
}
$flush->();
for my $b (@blocks) {
    my $para = flat(join ' ', map { $_->[1] } @$b);
    if (grep { index($para, $_) >= 0 } @words) { $pass++; next; }
    no_("$covered_doc:$b->[0][0]: a paragraph with no row in $table: \"" . substr($para, 0, 100) .
        "...\": add its promise and the check that tests it");
}

print "unchecked: $_\n" for @unchecked;
print "promises: $pass passed, $fail failed\n";
exit($fail ? 1 : 0);
