#!/usr/bin/env bash
# Session 47 (ran; results section 3 of bench/results/2026-12-07-1000-h100-session47.md; the build:
# 2026-12-07-s47-experiment-build.patch on ab90339): the Gated DeltaNet decode step as a cluster of 4
# column-slice blocks a head
# (MEMRA_EXP_GDN_SLICES = 1: at least 3 blocks an SM, 71 registers; 2: 4 blocks, 64 registers with 28 B
# of spill; 0: main's fused kernel, one block a head). Carry .gpu/X.xz (memra), .gpu/T.xz (memra_tests)
# and .gpu/lib.tar.xz.
set -u
source bench/notes/experiments/device-x.sh
{
nvidia-smi --query-gpu=name --format=csv,noheader
case "${1:-a}" in
a)
  for e in 1 2 0; do
    echo "tests slices=$e"
    MEMRA_EXP_GDN_SLICES=$e timeout 200 /tmp/g/bin/T --gtest_filter='GpuOps.DeltaNet*:GpuDeltaNet*' 2>&1 | grep -E '^\[  (FAILED|PASSED) |Failure' | head -8
  done
  [ -f $f9 ] || $X synth --arch qwen35 --shape 9b --type q4_0 -o $f9 > /dev/null 2>&1
  for r in 1 2; do for e in 0 1 2; do
    echo "r$r 9B slices=$e"
    MEMRA_EXP_GDN_SLICES=$e timeout 100 $X bench -m $f9 --device cuda -p 0 -n 64 -b 1,16,64 -d 512 -r 3 --ctx 2048 2>/dev/null | rows
  done; done
  MEMRA_EXP_GDN_SLICES=1 timeout 150 $X bench -m $f9 --device cuda -p 0 -n 32 -b 16,64 -d 512 -r 1 --ctx 2048 --verify-exact 2>&1 | grep -E 'verify-exact|error'
  ;;
m)
  [ -f $f35 ] || $X synth --arch qwen35moe --shape 35b-a3b --type q4_0 -o $f35 > /dev/null 2>&1
  for r in 1 2; do for e in 0 1 2; do
    echo "r$r 35B slices=$e"
    MEMRA_EXP_GDN_SLICES=$e timeout 100 $X bench -m $f35 --device cuda -p 0 -n 64 -b 1,16,64 -d 512 -r 3 --ctx 2048 2>/dev/null | rows
  done; done
  ;;
e)  # the fused kernel with its first tile's state loaded before the PDL wait (MEMRA_EXP_GDN_EARLY = 1)
  MEMRA_EXP_GDN_EARLY=1 timeout 200 /tmp/g/bin/T --gtest_filter='GpuOps.DeltaNet*:GpuDeltaNet*:GpuOps.Moe*' 2>&1 | grep -E '^\[  (FAILED|PASSED) |Failure' | head -8
  [ -f $f9 ] || $X synth --arch qwen35 --shape 9b --type q4_0 -o $f9 > /dev/null 2>&1
  for r in 1 2; do for e in 0 1; do
    echo "r$r 9B early=$e"
    MEMRA_EXP_GDN_EARLY=$e timeout 100 $X bench -m $f9 --device cuda -p 0 -n 64 -b 1,16,64 -d 512 -r 3 --ctx 2048 2>/dev/null | rows
  done; done
  MEMRA_EXP_GDN_EARLY=1 timeout 150 $X bench -m $f9 --device cuda -p 0 -n 32 -b 16,64 -d 512 -r 1 --ctx 2048 --verify-exact 2>&1 | grep -E 'verify-exact|error'
  [ -f $f35 ] || $X synth --arch qwen35moe --shape 35b-a3b --type q4_0 -o $f35 > /dev/null 2>&1
  for r in 1 2; do for e in 0 1; do
    echo "r$r 35B early=$e"
    MEMRA_EXP_GDN_EARLY=$e timeout 100 $X bench -m $f35 --device cuda -p 0 -n 64 -b 1,16,64 -d 512 -r 3 --ctx 2048 2>/dev/null | rows
  done; done
  ;;
esac
} 2>&1 | tee $OUT/s47-slices-${1:-a}.log
