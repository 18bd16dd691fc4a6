#!/usr/bin/env bash
# build-guest.sh [--debootstrap] OUT [BINARY...]: a small Linux guest for
# QEMU, built from Debian's packages without root and without mounting
# anything (docs/undohost.md, "A QEMU guest for tests"):
#
#   OUT/vmlinux     Debian's kernel (linux-image-amd64), uncompressed: QEMU
#                   boots it directly by its PVH entry, which skips the
#                   BIOS and the decompression under TCG
#   OUT/initrd      busybox and the kernel modules the root needs (virtio,
#                   ext4, overlay): it mounts /dev/vda and switches to it
#   OUT/root.qcow2  an ext4 root: busybox, bash, git, and the BINARYs in
#                   /usr/local/bin; /sbin/init brings up /proc, /sys, /dev,
#                   runs /etc/rc.local if there is one, prints
#                   "undosh-guest: ready" on the serial console and reads
#                   commands from it (no echo, no prompt)
#
# With --debootstrap the root is Debian itself, for tests of real apt and
# dpkg: debootstrap --variant=minbase bookworm with git and
# ca-certificates, from the mirror the host's apt uses; the host's busybox
# at /bin/busybox (no applet links: Debian's tools stay Debian's, call
# busybox ip); the BINARYs in /usr/local/bin, copied without libraries
# (they must run on bookworm's); and the same /sbin/init. apt works
# offline there: the package lists are fetched, the .debs stay in
# /var/cache/apt/archives (apt-get install --no-download, dpkg -i), and
# /root/debs holds hello, which is not installed, for a test to dpkg -i.
# This needs root and the network to the mirror.
#
# Needs: apt-get (download only), dpkg-deb, busybox-static, kmod
# (modprobe), e2fsprogs (mkfs.ext4 -d), qemu-utils (qemu-img); with
# --debootstrap, debootstrap and root. Exit 2: the machine lacks one of
# them, as the message says (vmtest skips).
set -euo pipefail
debian=
if [ "${1:-}" = --debootstrap ]; then debian=1; shift; fi
out=${1:?usage: build-guest.sh [--debootstrap] OUT [BINARY...]}
shift
need() { command -v "$1" >/dev/null || { echo "build-guest.sh: needs $1 ($2)" >&2; exit 2; }; }
if [ -n "$debian" ]; then
  [ "$(id -u)" = 0 ] || { echo "build-guest.sh: --debootstrap needs root (debootstrap makes files of other owners, and device nodes): run it, or the test, as root" >&2; exit 2; }
  need debootstrap "apt-get install debootstrap"
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/undosh-guest.XXXXXX")
cleanup() {
  # A debootstrap that failed may leave its mounts (proc, sys) in the
  # root: unmount them first, and never cross into one.
  awk -v w="$work/" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do umount -l "$m" || true; done
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
need apt-get apt
need dpkg-deb dpkg
need busybox "apt-get install busybox-static"
need modprobe "apt-get install kmod"
need depmod "apt-get install kmod"
need mkfs.ext4 "apt-get install e2fsprogs"
need qemu-img "apt-get install qemu-utils"
busybox=$(command -v busybox)
file -L "$busybox" 2>/dev/null | grep -q 'statically linked' || ldd "$busybox" 2>&1 | grep -q 'not a dynamic' ||
  { echo "build-guest.sh: $busybox is not static (apt-get install busybox-static)" >&2; exit 2; }

# The kernel: the package linux-image-amd64 depends on.
pkg=$(apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -1)
[ -n "$pkg" ] || { echo "build-guest.sh: apt knows no linux-image-amd64 (apt-get update)" >&2; exit 2; }
(cd "$work" && apt-get download -q "$pkg" >/dev/null 2>&1) || { echo "build-guest.sh: apt-get download $pkg failed" >&2; exit 2; }
dpkg-deb -x "$work"/"$pkg"_*.deb "$work/k"
kver=${pkg#linux-image-}
vmlinuz=$work/k/boot/vmlinuz-$kver
# vmlinuz is a bzImage whose payload is xz: the ELF inside has the PVH note.
off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$vmlinuz" | head -1 | cut -d: -f1)
tail -c +$((off + 1)) "$vmlinuz" | xz -dc > "$out/vmlinux" 2>/dev/null || true
[ -s "$out/vmlinux" ] || { echo "build-guest.sh: no xz kernel inside $vmlinuz" >&2; exit 2; }

# The initramfs: busybox, the modules, and an init that mounts the root.
i=$work/initrd
mkdir -p "$i"/{bin,dev,proc,sys,newroot,lib/modules}
cp "$busybox" "$i/bin/busybox"
for a in sh mount umount switch_root insmod mkdir sleep cat echo; do ln -s busybox "$i/bin/$a"; done
# The package leaves modules.dep to its postinst: depmod makes it here.
depmod -b "$work/k" "$kver"
mods=$(modprobe -a -d "$work/k" -S "$kver" --show-depends virtio_pci virtio_blk virtio_net virtio_console ext4 overlay crc32c_generic 2>/dev/null |
  awk '$1 == "insmod" {print $2}' | awk '!seen[$0]++')
[ -n "$mods" ] || { echo "build-guest.sh: modprobe found none of the modules the root needs in $pkg" >&2; exit 2; }
: > "$i/modules"
for m in $mods; do
  base=$(basename "$m")
  case "$base" in
    *.xz) xz -dc "$m" > "$i/lib/modules/${base%.xz}"; base=${base%.xz} ;;
    *.zst) zstd -qdc "$m" > "$i/lib/modules/${base%.zst}"; base=${base%.zst} ;;
    *) cp "$m" "$i/lib/modules/$base" ;;
  esac
  echo "$base" >> "$i/modules"
