#!/usr/bin/env bash
# Packs a CUDA build for a GPU machine that lacks this machine's libraries: the stripped memra and
# memra_tests plus the shared libraries they need beyond a bare CUDA image (cpp-httplib and its
# TLS/compression dependencies, libgomp), xz-compressed into .gpu/bundle.tar.xz, and the test
# fixtures into .fixtures/ (both ignored by git). On the GPU machine:
#   mkdir -p /tmp/g && tar xJf .gpu/bundle.tar.xz -C /tmp/g
#   LD_LIBRARY_PATH=/tmp/g/lib BUILD=/tmp/g/bin scripts/gpu-check.sh [tests|bench|batch|serve]
# Usage: scripts/gpu-bundle.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
for b in memra memra_tests; do
  [ -x "$BUILD/$b" ] || { echo "gpu-bundle: $BUILD/$b is missing: build first (README command 1)" >&2; exit 1; }
done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" .gpu
strip -o "$stage/bin/memra_tests" "$BUILD/memra_tests"
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
ldd "$BUILD/memra" "$BUILD/memra_tests" | awk '/=> \// {print $3}' | sort -u |
  grep -E 'libcpp-httplib|libssl|libcrypto|libbrotli|libgomp|libz\.|libzstd' | while read -r lib; do
  cp -L "$lib" "$stage/lib/"
done
tar cJf .gpu/bundle.tar.xz -C "$stage" bin lib
# The fixtures the GPU tests read (FIXTURES, default the dense ones: the transfer limit does not
# hold all four with the binaries and the demo model).
rm -rf .fixtures && mkdir -p .fixtures
for f in ${FIXTURES:-qwen35-tiny qwen3-tiny}; do cp -f ../shared/fixtures/"$f".* .fixtures/; done
echo "gpu-bundle: .gpu/bundle.tar.xz ($(du -h .gpu/bundle.tar.xz | cut -f1)), .fixtures ($(du -sh .fixtures | cut -f1))"
