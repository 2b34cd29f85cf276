#!/usr/bin/env bash
# Session 48, call 1. The experiment binary (X, T) is main 2bc57fd + 2026-12-07-s47-early-epilogue.patch
# + 2026-12-07-s48-moe-prefetch.patch, switched by environment:
#   MEMRA_EXP_EARLY_EPI=0|1 (default 1): the one-row streaming matmul's epilogue reads after the PDL wait;
#   MEMRA_EXP_MOE_PF=bits (default 0): at one row the routing launch (MEMRA_EXP_PF_BLOCKS one-warp blocks,
#     default 132) prefetches into L2 the selected experts' gate (1), up (2), down (4) matrices and,
#     with 8, the shared expert's (before its PDL wait);
#   MEMRA_EXP_GSTAGES=2|4 (default 2): grouped one-row Q4_0 launches with 4 pipeline stages.
# Every switch keeps the bits (prefetch and pipeline depth never change values): the logits cmp and
# --verify-exact below check it. Carry .gpu/X.xz .gpu/T.xz .gpu/lib.tar.xz .gpu/fx.tar.xz.
set -u
source bench/notes/experiments/device-x.sh
L=$OUT/s48-a.log
{
nvidia-smi --query-gpu=name --format=csv,noheader
$X synth --arch qwen35 --shape 9b --type q4_0 -o $f9 > /dev/null 2>&1
$X synth --arch qwen35moe --shape 35b-a3b --type q4_0 -o $f35 > /dev/null 2>&1 &
echo "tests (early epilogue on):"
gpu_tests 'GpuMatmul.*:GpuOps.Matmul:GpuModel.TinyFixtures*:GpuPrefixCache.*'
wait
echo "tests (MoE, every switch on):"
MEMRA_EXP_MOE_PF=15 MEMRA_EXP_GSTAGES=4 gpu_tests 'GpuMoe.*:GpuOps.Moe*'
IDS=$(seq -s, 100 164)
timeout 60 env MEMRA_EXP_EARLY_EPI=0 $X logits -m $f35 --device cuda --ids $IDS --mode decode -o /tmp/l0.bin 2>/dev/null
timeout 60 env MEMRA_EXP_MOE_PF=15 MEMRA_EXP_GSTAGES=4 $X logits -m $f35 --device cuda --ids $IDS --mode decode -o /tmp/l1.bin 2>/dev/null
echo -n "35B logits decode 65 ids, all switches vs none: "; cmp /tmp/l0.bin /tmp/l1.bin && echo identical
b35() { echo -n "$1: "; shift; timeout 60 env "$@" $X bench -m $f35 --device cuda -p 0 -n 64 -b 1 -d 512 -r 3 --ctx 2048 2>/dev/null | rows; }
for r in 1 2; do
  for e in 0 1; do
    echo -n "r$r 9B epi=$e: "; MEMRA_EXP_EARLY_EPI=$e timeout 60 $X bench -m $f9 --device cuda -p 0 -n 128 -r 3 --ctx 2048 2>/dev/null | rows
  done
  b35 "r$r 35B base     " MEMRA_EXP_EARLY_EPI=0
  b35 "r$r 35B epi      " MEMRA_EXP_EARLY_EPI=1
  b35 "r$r 35B epi g4   " MEMRA_EXP_GSTAGES=4
  b35 "r$r 35B epi pf15 " MEMRA_EXP_MOE_PF=15
  b35 "r$r 35B epi pf12 " MEMRA_EXP_MOE_PF=12
  b35 "r$r 35B pf15 g4  " MEMRA_EXP_MOE_PF=15 MEMRA_EXP_GSTAGES=4
done
timeout 120 env MEMRA_EXP_MOE_PF=15 MEMRA_EXP_GSTAGES=4 $X bench -m $f35 --device cuda -p 0 -n 32 -b 4,16 -d 512 -r 1 --ctx 2048 --verify-exact 2>&1 | grep -E 'verify-exact|error'
} 2>&1 | tee $L