done
cat > "$i/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules); do insmod /lib/modules/$m 2>/dev/null; done
n=0
while [ ! -b /dev/vda ] && [ $n -lt 100 ]; do sleep 0.05; n=$((n + 1)); done
mount -t ext4 /dev/vda /newroot || { echo "undosh-guest: cannot mount /dev/vda"; exec sh; }
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/init
EOF
chmod +x "$i/init"
(cd "$i" && find . | "$busybox" cpio -o -H newc 2>/dev/null) > "$out/initrd"

# copy_with_libs copies program $1 to $2 in the root $r, with the
# libraries it links.
copy_with_libs() {
  cp -L "$1" "$r$2"
  ldd "$1" 2>/dev/null | awk '/=> \// {print $3} /^\t\/lib64/ {print $1}' | while read -r lib; do
    mkdir -p "$r$(dirname "$lib")"
    [ -e "$r$lib" ] || cp -L "$lib" "$r$lib"
  done
}

# small_root makes the small root in $r: busybox's tools, bash and git
# with their libraries, and the binaries given.
small_root() {
  mkdir -p "$r"/{bin,sbin,etc,dev,proc,sys,tmp,run,root,var/tmp,usr/bin,usr/local/bin,lib64,usr/lib/x86_64-linux-gnu}
  chmod 1777 "$r/tmp" "$r/var/tmp"
  cp "$busybox" "$r/bin/busybox"
  for a in $("$busybox" --list); do
    [ -e "$r/bin/$a" ] || ln -s busybox "$r/bin/$a"
  done
  rm -f "$r/bin/sh" "$r/bin/bash"
  copy_with_libs "$(command -v bash)" /bin/bash
  ln -sf bash "$r/bin/sh"
  gitbin=$(command -v git) || { echo "build-guest.sh: needs git" >&2; exit 2; }
  copy_with_libs "$gitbin" /usr/bin/git
  mkdir -p "$r/usr/lib/git-core"
  for b in "$@"; do
    copy_with_libs "$b" "/usr/local/bin/$(basename "$b")"
  done
  cat > "$r/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/bash
EOF
  echo 'root:x:0:' > "$r/etc/group"
  echo 'undosh-guest' > "$r/etc/hostname"
}

