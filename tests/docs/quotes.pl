#!/usr/bin/perl
# tests/docs/quotes.pl --check|--write [--reference] BUILD_DIR FILE.md ...: the
# numbers, tables and output excerpts that the docs quote, compared with
# (--check) or rewritten from (--write, `make docs`) the programs that make
# them.  The keys, their programs and what each key takes from its
# program's output are in tests/docs/quotes.txt.
#
# A quote is marked in the Markdown, invisibly once rendered:
#   inline   <!--q KEY-->1.9e-10<!--/q-->   (KEY: a word, a dot, more: tour.worst_fd)
#   block    <!--quote KEY-->
#            (the lines: a table, or a block indented by 4 spaces)
#            <!--/quote-->
# Keys flagged `build` in quotes.txt hold numbers whose last digits depend
# on the compiler, its flags or the CPU's kernels (finite-difference errors,
# training runs): those digits are compared in the reference build only
# (gcc, the default CFLAGS, an AVX-512 CPU: --reference, as the pictures'
# test).  Any other build compares the rest of the quote, each number with
# a decimal point read as a placeholder: a count in an excerpt (the cases
# of the gradient checker's last line) is checked, and written, on every
# machine, and --write keeps the reference build's digits around it.
# Sources flagged `trained` are training runs, made only then.  Outside
# the reference build, the last lines list what this run left to it: each
# quote whose digits this build prints otherwise (kept as they are) and
# each training run not made, so that a stale digit is never passed over
# in silence.
#
# --write is all or nothing: it computes every quote of every file first,
# and writes none when one failed (a program that exits with an error, a
# quote that it no longer prints).
# Prints one line per quote and 'quotes: N passed, N failed' last.
use strict;
use warnings;
use File::Temp qw(tempdir);
use Cwd qw(abs_path);
use File::Basename qw(dirname);

my ($mode, $reference) = ('', 0);
while (@ARGV && $ARGV[0] =~ /^--/) {
    my $a = shift @ARGV;
    if ($a eq '--check' || $a eq '--write') { $mode = $a }
    elsif ($a eq '--reference') { $reference = 1 }
    else { die "quotes.pl: unknown flag $a\n" }
}
die "usage: quotes.pl --check|--write [--reference] BUILD FILE.md ...\n" unless $mode && @ARGV >= 2;
my $build = shift @ARGV;
my $root = abs_path(dirname(abs_path($0)) . "/../..");
my $B = abs_path($build) or die "quotes.pl: no build directory $build\n";
if ($reference) { # the reference build ran on AVX-512: elsewhere other kernels round otherwise
    my $avx512 = 0;
    if (open(my $c, '<', '/proc/cpuinfo')) { $avx512 = grep { /\bavx512f\b/ } <$c> }
    $reference = 0 unless $avx512;
}

