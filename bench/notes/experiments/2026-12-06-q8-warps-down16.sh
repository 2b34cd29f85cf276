#!/usr/bin/env bash
# Prepared in session 32, not run yet. Two prefill block sizes on top of main (cc61828), in one
# binary (.gpu/next.xz, built from cc61828 + 2026-12-06-q8-warps-down16.patch; the bundle's lib/ is
# .gpu/lib.tar.xz). Both leave bits alone (a block size never changes them): the logits must match.
# - MEMRA_X_Q8_WARPS=9: Q8_0's (2, 8) shape in 9-warp blocks (384-thread instantiation: 168
#   registers, 8-10 local loads / stores in the k-loop; 9 warps' stages are 218 KB, 12 would not fit).
# - MEMRA_X_WIDE_DOWN=16: Q4_0's (2, 8) launches of 8 K segments (ffn_down) in 16-warp blocks
#   (512 threads, 128 registers, 15-16 spills in the loop): 512 blocks, 4 rounds of 132 SMs, instead of
#   704 blocks in 6 (5.33 of work) at 12 warps.
#   bash bench/notes/experiments/2026-12-06-q8-warps-down16.sh   carry [".gpu/lib.tar.xz", ".gpu/next.xz"]   (~2 min)
set -u
mkdir -p /tmp/g && tar xJf .gpu/lib.tar.xz -C /tmp/g && xz -dc .gpu/next.xz > /tmp/g/next && chmod +x /tmp/g/next
export LD_LIBRARY_PATH=/tmp/g/lib
X=/tmp/g/next
row() { grep -E 'tg|pp512' | cut -d'|' -f5,6,7 | tr '\n' ' '; echo; }
{
$X --version; nvidia-smi --query-gpu=name --format=csv,noheader
M=/tmp/9b-q4_0.gguf
$X synth --arch qwen35 --shape 9b --type q4_0 -o $M >/dev/null 2>&1 || echo "synth failed"
$X logits -m $M --device cuda --ids "$(seq -s, 100 400)" --mode prefill -o /tmp/a.bin 2>&1 | grep -v wrote
MEMRA_X_WIDE_DOWN=16 $X logits -m $M --device cuda --ids "$(seq -s, 100 400)" --mode prefill -o /tmp/b.bin 2>&1 | grep -v wrote
echo -n "q4_0 prefill logits down16 vs main: "; cmp /tmp/a.bin /tmp/b.bin && echo identical
for r in 1 2; do
  for d in 0 16; do echo -n "r$r q4_0 down=$d: "; MEMRA_X_WIDE_DOWN=$d $X bench -m $M --device cuda -p 512 -n 0 -r 3 2>/dev/null | row; done
done
for d in 0 16; do
  MEMRA_X_WIDE_DOWN=$d MEMRA_CUDA_PROFILE=1 $X bench -m $M --device cuda -p 512 -n 0 -r 1 2>&1 | grep -E "ffn_down|swiglu"
done
rm -f $M; M=/tmp/9b-q8_0.gguf
$X synth --arch qwen35 --shape 9b --type q8_0 -o $M >/dev/null 2>&1 || echo "q8 synth failed"
$X logits -m $M --device cuda --ids "$(seq -s, 100 400)" --mode prefill -o /tmp/a.bin 2>&1 | grep -v wrote
MEMRA_X_Q8_WARPS=9 $X logits -m $M --device cuda --ids "$(seq -s, 100 400)" --mode prefill -o /tmp/b.bin 2>&1 | grep -v wrote
echo -n "q8_0 prefill logits 9 warps vs main: "; cmp /tmp/a.bin /tmp/b.bin && echo identical
for r in 1 2; do
  for w in 8 9; do echo -n "r$r q8_0 warps=$w: "; MEMRA_X_Q8_WARPS=$w $X bench -m $M --device cuda -p 512 -n 0 -r 3 2>/dev/null | row; done
done
} 2>&1 | tee $OUT/q8-warps-down16.log
