#!/usr/bin/env bash
# Device-call script for 2026-12-09-attention-combine-slices.patch: the attention merge cut into 4
# column slices a head (4x the blocks) for rows of 16+ splits (2,048+ keys). Why: Nsight in session
# 27 put the depth-32767 B = 1 merge at 25 us of the layer's ~78 (16 blocks on 132 SMs). Same bits
# by construction (a column's parts and order do not change); the patch's test
# GpuAttentionCombine.SlicesGiveTheSameBits passed in the emulation (9B and tiny shapes, 17+ splits).
# The patched binary reads MEMRA_EXP_COMBINE_SLICES (1 or 4) to force either form, so one binary
# measures both: C = the patch's rule, C1 = one block a head (main's merge). It also reads
# MEMRA_EXP_ATTN_MIN_BLOCKS=3: the split kernel built for 3 blocks an SM (80 registers + 24-40 bytes
# of stack instead of 104: Nsight found it register-bound at 2 blocks, 25% occupancy): C3 = C with it.
# Prepare here: git apply the patch, build, /work/notes/mkbin.sh comb (-> .gpu/comb.xz), git checkout
# src tests, rebuild, scripts/gpu-bundle.sh build. Carry .gpu/bundle.tar.xz and .gpu/comb.xz. ~6 min.
set -u
mkdir -p /tmp/g /tmp/c && tar xJf .gpu/bundle.tar.xz -C /tmp/g && xz -dc .gpu/comb.xz > /tmp/c/memra && chmod +x /tmp/c/memra
export LD_LIBRARY_PATH=/tmp/g/lib
C=/tmp/c/memra
run() {
  local b=$1
  shift
  case $b in C) $C "$@" ;; C1) MEMRA_EXP_COMBINE_SLICES=1 $C "$@" ;; C3) MEMRA_EXP_ATTN_MIN_BLOCKS=3 $C "$@" ;; esac
}
{
$C --version
M=/tmp/9b-q4_0.gguf
[ -f $M ] || $C synth --arch qwen35 --shape 9b --type q4_0 -o $M >/dev/null 2>&1
IDS=$(seq -s, 100 2400)  # 2,301 decode steps: rows of 1-18 splits
for b in C C1 C3; do run $b logits -m $M --device cuda --ids $IDS --mode decode -o /tmp/l-$b.bin 2>/dev/null; done
echo -n "logits decode 2301 ids sliced vs one block a head: "; cmp /tmp/l-C.bin /tmp/l-C1.bin && echo identical
echo -n "logits decode 2301 ids split kernel at 3 blocks an SM vs 2: "; cmp /tmp/l-C.bin /tmp/l-C3.bin && echo identical
row() { grep -E 'tg32' | cut -d'|' -f3,5,6,7 | tr '\n' ' '; echo; }
for r in 1 2; do for b in C1 C C3; do
  echo -n "r$r $b d32000 B=1: "; run $b bench -m $M --device cuda -p 0 -n 32 -b 1 -d 32000 -r 2 --ctx 32768 2>/dev/null | row
  echo -n "r$r $b d4096 B=1,16,64: "; run $b bench -m $M --device cuda -p 0 -n 32 -b 1,16,64 -d 4096 -r 2 --ctx 8192 2>/dev/null | row
done; done
echo "sliced --verify-exact d4096:"; $C bench -m $M --device cuda -p 0 -n 32 -b 16,64 -d 4096 -r 1 --ctx 8192 --verify-exact 2>&1 | grep -E 'differ' | cut -c1-150
} 2>&1 | tee $OUT/attn-combine-slices.log
