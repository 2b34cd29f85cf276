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
case "${1:?phase}" in
  x)
    $M --version; $B0 --version
    MEMRA_EXP_ATTN_BLOCKS=4 timeout 150 /tmp/g/bin/memra_tests --gtest_filter='GpuOps.Sampling:GpuAttentionQ8Cache.*:GpuAttentionMixedDepths.*' 2>&1 | grep -E '^\[  (  OK|FAILED|PASSED) |Failure|expected|Which' | head -20
    for r in 1 2; do
      echo "r$r B0 q8_0 tg64 B=1 @ d0,32768:"; b $B0 q8_0 -p 0 -n 64 -b 1 -d 0,32768 -r 2 --ctx 33000
      for nb in 2 3 4; do
        echo "r$r M blocks $nb q8_0 tg64 B=1 @ d0,32768:"; MEMRA_EXP_ATTN_BLOCKS=$nb b $M q8_0 -p 0 -n 64 -b 1 -d 0,32768 -r 2 --ctx 33000
      done
    done
    for bin in B0 M B0 M; do echo "$bin f16 tg32 B=1,16 @ d512:"; b ${!bin} f16 -p 0 -n 32 -b 1,16 -d 512 -r 2 --ctx 8192; done ;;
  y)
    # x cut to ~4 minutes (the call this session's budget allowed).
    $M --version; $B0 --version
    MEMRA_EXP_ATTN_BLOCKS=4 timeout 100 /tmp/g/bin/memra_tests --gtest_filter='GpuOps.Sampling:GpuAttentionMixedDepths.*' 2>&1 | grep -E '^\[  (  OK|FAILED|PASSED) |Failure|expected|Which' | head -20
    for r in 1 2; do
      echo "r$r B0 q8_0 tg64 B=1 @ d0,32768:"; b $B0 q8_0 -p 0 -n 64 -b 1 -d 0,32768 -r 2 --ctx 33000
      for nb in 4 3; do
        echo "r$r M blocks $nb q8_0 tg64 B=1 @ d0,32768:"; MEMRA_EXP_ATTN_BLOCKS=$nb b $M q8_0 -p 0 -n 64 -b 1 -d 0,32768 -r 2 --ctx 33000
      done
    done
    for bin in B0 M B0 M; do echo "$bin f16 tg32 B=1,16 @ d512:"; b ${!bin} f16 -p 0 -n 32 -b 1,16 -d 512 -r 2 --ctx 8192; done ;;
  z)
    # y cut to what ~200 s hold, the most needed rows first (the call's own timeout ends the rest).
    $M --version; $B0 --version
    MEMRA_EXP_ATTN_BLOCKS=4 timeout 60 /tmp/g/bin/memra_tests --gtest_filter='GpuAttentionMixedDepths.ListedStep*' 2>&1 | grep -E '^\[  (  OK|FAILED|PASSED) |Failure|expected|Which' | head -20
    for r in 1 2; do
      for bin in B0 M4 M3; do
        nb=${bin#M}; [ "$bin" = B0 ] && exe=$B0 || exe=$M
        echo "r$r $bin q8_0 tg64 B=1 @ d0,32768:"; MEMRA_EXP_ATTN_BLOCKS=$nb b $exe q8_0 -p 0 -n 64 -b 1 -d 0,32768 -r 2 --ctx 33000
      done
      for bin in B0 M; do echo "r$r $bin f16 tg32 B=1,16 @ d512:"; b ${!bin} f16 -p 0 -n 32 -b 1,16 -d 512 -r 2 --ctx 8192; done
    done ;;
esac
} 2>&1 | tee $OUT/s45-$1.log
