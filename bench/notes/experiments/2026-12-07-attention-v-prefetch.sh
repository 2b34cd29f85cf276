#!/usr/bin/env bash
# Ran in session 27: -1.3% at depth 32000, flat elsewhere, same bits: not landed (bench/results/2026-12-05-0252-h200-s27-attn-v-prefetch.log).
# Device-call script for 2026-12-07-attention-v-prefetch.patch (decode attention's V rows copied
# into shared memory by cp.async at the split kernel's start, f16 cache; same bits by construction).
# Prepare here (the patch on main, the patched memra beside the bundle's libraries):
#   git apply bench/notes/experiments/2026-12-07-attention-v-prefetch.patch && cmake --build build
#   strip -o /tmp/memra-attn build/memra && xz -c /tmp/memra-attn > .gpu/attn.xz && git checkout src
#   cmake --build build && scripts/gpu-bundle.sh build && rm -rf .fixtures   (main's binaries)
# Carry .gpu/bundle.tar.xz and .gpu/attn.xz (not .gpu/old.xz: the 64 MiB limit). ~4 minutes.
set -u
mkdir -p /tmp/g /tmp/a && tar xJf .gpu/bundle.tar.xz -C /tmp/g && xz -dc .gpu/attn.xz > /tmp/a/memra && chmod +x /tmp/a/memra
export LD_LIBRARY_PATH=/tmp/g/lib
N=/tmp/g/bin/memra A=/tmp/a/memra
{
$N --version; $A --version
M=/tmp/9b-q4_0.gguf
[ -f $M ] || $N synth --arch qwen35 --shape 9b --type q4_0 -o $M >/dev/null 2>&1
IDS=$(seq -s, 100 700)  # 601 decode steps: 5 splits of the last rows
for b in N A; do eval "\$$b" logits -m $M --device cuda --ids $IDS --mode decode -o /tmp/l-$b.bin 2>/dev/null; done
echo -n "logits decode 601 ids main vs patch: "; cmp /tmp/l-N.bin /tmp/l-A.bin && echo identical
row() { grep -E 'tg32' | cut -d'|' -f3,5,6,7 | tr '\n' ' '; echo; }
for r in 1 2; do for b in N A; do
  echo -n "r$r $b d32000 B=1: "; eval "\$$b" bench -m $M --device cuda -p 0 -n 32 -b 1 -d 32000 -r 2 --ctx 32768 2>/dev/null | row
  echo -n "r$r $b d4096 B=16,64: "; eval "\$$b" bench -m $M --device cuda -p 0 -n 32 -b 16,64 -d 4096 -r 2 --ctx 8192 2>/dev/null | row
  echo -n "r$r $b d512 B=1,16: "; eval "\$$b" bench -m $M --device cuda -p 0 -n 32 -b 1,16 -d 512 -r 2 --ctx 8192 2>/dev/null | row
done; done
echo "patch --verify-exact d4096:"; $A bench -m $M --device cuda -p 0 -n 32 -b 16,64 -d 4096 -r 1 --ctx 8192 --verify-exact 2>&1 | grep -E 'differ' | cut -c1-150
} 2>&1 | tee $OUT/attn-v-prefetch.log