# mirror prints the mirror the host's apt uses for bookworm (deb822
# sources, else sources.list), else deb.debian.org.
mirror() {
  local m=
  if [ -r /etc/apt/sources.list.d/debian.sources ]; then
    m=$(awk 'BEGIN { RS = "" } {
      uri = ""; ok = 0; n = split($0, l, "\n")
      for (i = 1; i <= n; i++) {
        if (l[i] ~ /^URIs:/) { split(l[i], f, " "); uri = f[2] }
        if (l[i] ~ /^Suites:/) { k = split(l[i], f, " "); for (j = 2; j <= k; j++) if (f[j] == "bookworm") ok = 1 }
      }
      if (ok && uri ~ /^https?:\/\//) { print uri; exit }
    }' /etc/apt/sources.list.d/debian.sources)
  fi
  if [ -z "$m" ] && [ -r /etc/apt/sources.list ]; then
    m=$(awk '$1 == "deb" { for (i = 2; i < NF; i++) if ($i ~ /^https?:\/\// && $(i + 1) == "bookworm") { print $i; exit } }' /etc/apt/sources.list)
  fi
  echo "${m:-http://deb.debian.org/debian}"
}

# debian_root makes the Debian root in $r (the header says what it holds).
debian_root() {
  local m log b c
  m=$(mirror)
  log=$work/debootstrap.log
  debootstrap --variant=minbase --include=git,ca-certificates bookworm "$r" "$m" >"$log" 2>&1 ||
    { tail -20 "$log" >&2; echo "build-guest.sh: debootstrap bookworm from $m failed (its log above)" >&2; exit 1; }
  # /bin and /sbin are links into /usr (merged /usr): relative ones, or
  # what follows would write to the host's.
  for c in bin sbin lib; do
    case $(readlink "$r/$c" || true) in /*) echo "build-guest.sh: $r/$c links outside the root" >&2; exit 1 ;; esac
  done
  # apt offline in the guest: the lists, then hello fetched, not
  # installed. The resolver is the host's, for these two only.
  chroot "$r" apt-get -q -o Acquire::Languages=none update >"$log" 2>&1 ||
    { cat "$log" >&2; echo "build-guest.sh: apt-get update in the root failed" >&2; exit 1; }
  chroot "$r" apt-get -q -y --download-only install hello >"$log" 2>&1 ||
    { cat "$log" >&2; echo "build-guest.sh: apt-get download of hello in the root failed" >&2; exit 1; }
  rm -f "$r/etc/resolv.conf"
  mkdir -p "$r/root/debs"
  cp "$r"/var/cache/apt/archives/hello_*.deb "$r/root/debs/"
  cp "$busybox" "$r/bin/busybox"
  for b in "$@"; do
    cp -L "$b" "$r/usr/local/bin/$(basename "$b")"
    if chroot "$r" ldd "/usr/local/bin/$(basename "$b")" 2>&1 | grep -q 'not found'; then
      chroot "$r" ldd "/usr/local/bin/$(basename "$b")" >&2 || true
      echo "build-guest.sh: $b does not run on bookworm's libraries (build it on bookworm, or statically)" >&2
      exit 1
    fi
  done
  echo 'undosh-guest' > "$r/etc/hostname"
  printf '127.0.0.1\tlocalhost undosh-guest\n::1\tlocalhost\n' > "$r/etc/hosts"
  for c in bash mount mkdir hostname stty setsid; do
    chroot "$r" /bin/bash -c "command -v $c" >/dev/null ||
      { echo "build-guest.sh: the minbase root has no $c, which /sbin/init runs" >&2; exit 1; }
  done
  ! chroot "$r" dpkg -s hello >/dev/null 2>&1 || { echo "build-guest.sh: hello is installed in the root; the tests want it not" >&2; exit 1; }
}

# write_init writes the /sbin/init of either root.
write_init() {
  cat > "$r/sbin/init" <<'EOF'
#!/bin/bash
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t tmpfs tmpfs /run
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts && mount -t tmpfs tmpfs /dev/shm
hostname -F /etc/hostname
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
[ -x /etc/rc.local ] && /etc/rc.local
# The console is a pipe for the tests (vmtest.Run): no echo, and a shell
# that reads commands from it as a script: no prompt, no line editing.
stty -F /dev/ttyS0 -echo -icanon min 1 -onlcr 2>/dev/null || stty -F /dev/ttyS0 -echo
echo "undosh-guest: ready"
while :; do setsid -c /bin/bash /dev/ttyS0 </dev/ttyS0 >/dev/ttyS0 2>&1; done
EOF
  chmod +x "$r/sbin/init"
}

r=$work/root
if [ -n "$debian" ]; then
  debian_root "$@"
  # Room for what the tests install, and for apt's own files.
  slack=$(( $(du -sm "$r" | cut -f1) / 4 + 256 ))
else
  small_root "$@"
  slack=64
fi
write_init
size=$(( $(du -sm "$r" | cut -f1) + slack ))
mkfs.ext4 -q -F -L undosh-guest -d "$r" -E root_owner=0:0 "$work/root.img" "${size}M"
qemu-img convert -O qcow2 "$work/root.img" "$out/root.qcow2"
echo "$kver" > "$out/kernel-version"
