#!/usr/bin/env bash
# Installs what the VM test suites (test/vm) need, with apt. Idempotent: does
# nothing (and prints nothing) when everything is there; runs apt-get update
# only when something is missing. Loud and non-zero on failure.
set -euo pipefail

PKGS=(user-mode-linux qemu-system-x86 linux-image-amd64 busybox-static kmod xz-utils
      ipvsadm ipset iproute2 conntrack nftables iptables)

fail() { echo "vm-deps: $*" >&2; exit 1; }

command -v dpkg-query >/dev/null 2>&1 || fail "dpkg-query not found: the VM suites need a Debian-based machine"
[ "$(uname -m)" = x86_64 ] || fail "the VM suites need an x86_64 machine (found $(uname -m))"

missing=()
for p in "${PKGS[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = installed ] || missing+=("$p")
done

if ((${#missing[@]})); then
  SUDO=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || fail "need root (or sudo) to install: ${missing[*]}"
    SUDO=(sudo -n)
  fi
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  echo "vm-deps: installing ${missing[*]}" >&2
  if ! { "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update &&
         "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    fail "apt-get failed to install: ${missing[*]}"
  fi
fi

# Check what the harness actually uses, not just the package database.
[ -x /usr/bin/linux.uml ] || fail "/usr/bin/linux.uml missing after installing user-mode-linux"
uml_release=$(/usr/bin/linux.uml --version 2>/dev/null | awk 'NR==1{print $1}')
[ -n "$uml_release" ] && [ -f "/usr/lib/uml/modules/$uml_release/modules.dep" ] ||
  fail "no UML modules for release '$uml_release' in /usr/lib/uml/modules"
command -v qemu-system-x86_64 >/dev/null 2>&1 || fail "qemu-system-x86_64 missing"
found_kernel=
for k in /boot/vmlinuz-*; do
  [ -f "$k" ] && [ -f "/lib/modules/${k#/boot/vmlinuz-}/modules.dep" ] && found_kernel=$k
done
[ -n "$found_kernel" ] || fail "no /boot/vmlinuz-* with matching /lib/modules (linux-image-amd64)"
[ -x /bin/busybox ] || fail "/bin/busybox missing (busybox-static)"
for tool in modprobe ipvsadm ipset ip conntrack nft iptables; do
  PATH="$PATH:/usr/sbin:/sbin" command -v "$tool" >/dev/null 2>&1 || fail "$tool missing"
done
exit 0
