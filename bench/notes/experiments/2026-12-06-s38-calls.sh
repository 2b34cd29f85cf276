#!/usr/bin/env bash
# Session 38's device calls (record; ran on an H100, bench/results/2026-12-06-0700-h100-session38.md;
# phase c ran on the experiment binary with MEMRA_X_TC_KVH_FAST=1 MEMRA_X_COMBINE="1 32" exported). Carry .gpu/bundle.tar.xz and .gpu/fx.tar.xz.
#   a: QUICK gpu-check bench (every model's rows on the tensor-core attention default), then the
#      Nsight Compute sections of the decode attention at B = 1, depth 32767 (issue 10's depth row)
#   b: QUICK GPU tests (gpu-check tests)
#   c: QUICK gpu-check moe, then batch
set -uo pipefail
mkdir -p /tmp/g && tar xJf .gpu/bundle.tar.xz -C /tmp/g
tar xJf .gpu/fx.tar.xz
export LD_LIBRARY_PATH=/tmp/g/lib BUILD=/tmp/g/bin QUICK=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
case "${1:?phase}" in
  a) scripts/gpu-check.sh bench 2>&1 | tail -40
     bash bench/notes/experiments/2026-12-07-attention-ncu.sh > /dev/null 2>&1
     for f in "$OUT"/ncu-*.txt; do echo "== $f"; grep -E 'Duration|Memory Throughput|DRAM Throughput|Registers|Achieved Occupancy|Grid Size|Block Size|Waves|Stall|Issued Ipc' "$f" | head -30; done ;;
  b) scripts/gpu-check.sh tests 2>&1 | tail -25 ;;
  c) scripts/gpu-check.sh moe 2>&1 | tail -20; scripts/gpu-check.sh batch 2>&1 | tail -30 ;;
esac
