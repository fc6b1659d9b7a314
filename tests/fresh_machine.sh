#!/usr/bin/env bash
# tests/fresh_machine.sh DIR [MAKE_ARGS...]: the README's promise on a new
# machine.  As root on Debian: a minimal Debian 12 (debootstrap's minbase,
# nothing but the required packages) in DIR, plus gcc, make and git; a
# clone of this repository's HEAD in it; then `make test` (or make
# MAKE_ARGS test, e.g. CC=clang) run there as a user's first command would.
# Its output is DIR/make-test.log; the status is make test's.  Not part of
# make test (it downloads a system and every package make test adds);
# docs/testing.md says when to run it.
#
#   bash tests/fresh_machine.sh /var/tmp/fresh               # gcc
#   bash tests/fresh_machine.sh /var/tmp/fresh CC=clang      # then clang
set -eu
dir=$1
shift
repo=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "fresh_machine.sh: run as root (debootstrap, chroot)"; exit 2; }
command -v debootstrap > /dev/null || apt-get install -y -qq debootstrap > /dev/null
if [ ! -x "$dir/usr/bin/apt-get" ]; then
    mirror=$(sed -n 's/^URIs: *//p; s/^deb \(http[^ ]*\) .*/\1/p' /etc/apt/sources.list.d/*.sources \
        /etc/apt/sources.list 2> /dev/null | grep -v security | head -n 1)
    debootstrap --variant=minbase bookworm "$dir" "$mirror" > "$dir.debootstrap.log" 2>&1
fi
cp /etc/resolv.conf "$dir/etc/"
# a network that intercepts TLS with an authority of its own (as some
# sandboxes and company networks do): the chroot trusts what this machine
# trusts, so npm reaches its registry as it does here
cp /etc/ssl/certs/ca-certificates.crt "$dir/etc/host-ca.crt" 2> /dev/null || true
for d in proc sys dev dev/pts dev/shm; do
    mountpoint -q "$dir/$d" || mount --bind "/$d" "$dir/$d"
done
trap 'for d in dev/shm dev/pts dev sys proc src; do umount "$dir/$d" 2> /dev/null || true; done' EXIT
mkdir -p "$dir/src"
mountpoint -q "$dir/src" || mount --bind -o ro "$repo" "$dir/src"
chroot "$dir" bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc make git libc6-dev > /dev/null'
chroot "$dir" bash -c 'cd /root && rm -rf attograd && git clone -q /src attograd'
echo "fresh_machine.sh: $(chroot "$dir" dpkg -l | grep -c '^ii') packages; make $* test in $dir/root/attograd"
chroot "$dir" env NODE_EXTRA_CA_CERTS=/etc/host-ca.crt bash -c "cd /root/attograd && make $* test" \
    > "$dir/make-test.log" 2>&1 && rc=0 || rc=$?
head -n 3 "$dir/make-test.log"
tail -n 2 "$dir/make-test.log"
exit $rc
