#!/usr/bin/perl
# tests/deps_commands.pl FILE...: the programs that the test scripts and make
# files run, one line each: "NAME FILE:LINE" (the first place it is run).
#
# A shell or make line is cut at | ; && || $( ` ( { and at the words that
# start a command (then, do, else, !, exec, nohup, setsid, env, timeout N,
# time, command -v); the first word of each piece is the program.  Comments,
# here-documents, variable assignments, functions the scripts define, paths
# ($VAR/x, build/x, ./x) and shell built-ins are not programs.  Python,
# JavaScript and C files are searched for what they spawn (subprocess,
# spawn/execFile, popen/system).
use strict;
use warnings;

my %builtin = map { $_ => 1 } qw(
  alias bg break cd command compgen complete continue declare dirs disown echo
  enable eval exec exit export false fc fg getopts hash help history jobs kill
  let local logout mapfile popd printf pushd pwd read readarray readonly return
  set shift shopt source suspend test times trap true type typeset ulimit umask
  unalias unset wait if then else elif fi for while until do done case esac in
  function select time coproc
);
my %prefix = map { $_ => 1 } qw(then do else elif if while until ! exec nohup setsid env time command builtin
  sudo nice xargs);
my %first;

sub add {
    my ($name, $where) = @_;
    return if $name eq '' || $name =~ m{[/\$=\@%]} || $name =~ /^[-.\d]/ || $name !~ /^[A-Za-z][\w.+-]*$/;
    return if $builtin{$name};
    $first{$name} //= $where;
}

sub shell_line {
    my ($line, $where, $make) = @_;
    $line =~ s/\$\$/\$/g if $make;
    $line =~ s/^\s*[\w.-]+\s*\(\)\s*\{?//;    # a function's head
    for my $piece (split /\|\||&&|[|;`{}]|\$\(|\(/, $line) {
        my @w = split ' ', $piece;
        shift @w while @w && $w[0] =~ /^\w+=/;  # VAR=value before a command
        while (@w && $prefix{$w[0]}) {
            my $p = shift @w;
            shift @w while @w && $w[0] =~ /^-/;                      # its flags
            shift @w while $p eq 'env' && @w && $w[0] =~ /^\w+=/;
        }
        if (@w && $w[0] eq 'timeout') { shift @w; shift @w while @w && $w[0] =~ /^[-\d"\$]/; }
        add($w[0], $where) if @w;
    }
}

# A shell or make file's lines without comments and here-documents, and its
# quoted text (which may span lines: awk programs) emptied, line numbers kept.
sub code_lines {
    my ($fh, $make) = @_;
    my ($here, @lines);
    while (my $line = <$fh>) {
        if (defined $here) { undef $here if $line =~ /^\s*\Q$here\E\s*$/; push @lines, "\n"; next; }
        $here = $1 if $line =~ /<<-?\s*['"]?(\w+)['"]?/;
        $line = "\n" if $line =~ /^\s*#/;
        $line = "\n" if $make && $line !~ /^\t/ && !(@lines && $lines[-1] =~ /\\\n$/);
        $line =~ s/^\t[@+-]*// if $make;
        $line =~ s/(^|\s)#[^'"]*$/$1\n/;
        push @lines, $line;
    }
    my $text = join '', @lines;
    $text =~ s{('[^']*'|"(?:[^"\\]|\\.)*")}{ my $q = $1; ($q =~ tr/\n//) ? "''" . ("\n" x ($q =~ tr/\n//)) : "''" }ge;
    return split /(?<=\n)/, $text;
}

my @all;    # [name, file, line]
my %defs;   # file => {name => 1}
for my $file (@ARGV) {
    open my $fh, '<', $file or die "$file: $!";
    my $make = $file =~ /(\.mk|Makefile)$/ ? 1 : 0;
    my $lang = $file =~ /\.(py|js|c|h)$/ ? $1 : 'sh';
    my @lines;
    if ($lang eq 'sh') { @lines = code_lines($fh, $make); }
    else { @lines = <$fh>; }
    %first = ();
    my $n = 0;
    for my $line (@lines) {
        $n++;
        if ($lang ne 'sh') {
            while ($line =~ /(?:subprocess\.\w+|Popen|spawnSync|spawn|execFileSync|execFile|popen|system)\s*\(\s*\[?\s*['"]([\w.+-]+)/g) {
                add($1, $n);
            }
            next;
        }
        $defs{$file}{$1} = 1 if $line =~ /^\s*(?:function\s+)?([\w-]+)\s*\(\)/;
        shell_line($line, $n, $make);
    }
    push @all, [$_, $file, $first{$_}] for keys %first;
}
# the functions of the files that scripts source are everyone's
my %shared = map { %{ $defs{$_} // {} } } grep { m{(^|/)(lib|browser)\.sh$} } keys %defs;
my %seen;
for my $c (sort { $a->[0] cmp $b->[0] || $a->[1] cmp $b->[1] } @all) {
    my ($name, $file, $line) = @$c;
    next if $defs{$file}{$name} || $shared{$name} || $seen{$name}++;
    print "$name $file:$line\n";
}
