#!/usr/bin/env bash
# Session 39's device calls (record). Carry .gpu/bundle.tar.xz (+ .gpu/fx.tar.xz for tests; + an
# extra memra .gpu/NAME.xz and .gpu/lib.tar.xz for comparisons). The bundle stays unpacked in /tmp/g
# while the machine is warm (a later call skips the unpacking).
#   tb: QUICK gpu-check tests, then bench (main, the committed kernels' first run)
#   mb: QUICK gpu-check moe, then batch
#   tm: QUICK gpu-check tests, then moe (the final code: the MoE block lists)
set -uo pipefail
[ -x /tmp/g/bin/memra ] || { mkdir -p /tmp/g && tar xJf .gpu/bundle.tar.xz -C /tmp/g; }
[ -f .gpu/fx.tar.xz ] && tar xJf .gpu/fx.tar.xz
export LD_LIBRARY_PATH=/tmp/g/lib BUILD=/tmp/g/bin QUICK=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
case "${1:?phase}" in
  tb) scripts/gpu-check.sh tests 2>&1 | tail -25; scripts/gpu-check.sh bench 2>&1 | tail -40 ;;
  mb) scripts/gpu-check.sh moe 2>&1 | tail -20; scripts/gpu-check.sh batch 2>&1 | tail -30 ;;
  tm) scripts/gpu-check.sh tests 2>&1 | tail -8; scripts/gpu-check.sh moe 2>&1 | tail -16 ;;
esac
ls "$OUT"
