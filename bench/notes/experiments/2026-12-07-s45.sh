#!/usr/bin/env bash
# Session 45's device call. Carry .gpu/bundle.tar.xz (the experiment build: the argmax / attention
# candidate with the experiment-only MEMRA_EXP_ATTN_BLOCKS switch, 2026-12-07-s45-argmax-attn-blocks.patch)
# and .gpu/B0.xz (main's memra, src of f452e10).
#   x: GpuOps.Sampling, GpuAttentionQ8Cache, GpuAttentionMixedDepths at 4 blocks an SM; then 8-bit
#      tg64 B = 1 @ d0 / d32768 with main and the 8-bit staged decode attention at 2 / 3 / 4 blocks an
#      SM (K rolled: half of a warp's K groups in registers at a time), two alternations; f16 tg32
#      B = 1 / 16 @ d512 (argmax's 1,024-logit segments) main against the candidate, two alternations
#   y: x cut to ~4 minutes (MixedDepths and sampling tests; 4 and 3 blocks only)
#   z: y cut to ~200 s
set -u
source bench/notes/experiments/device-env.sh
[ -x /tmp/g/B0 ] || { xz -dc .gpu/B0.xz > /tmp/g/B0 && chmod +x /tmp/g/B0; }
B0=/tmp/g/B0
b() { local bin=$1 kv=$2; shift 2; MEMRA_CUDA_KV=$kv timeout 200 $bin bench -m $F --device cuda "$@" 2>/dev/null | rows; }
{
nvidia-smi --query-gpu=name --format=csv,noheader
# The mixed-depth test (and others: $1, timeout $2 s) at 4 blocks an SM, then per alternation main and
# the candidate at each block count of $3 (8-bit tg64 B = 1 @ d0 / d32768), then f16 B = 1 / 16 @ d512.
compare() {
  local filter=$1 limit=$2 counts=$3
  $M --version; $B0 --version
  MEMRA_EXP_ATTN_BLOCKS=4 timeout $limit /tmp/g/bin/memra_tests --gtest_filter="$filter" 2>&1 | grep -E '^\[  (  OK|FAILED|PASSED) |Failure|expected|Which' | head -20
  for r in 1 2; do
    echo "r$r B0 q8_0 tg64 B=1 @ d0,32768:"; b $B0 q8_0 -p 0 -n 64 -b 1 -d 0,32768 -r 2 --ctx 33000
    for nb in $counts; do
      echo "r$r M blocks $nb q8_0 tg64 B=1 @ d0,32768:"; MEMRA_EXP_ATTN_BLOCKS=$nb b $M q8_0 -p 0 -n 64 -b 1 -d 0,32768 -r 2 --ctx 33000
    done
    for bin in B0 M; do echo "r$r $bin f16 tg32 B=1,16 @ d512:"; b ${!bin} f16 -p 0 -n 32 -b 1,16 -d 512 -r 2 --ctx 8192; done
  done
}
case "${1:?phase}" in
  x) compare 'GpuOps.Sampling:GpuAttentionQ8Cache.*:GpuAttentionMixedDepths.*' 150 "2 3 4" ;;
  # x cut to ~4 minutes, and to ~200 s (the call's own timeout ends the rest: the rows most needed come first).
  y) compare 'GpuOps.Sampling:GpuAttentionMixedDepths.*' 100 "4 3" ;;
  z) compare 'GpuAttentionMixedDepths.ListedStep*' 60 "4 3" ;;
esac
} 2>&1 | tee $OUT/s45-$1.log
