#!/usr/bin/env bash
# Device-call script: weight prefetch into L2 (MEMRA_CUDA_PREFETCH_MB, session 28). The binary
# .gpu/pf.xz is main + the prefetch + two experiment-only env switches: MEMRA_EXP_PREFETCH_POINTS
# (bit 1: the mixer's out matrix before its core, 2: the FFN's first matrices before the mixer's
# core, 4: ffn_down after the SwiGLU, 8: the next layer's projections after ffn_down; default 15)
# and MEMRA_EXP_PREFETCH_LAST=1 (the prefetched lines under an L2 evict_last policy); and
# MEMRA_EXP_EVICT_FIRST=1: every matmul's weight copies under an L2 evict_first policy.
# Carry .gpu/bundle.tar.xz (libraries) and .gpu/pf.xz. ~3 min. Ran in session 28: every prefetch size
# lost (bench/results/2026-12-05-0540-h200-s28-l2-prefetch.log); evict_first landed (d924ea6).
set -u
mkdir -p /tmp/g /tmp/p && tar xJf .gpu/bundle.tar.xz -C /tmp/g && xz -dc .gpu/pf.xz > /tmp/p/memra && chmod +x /tmp/p/memra
export LD_LIBRARY_PATH=/tmp/g/lib
P=/tmp/p/memra
{
$P --version
M=/tmp/9b-q4_0.gguf
[ -f $M ] || $P synth --arch qwen35 --shape 9b --type q4_0 -o $M >/dev/null 2>&1
IDS=$(seq -s, 100 400)
$P logits -m $M --device cuda --ids $IDS --mode decode -o /tmp/l-0.bin 2>/dev/null
MEMRA_CUDA_PREFETCH_MB=16 $P logits -m $M --device cuda --ids $IDS --mode decode -o /tmp/l-16.bin 2>/dev/null
echo -n "logits decode 301 ids prefetch 16 MB vs off: "; cmp /tmp/l-0.bin /tmp/l-16.bin && echo identical
row() { grep -E 'tg32' | cut -d'|' -f6,7 | tr '\n' ' '; echo; }
cfg() {  # name MB POINTS LAST [EVICT_FIRST]
  echo -n "$1 B=1,16,64 d512: "
  MEMRA_CUDA_PREFETCH_MB=$2 MEMRA_EXP_PREFETCH_POINTS=$3 MEMRA_EXP_PREFETCH_LAST=$4 MEMRA_EXP_EVICT_FIRST=${5:-0} \
    $P bench -m $M --device cuda -p 0 -n 32 -b 1,16,64 -d 512 -r 2 2>/dev/null | row
}
for r in 1 2; do
  cfg "r$r off    " 0 15 0
  cfg "r$r 8MB    " 8 15 0
  cfg "r$r 16MB   " 16 15 0
  cfg "r$r 32MB   " 32 15 0
  cfg "r$r 16MB L " 16 15 1
  cfg "r$r 16MB p3" 16 3 0
  cfg "r$r 16MB p1" 16 1 0
  cfg "r$r off EF " 0 15 0 1
  cfg "r$r 16MB EF" 16 15 0 1
done
echo "prefetch 16 MB --verify-exact:"; MEMRA_CUDA_PREFETCH_MB=16 $P bench -m $M --device cuda -p 0 -n 32 -b 16 -d 512 -r 1 --verify-exact 2>&1 | grep -E 'differ' | cut -c1-150
rm -f $M
M=/tmp/35b.gguf
$P synth --arch qwen35moe --shape 35b-a3b --type q4_0 -o $M >/dev/null 2>&1
for r in 1 2; do for mb in 0 16; do
  echo -n "r$r 35B-A3B ${mb}MB B=1,16: "; MEMRA_CUDA_PREFETCH_MB=$mb $P bench -m $M --device cuda -p 0 -n 32 -b 1,16 -d 512 -r 2 2>/dev/null | row
done; done
MEMRA_CUDA_PROFILE=1 $P bench -m $M --device cuda -p 0 -n 16 -b 1 -d 0 -r 1 2>&1 | grep -A45 'cuda-profile' > $OUT/moe-profile-b1.txt
} 2>&1 | tee $OUT/l2-prefetch.log
