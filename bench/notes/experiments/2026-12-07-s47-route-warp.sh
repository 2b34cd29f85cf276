#!/usr/bin/env bash
# Session 47: the one-row MoE routing in one warp (k_moe.cu route_row_warp_kernel) against the block
# kernel at one row (MEMRA_EXP_ROUTE_BLOCK=1 in that call's build: a switch in moe_route, gone when the
# kernel landed), 35B-A3B Q4_0 tg64 B = 1, two
# alternations; the GPU MoE tests, the dense fixture tests (TinyFixtures, GpuPrefixCache: not run on
# main's 2bb823e yet), --verify-exact at B = 4 / 16 (each sequence alone takes the one-warp form).
# Carry .gpu/X.xz (memra), .gpu/T.xz (memra_tests), .gpu/lib.tar.xz, .gpu/fx.tar.xz (dense fixtures).
set -u
source bench/notes/experiments/device-x.sh
{
nvidia-smi --query-gpu=name --format=csv,noheader
$X synth --arch qwen35moe --shape 35b-a3b --type q4_0 -o $f35 > /dev/null 2>&1 &
gpu_tests 'GpuMoe.*:GpuOps.Moe*:GpuModel.TinyFixtures*:GpuPrefixCache.*'
wait
for r in 1 2; do for e in 1 0; do
  echo "r$r 35B route_block=$e"
  MEMRA_EXP_ROUTE_BLOCK=$e timeout 100 $X bench -m $f35 --device cuda -p 0 -n 64 -b 1 -d 512 -r 3 --ctx 2048 2>/dev/null | rows
done; done
timeout 150 $X bench -m $f35 --device cuda -p 0 -n 32 -b 4,16 -d 512 -r 1 --ctx 2048 --verify-exact 2>&1 | grep -E 'verify-exact|error'
} 2>&1 | tee $OUT/s47-route-warp.log
