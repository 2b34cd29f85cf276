#!/usr/bin/env bash
# Session 46's device call (ran: bench/results/2026-12-07-0800-h100-session46.md). Carry
# .gpu/bundle.tar.xz (the experiment build, 2026-12-07-s46-experiment-build.patch on 3098888:
# s45's patch + the MoE placement landed in 2bb823e, with the experiment-only switches
# MEMRA_EXP_ATTN_BLOCKS = 2 / 3 / 4 and MEMRA_EXP_ROUTE_SERIAL = 1 for main's serial placement) and
# .gpu/B0.xz (main's memra; src as f452e10).
#   a: s45.sh y (MixedDepths + sampling tests at 4 blocks; 8-bit tg64 B = 1 @ d0 / d32768 main vs 4 / 3
#      blocks; f16 B = 1 / 16 @ d512 main vs candidate; two alternations), then the MoE routing:
#      GpuMoe tests, 35B-A3B Q4_0 synth, tg16 B = 64 @ d512 and pp512 with the serial placement (main's)
#      and the parallel one, two alternations (~7 minutes)
#   m: the MoE part alone (~3 minutes)
set -u
source bench/notes/experiments/device-env.sh
moe() {
  local f35=/tmp/35b.gguf
  timeout 120 /tmp/g/bin/memra_tests --gtest_filter='GpuMoe.*' 2>&1 | grep -E '^\[  (  OK|FAILED|PASSED) |Failure|differ' | head -10
  [ -f $f35 ] || $M synth --arch qwen35moe --shape 35b-a3b --type q4_0 -o $f35 > /dev/null 2>&1
  for r in 1 2; do
    for s in 1 0; do
      echo "r$r route serial=$s 35B-A3B pp512 + tg16 B=64,16 @ d512:"
      MEMRA_EXP_ROUTE_SERIAL=$s timeout 150 $M bench -m $f35 --device cuda -p 512 -n 16 -b 64,16 -d 512 -r 2 --ctx 4096 2>/dev/null | rows
    done
  done
}
{
case "${1:?phase}" in
  a) bash bench/notes/experiments/2026-12-07-s45.sh y; moe ;;
  m) nvidia-smi --query-gpu=name --format=csv,noheader; moe ;;
esac
} 2>&1 | tee $OUT/s46-$1.log
