#!/usr/bin/env bash
# Packs a CUDA build for a GPU machine that lacks this machine's libraries: the stripped memra and
# memra_tests plus the shared libraries they need beyond a bare CUDA image (cpp-httplib and its
# TLS/compression dependencies, libgomp), xz-compressed into .gpu/bundle.tar.xz, and the test
# fixtures into .fixtures/ (both ignored by git). On the GPU machine:
#   mkdir -p /tmp/g && tar xJf .gpu/bundle.tar.xz -C /tmp/g
#   LD_LIBRARY_PATH=/tmp/g/lib BUILD=/tmp/g/bin scripts/gpu-check.sh [tests|bench|batch|serve]
# Usage: scripts/gpu-bundle.sh [BUILD_DIR]   (default: build)
#        scripts/gpu-bundle.sh --memra NAME [BUILD_DIR]
# The second form packs only memra (relinked without the demo model, stripped) as .gpu/NAME.xz
# (~8 MB), and the libraries alone as .gpu/lib.tar.xz: a second binary for comparisons in one
# device call (several builds' memra beside one bundle). On the GPU machine:
#   mkdir -p /tmp/g && tar xJf .gpu/lib.tar.xz -C /tmp/g && xz -dc .gpu/NAME.xz > /tmp/g/NAME &&
#   chmod +x /tmp/g/NAME && LD_LIBRARY_PATH=/tmp/g/lib /tmp/g/NAME ...
set -euo pipefail
cd "$(dirname "$0")/.."
ONLY=""
if [ "${1:-}" = "--memra" ]; then
  ONLY=${2:?"gpu-bundle: --memra needs a NAME (written to .gpu/NAME.xz)"}
  shift 2
fi
BUILD=${1:-build}
for b in memra memra_tests; do
  [ -n "$ONLY" ] && [ "$b" = memra_tests ] && continue
  [ -x "$BUILD/$b" ] || { echo "gpu-bundle: $BUILD/$b is missing: build first (README command 1)" >&2; exit 1; }
done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" .gpu
[ -n "$ONLY" ] || strip -o "$stage/bin/memra_tests" "$BUILD/memra_tests"
# memra relinked without the embedded demo model (28 MB that a GPU benchmark never reads, and the
# device machine's 64 MiB transfer limit counts): an empty blob in its place, so `memra run`
# without -m fails there with a clear GGUF error instead.
if grep -q 'embedded_model.S.o' <(cd "$BUILD" && ninja -t commands memra | tail -1); then
  printf '.section .rodata.memra_demo,"a"\n.global memra_demo_model_begin\n.global memra_demo_model_end\nmemra_demo_model_begin:\nmemra_demo_model_end:\n.section .note.GNU-stack,"",@progbits\n' \
    > "$stage/empty_model.S"
  cc -c "$stage/empty_model.S" -o "$stage/empty_model.o"
  link=$(cd "$BUILD" && ninja -t commands memra | tail -1 | sed -e 's/^: && //' -e 's/ && :$//' \
    -e "s# CMakeFiles/memra.dir/embedded_model.S.o # $stage/empty_model.o #" -e "s# -o memra # -o $stage/bin/memra #")
  (cd "$BUILD" && eval "$link")
  strip "$stage/bin/memra"
else
  strip -o "$stage/bin/memra" "$BUILD/memra"
fi
# Libraries outside glibc/libstdc++ (present on any Linux image) that the binaries link.
ldd "$BUILD/memra" $([ -n "$ONLY" ] || echo "$BUILD/memra_tests") | awk '/=> \// {print $3}' | sort -u |
  grep -E 'libcpp-httplib|libssl|libcrypto|libbrotli|libgomp|libz\.|libzstd' | while read -r lib; do
  cp -L "$lib" "$stage/lib/"
done
if [ -n "$ONLY" ]; then
  xz -T0 -6 -c "$stage/bin/memra" > ".gpu/$ONLY.xz"
  tar cJf .gpu/lib.tar.xz -C "$stage" lib
  echo "gpu-bundle: .gpu/$ONLY.xz ($(du -h ".gpu/$ONLY.xz" | cut -f1)), .gpu/lib.tar.xz ($(du -h .gpu/lib.tar.xz | cut -f1))"
  exit 0
fi
tar cJf .gpu/bundle.tar.xz -C "$stage" bin lib
# The fixtures the GPU tests read (FIXTURES, default the dense ones: the transfer limit does not
# hold all four with the binaries and the demo model).
rm -rf .fixtures && mkdir -p .fixtures
for f in ${FIXTURES:-qwen35-tiny qwen3-tiny}; do cp -f ../shared/fixtures/"$f".* .fixtures/; done
echo "gpu-bundle: .gpu/bundle.tar.xz ($(du -h .gpu/bundle.tar.xz | cut -f1)), .fixtures ($(du -sh .fixtures | cut -f1))"
