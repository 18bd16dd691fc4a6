#!/usr/bin/env bash
# bash's own test suite (tests/run-*) run by bash and by undosh installed
# under the name bash, side by side in one run, as a user who is not root
# (nobody by default), with `rollback: never` so that the scripts see their
# own writes: the conformance check of issues #9 and #17. It prints the
# scripts whose result differs and the pass counts.
#
# Needs root (to run as the user), apt-get source (it adds a deb-src entry
# for the run and takes it away), gcc and make.
#
#   bench/bashsuite.sh              as nobody
#   AS=node bench/bashsuite.sh      as another user
set -euo pipefail
cd "$(dirname "$0")/.."
AS=${AS:-nobody}
if [ "$(id -u)" != 0 ]; then
  echo "bench/bashsuite.sh: needs root (it runs the suite as $AS)" >&2
  exit 2
fi
work=$(mktemp -d /tmp/undosh-bashsuite.XXXXXX)
src=/etc/apt/sources.list.d/undosh-bashsuite.sources
trap 'rm -rf "$work" "$src"' EXIT
chmod 755 "$work"
. /etc/os-release
printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$VERSION_CODENAME" > "$src"
apt-get update -qq
(cd "$work" && apt-get source -qq --download-only bash >/dev/null 2>&1 && tar xzf bash_*.orig.tar.gz)
rm -f "$src"
b=$(echo "$work"/bash-*/)
(cd "$b" && ./configure -q >/dev/null && make -s -j2 >/dev/null 2>&1 && make -s recho zecho printenv xcase >/dev/null 2>&1)
mkdir "$work/t" "$work/bin"
cp -a "$b/tests" "$b/recho" "$b/zecho" "$b/printenv" "$b/xcase" "$work/t/"
go build -o "$work/bin/undosh" ./cmd/undosh
ln -s undosh "$work/bin/bash"
printf 'version: 1\nrollback: never\n' > "$work/policy.yaml"
cat > "$work/suite.sh" <<'SUITE'
#!/bin/bash
# suite.sh SHELL OUT: each run-* script, pass or fail, into OUT.
sh=$1 out=$2
: > "$out"
cd "$(dirname "$0")/t/tests" || exit 1
export PATH=.:$PWD/..:$PATH THIS_SH=$sh
for f in run-*; do
  case $f in run-all|run-minimal) continue ;; esac
  export BASH_TSTOUT=/tmp/bashsuite-$$-$f
  if timeout 120 "$THIS_SH" ./"$f" >/dev/null 2>&1 </dev/null; then echo "$f pass"; else echo "$f fail"; fi >> "$out"
  rm -f "$BASH_TSTOUT"
done
SUITE
chmod 755 "$work/suite.sh"
chmod -R a+rX "$work"
chown -R "$AS" "$work/t"
chmod 777 "$work"
real=$(command -v bash)
su "$AS" -s /bin/bash -c "'$work/suite.sh' '$real' '$work/bash.txt'"
su "$AS" -s /bin/bash -c "UNDOSH_POLICY='$work/policy.yaml' UNDOSH_REAL_BASH='$real' '$work/suite.sh' '$work/bin/bash' '$work/undosh.txt'"
echo "== scripts whose result differs (< bash, > undosh as bash), as $AS"
diff <(sort "$work/bash.txt") <(sort "$work/undosh.txt") || true
echo "== passed: bash $(grep -c pass "$work/bash.txt") of $(wc -l < "$work/bash.txt"), undosh as bash $(grep -c pass "$work/undosh.txt")"