# ---- the table of sources and keys ----------------------------------------
my (%source, %trained_source, %key_source, %key_build, %key_prog);
open(my $qt, '<', "$root/tests/docs/quotes.txt") or die "quotes.pl: no tests/docs/quotes.txt\n";
while (<$qt>) {
    chomp;
    next if /^\s*(#|$)/;
    my @f = split /\t+/;
    if ($f[0] eq 'source' && @f == 4) { $source{$f[1]} = $f[3]; $trained_source{$f[1]} = $f[2] eq 'trained' }
    elsif ($f[0] eq 'key' && @f == 5) {
        $key_source{$f[1]} = $f[2]; $key_build{$f[1]} = $f[3] eq 'build'; $key_prog{$f[1]} = $f[4];
    }
    else { die "quotes.txt:$.: neither a source nor a key line\n" }
}

# AG_QUOTES_CACHE=DIR keeps each program's output in DIR and reuses it
# (for editing the docs without a training run per try)
my $tmp = tempdir(CLEANUP => 1);
my $cache = $ENV{AG_QUOTES_CACHE};
my (%out, %failed_source);
# The output of a source, run once in a scratch directory.
sub run_source {
    my ($s) = @_;
    return $out{$s} if exists $out{$s};
    if ($cache && open(my $c, '<', "$cache/$s.out")) {
        local $/;
        return $out{$s} = <$c>;
    }
    my $dir = "$tmp/$s";
    mkdir $dir;
    local $ENV{B} = $B;
    local $ENV{BUILD} = $build;
    local $ENV{ROOT} = $root;
    local $ENV{OMP_NUM_THREADS} = 1;
    my $text = `cd '$dir' && ( $source{$s} ) 2>'$dir.err'`;
    if ($? != 0) {
        $failed_source{$s} = "exits " . ($? >> 8) . ": " . `tail -n 3 '$dir.err'`;
        $text = '';
    }
    $out{$s} = $text;
    if ($cache && !$failed_source{$s} && -d $cache && open(my $c, '>', "$cache/$s.out")) { print $c $text }
    return $text;
}

# What a key quotes: its awk program over its source's output.
sub value {
    my ($key) = @_;
    my $s = $key_source{$key};
    my $text = run_source($s);
    # block:TITLE, the lines from the one that starts with TITLE to the
    # next that does not start with a space (a printed tensor and its rows)
    # (tensor:TITLE: the same without backward_tour's finite-difference
    # line, whose digits depend on the compiler)
    if ($key_prog{$key} =~ /^(block|tensor):(.*)$/) {
        my ($kind, $title, @got) = ($1, $2);
        for my $l (split /\n/, $text) {
            if (!@got) { push @got, $l if index($l, $title) == 0; next }
            last if $l !~ /^ /;
            push @got, $l unless $kind eq 'tensor' && $l =~ /finite differences:/;
        }
        return join "\n", @got;
    }
    open(my $fh, '>', "$tmp/in") or die;
    print $fh $text;
    close $fh;
    (my $prog = $key_prog{$key}) =~ s/'/'\\''/g;
    my $v = `awk '$prog' '$tmp/in'`;
    $v =~ s/\n+\z//;
    return $v;
}

# The digits of a build's numbers: each number with a decimal point (1.09e-08,
# 0.672), not a count (188).
my $FLOAT = qr/(?<![\w.])-?[0-9]+\.[0-9]+(?:e[-+]?[0-9]+)?/;
sub digits { my @d = $_[0] =~ /$FLOAT/g; return @d }
sub masked { return $_[0] =~ s/$FLOAT/#/gr }

my ($pass, $fail) = (0, 0);
my @unrefreshed; # outside the reference build: the quotes this run could not make
sub good { $pass++; print "ok   $_[0]\n" }
sub bad { $fail++; print "FAIL $_[0]\n" }

# Check one quote; returns what it should say (undef: leave it).
sub check {
    my ($where, $key, $have, $inline) = @_;
    unless (exists $key_source{$key} && exists $source{$key_source{$key}}) {
        bad("$where: no key '$key' in tests/docs/quotes.txt");
        return undef;
    }
    if ($trained_source{$key_source{$key}} && !$reference) {
        good("$where: $key (a training run: compared in gcc's reference build on AVX-512 only)");
        push @unrefreshed, "$where: $key: a training run ($key_source{$key}), not run here";
        return undef;
    }
    my $want = value($key);
    my $s = $key_source{$key};
    if ($failed_source{$s}) {
        bad("$where: $key: its program ($s) $failed_source{$s}");
        return undef;
    }
    if ($want eq '') {
        bad("$where: $key: its program ($s) no longer prints it");
        return undef;
    }
    if ($key_build{$key} && !$reference) {
        my ($mw, $mh) = (masked($want), masked($have));
        my @dh = digits($have);
        my @dw = digits($want);
        # this build's digits where they differ from the docs': kept, not refreshed
        my @differ = map { "$dh[$_] (here $dw[$_])" } grep { $_ < @dw && $dh[$_] ne $dw[$_] } 0 .. $#dh;
        if (@differ && scalar(@dw) == @dh) {
            my $shown = join(', ', @differ[0 .. ($#differ < 2 ? $#differ : 2)]) . (@differ > 3 ? ', ...' : '');
            push @unrefreshed, "$where: $key: " . scalar(@differ) . " number(s) of this build differ, kept: $shown";
        }
        if ($mw eq $mh) {
            good("$where: $key (its digits depend on the compiler and CPU: compared in the reference build)");
            return undef;
        }
        if ($mode eq '--write' && scalar(@dw) == @dh) {
            good("$where: $key rewritten (the reference build's digits kept)");
            return $want =~ s/$FLOAT/shift @dh/ger;
        }
        bad(stale("$where: $key is stale beyond its build's digits", $mh, $mw,
                  $mode eq '--write' ? 'its form changed: make docs writes it in the reference build (gcc, the'
                    . ' default CFLAGS, an AVX-512 CPU)' : 'make docs writes it again; # stands for a build\'s digits'));
        return undef;
    }
    if ($inline && $want =~ /\n/) {
        bad("$where: $key is quoted inline but its program gives more than one line");
        return undef;
    }
    if ($want eq $have) { good("$where: $key") }
    elsif ($mode eq '--write') { good("$where: $key rewritten") }
    else { bad(stale("$where: $key is stale", $have, $want, 'make docs writes it again')) }
    return $want;
}

# The first line where the docs and the program differ.
sub stale {
    my ($what, $have, $want, $hint) = @_;
    my @w = split /\n/, $want, -1;
    my @h = split /\n/, $have, -1;
    my $i = 0;
    $i++ while $i < @w && $i < @h && $w[$i] eq $h[$i];
    return "$what: the docs say\n       '" . ($h[$i] // '') . "'\n     the program prints\n       '" . ($w[$i] // '')
        . "'\n     ($hint)";
}

my @writes; # [file, its new lines]: written once every quote is computed
for my $md (@ARGV) {
    open(my $fh, '<', $md) or die "quotes.pl: cannot read $md\n";
    my @lines = <$fh>;
    close $fh;
    my @new;
    my $changed = 0;
    for (my $i = 0; $i < @lines; $i++) {
        my $line = $lines[$i];
        if ($line =~ /^<!--quote (\S+)-->\s*$/) {
            my ($key, $start) = ($1, $i);
            my $j = $i + 1;
            $j++ while $j < @lines && $lines[$j] !~ /^<!--\/quote-->\s*$/;
            if ($j >= @lines) { bad("$md:" . ($i + 1) . ": quote $key has no <!--/quote-->"); push @new, $line; next }
            my @body = @lines[$i + 1 .. $j - 1];
            chomp(my @b = @body);
            shift @b while @b && $b[0] eq '';
            pop @b while @b && $b[-1] eq '';
            my $indent = @b && !grep { $_ ne '' && !/^    / } @b;
            my $have = join "\n", map { $indent ? s/^    //r : $_ } @b;
            my $want = check("$md:" . ($i + 1), $key, $have);
            push @new, $line;
            if (defined $want && $want ne $have) {
                $changed = 1;
                my $fenced = !@b ? $want !~ /^\|/ : $indent;
                my @w = split /\n/, $want;
                push @new, $fenced ? ("\n", (map { $_ eq '' ? "\n" : "    $_\n" } @w), "\n") : map { "$_\n" } @w;
            } else { push @new, @body }
            push @new, $lines[$j];
            $i = $j;
            next;
        }
        my $n = $i + 1;
        $line =~ s{<!--q ([a-z0-9_]+\.[\w.]+)-->(.*?)<!--/q-->}{
            my ($k, $have) = ($1, $2);
            my $want = check("$md:$n", $k, $have, 1);
            $changed = 1 if defined $want && $want ne $have;
            "<!--q $k-->" . (defined $want ? $want : $have) . "<!--/q-->"
        }ge;
        push @new, $line;
    }
    push @writes, [$md, [@new]] if $mode eq '--write' && $changed;
}
if (@writes && $fail) {
    print "quotes: nothing written: $fail quote(s) failed (" . join(', ', map { $_->[0] } @writes) . " unchanged)\n";
} else {
    for my $w (@writes) {
        my ($md, $new) = @$w;
        open(my $o, '>', "$md.tmp") or die "quotes.pl: cannot write $md.tmp\n";
        print $o @$new;
        close $o or die;
        rename "$md.tmp", $md or die;
        print "wrote $md\n";
    }
}
# Outside the reference build, say what could not be made here: the
# digits kept that this build prints otherwise, the training runs not run.
if (@unrefreshed) {
    print "quotes: " . scalar(@unrefreshed) . " quote(s) " . ($mode eq '--write' ? 'not refreshed' : 'not compared')
        . " by this build (not the reference build: gcc, the default CFLAGS, an AVX-512 CPU; make docs there"
        . " writes them):\n";
    print "  $_\n" for @unrefreshed;
}
print "quotes: $pass passed, $fail failed" . (@unrefreshed ? ", " . scalar(@unrefreshed) . " left to the reference build"
    : "") . "\n";
exit($fail ? 1 : 0);
