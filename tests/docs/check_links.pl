#!/usr/bin/perl
# tests/docs/check_links.pl FILE.md ...: every relative link of the docs
# leads somewhere: [text](path) names a file or folder of the tree, and
# [text](path#anchor) or [text](#anchor) a heading of that file, as GitHub
# makes its anchors (lower case, punctuation dropped, spaces as hyphens, a
# repeated heading numbered -1, -2).  Links to the web are not followed.
# Prints one line per broken link and 'links: N checked, N broken' last.
use strict;
use warnings;
use File::Basename qw(dirname);

my %anchors; # file -> { anchor -> 1 }
sub anchors_of {
    my ($file) = @_;
    return $anchors{$file} if $anchors{$file};
    my (%seen, %a);
    open(my $f, '<', $file) or return $anchors{$file} = {};
    my $fenced = 0;
    while (<$f>) {
        $fenced = !$fenced if /^```/;
        next if $fenced || !/^#{1,6}\s+(.*?)\s*$/;
        (my $slug = lc $1) =~ s/[^\w\- ]//g;
        $slug =~ s/ /-/g;
        my $n = $seen{$slug}++;
        $a{$n ? "$slug-$n" : $slug} = 1;
    }
    return $anchors{$file} = \%a;
}

my ($checked, $broken) = (0, 0);
for my $doc (@ARGV) {
    open(my $f, '<', $doc) or die "check_links.pl: cannot read $doc\n";
    my $fenced = 0;
    while (my $line = <$f>) {
        my $ln = $.;
        $fenced = !$fenced if $line =~ /^```/;
        next if $fenced;
        (my $text = $line) =~ s/`[^`]*`//g; # code spans hold no links
        while ($text =~ /\]\(([^)\s]+)\)/g) {
            my $link = $1;
            next if $link =~ m{^[a-z]+:};
            $checked++;
            my ($path, $anchor) = split /#/, $link, 2;
            my $target = $path eq '' ? $doc : dirname($doc) . "/$path";
            my $why = !-e $target ? "no file $target"
                : defined $anchor && $target =~ /\.md$/ && !anchors_of($target)->{$anchor} ? "no heading #$anchor in $target"
                : '';
            next unless $why;
            $broken++;
            print "FAIL $doc:$ln: ($link): $why\n";
        }
    }
}
print "links: $checked checked, $broken broken\n";
exit($broken ? 1 : 0);
