#!/usr/bin/env bash
# The addon's prebuilds the package ships (docs/releasing.md): prebuilds/linux-x64 and
# prebuilds/linux-arm64, one N-API build per platform and architecture (any Node.js >= 20.19),
# stripped, tagged glibc, made by prebuildify. The other architecture is cross-compiled with
# Debian's cross g++; without it this fails rather than ship a package missing a prebuild.
# Built in a scratch copy of the native sources: `node-gyp rebuild` would wipe the tree's build/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

host=$(node -p process.arch)
case $host in
  x64 | arm64) ;;
  *) echo "prebuild: builds the linux x64 and arm64 prebuilds from an x64 or arm64 machine, not $host" >&2; exit 1 ;;
esac
# target arch -> GNU triplet, and the Debian package of its cross g++
declare -A triplet=([x64]=x86_64-linux-gnu [arm64]=aarch64-linux-gnu)
declare -A cross_pkg=([x64]=g++-x86-64-linux-gnu [arm64]=g++-aarch64-linux-gnu)
for arch in x64 arm64; do
  if [ "$arch" != "$host" ] && ! command -v "${triplet[$arch]}-g++" >/dev/null; then
    echo "prebuild: the linux-$arch prebuild needs the cross compiler ${triplet[$arch]}-g++: apt-get install ${cross_pkg[$arch]}" >&2
    exit 1
  fi
done
if [ ! -x node_modules/.bin/prebuildify ] || [ ! -x node_modules/.bin/node-gyp ]; then
  echo "prebuild: prebuildify and node-gyp are development dependencies: run npm ci first" >&2
  exit 1
fi

# Against this Node's own headers (N-API: any version's headers serve), never downloaded.
if [ -z "${npm_config_nodedir:-}" ]; then
  nodedir=$(dirname "$(dirname "$(command -v node)")")
  [ -f "$nodedir/include/node/node_api.h" ] && export npm_config_nodedir=$nodedir
fi
export JOBS=${JOBS:-$(nproc)}
export npm_config_loglevel=${npm_config_loglevel:-warn}

scratch=$(mktemp -d "${TMPDIR:-/tmp}/ipvsync-prebuild.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/scripts"
cp -r binding.gyp package.json native "$scratch/"
rm -rf "$scratch/native/fuzz"
cp scripts/native-sources.cjs "$scratch/scripts/"
ln -s "$root/node_modules" "$scratch/node_modules"

rm -rf prebuilds
for arch in x64 arm64; do
  t0=$SECONDS
  # libstdc++ stays shared: linked in statically it needs glibc 2.36 (its random_device's
  # arc4random) instead of 2.34 and GCC 12's libstdc++ (GLIBCXX_3.4.30).
  env=()
  strip=strip
  if [ "$arch" != "$host" ]; then
    p=${triplet[$arch]}
    env=(CC="$p-gcc" CXX="$p-g++" LINK="$p-g++" AR="$p-ar")
    strip=$p-strip
  fi
  # the compiler's chatter to stderr: npm pack --json prints its JSON on stdout
  env "${env[@]}" node_modules/.bin/prebuildify --napi --strip --strip-bin "$strip" --tag-libc --arch "$arch" \
    --target "node@$(node -p process.versions.node)" --cwd "$scratch" --out "$root" >&2
  f=$(ls prebuilds/linux-$arch/*.node)
  echo "prebuild: $f ($(stat -c %s "$f") bytes, $((SECONDS - t0)) s)" >&2
done

# A prebuild that needs a newer glibc than the host's own build would load on fewer systems
# than the x64 one: refuse it.
glibc() { "$1" -T "$2" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1; }
objdump_for() { if [ "$1" = "$host" ]; then echo objdump; else echo "${triplet[$1]}-objdump"; fi; }
need_host=$(glibc "$(objdump_for "$host")" "prebuilds/linux-$host/ipvsync.glibc.node")
for arch in x64 arm64; do
  need=$(glibc "$(objdump_for "$arch")" "prebuilds/linux-$arch/ipvsync.glibc.node")
  if [ "$(printf '%s\n%s\n' "$need" "$need_host" | sort -V | tail -n 1)" != "$need_host" ]; then
    echo "prebuild: linux-$arch needs glibc $need, newer than linux-$host's $need_host" >&2
    exit 1
  fi
  echo "prebuild: linux-$arch needs glibc >= $need" >&2
done
