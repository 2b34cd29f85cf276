#!/usr/bin/env bash
# Session 32, device call 1: the (2, 8) tile shape with 12 or 16 warps a block (Q4_0, Q4_K,
# MEMRA_X_WIDE_WARPS on branch x-wide; the default is main's 8). ptxas: 8 warps 199-201 registers
# (one 8-warp block an SM: 138 KB of stages), 12 warps 168 + 72-80 bytes of stack (1 spill op in the
# k-loop), 16 warps 128 + 16 spill ops in the loop. The shape never changes bits.
#   bash bench/notes/experiments/2026-12-05-wide-warps.sh   carry [".gpu/lib.tar.xz", ".gpu/wide.xz"]
set -u
mkdir -p /tmp/g && tar xJf .gpu/lib.tar.xz -C /tmp/g && xz -dc .gpu/wide.xz > /tmp/g/wide && chmod +x /tmp/g/wide
export LD_LIBRARY_PATH=/tmp/g/lib
W=/tmp/g/wide M=/tmp/9b-q4_0.gguf
row() { grep -E 'tg32|pp512' | cut -d'|' -f5,6,7 | tr '\n' ' '; echo; }
{
$W --version; nvidia-smi --query-gpu=name --format=csv,noheader
$W synth --arch qwen35 --shape 9b --type q4_0 -o $M >/dev/null 2>&1 || echo "synth failed"
for w in 0 12 16; do
  MEMRA_X_WIDE_WARPS=$w $W logits -m $M --device cuda --ids "$(seq -s, 100 400)" --mode prefill -o /tmp/l-$w.bin 2>&1 | grep -v wrote
done
echo -n "prefill logits 0 vs 12: "; cmp /tmp/l-0.bin /tmp/l-12.bin && echo identical
echo -n "prefill logits 0 vs 16: "; cmp /tmp/l-0.bin /tmp/l-16.bin && echo identical
for r in 1 2; do
  for w in 0 12 16; do
    echo -n "r$r wide=$w: "; MEMRA_X_WIDE_WARPS=$w $W bench -m $M --device cuda -p 512 -n 32 -b 32,64 -d 512 -r 2 2>/dev/null | row
  done
done
for w in 0 12; do
  MEMRA_X_WIDE_WARPS=$w MEMRA_CUDA_PROFILE=1 $W bench -m $M --device cuda -p 512 -n 0 -r 1 2>&1 | grep -A30 cuda-profile > $OUT/profile-pp512-w$w.txt
done
rm -f $M; K=/tmp/9b-q4_k.gguf
$W synth --arch qwen35 --shape 9b --type q4_k -o $K >/dev/null 2>&1 || echo "q4_k synth failed"
for w in 0 12; do
  MEMRA_X_WIDE_WARPS=$w $W logits -m $K --device cuda --ids "$(seq -s, 100 400)" --mode prefill -o /tmp/k-$w.bin 2>&1 | grep -v wrote
done
echo -n "q4_k prefill logits 0 vs 12: "; cmp /tmp/k-0.bin /tmp/k-12.bin && echo identical
for r in 1 2; do
  for w in 0 12; do
    echo -n "r$r q4_k wide=$w: "; MEMRA_X_WIDE_WARPS=$w $W bench -m $K --device cuda -p 512 -n 32 -b 64 -d 512 -r 2 2>/dev/null | row
  done
done
} 2>&1 | tee $OUT/wide-warps.log
