#!/usr/bin/env bash
# Session 48, prepared, NOT RUN (every device start was refused after the session's fourth call).
# X / T: main + 2026-12-07-s48-early-tile-exp.patch, three switches (all default on):
#   MEMRA_EXP_EARLY_TILE=0|1: the tile kernel's one-row form (ONE_ROW: the MoE experts' grouped
#     launches at one row, the output head, fused projections without a split) reads its row
#     exponent right after the wait instead of after the k-tiles;
#   MEMRA_EXP_ONE_ACT=0|1: a grouped launch whose activation has one row (the experts' gate+up at
#     B = 1) takes row 0 for every group without reading the act_row table (one dependent round
#     trip fewer before its activation copies);
#   MEMRA_EXP_COMBINE1=0|1: the MoE combine of a one-row step (k = 2, 8 or 10) loads every grouped
#     row beside pos and weight and picks the selection's row from registers (no load waits on pos).
# In the emulation GpuMatmul.*, GpuMoe.*, GpuOps.Moe* and GpuModel.MoeFixtures* pass with all three on
# (the MoE fixtures' decode, k = 2, takes all three and must give the prefill's bits).
# Both keep the bits: logits cmp, --verify-exact. Then the Nsight durations of the decode attention
# kernels at B = 1 d512, 9B against 35B-A3B (why 12.7 against 3.8 us a layer on the chain, session 47).
# Build: git apply the patch, cmake --build build, scripts/gpu-bundle.sh --memra X build,
# strip -o /tmp/mt build/memra_tests && xz -T0 -6 -c /tmp/mt > .gpu/T.xz.
# Carry .gpu/X.xz .gpu/T.xz .gpu/lib.tar.xz. ~7 minutes; SHORT=1 ~4; SHORT=2: the 35B rows, then the MoE tests.
# Land what gains at 35B-A3B B = 1 (without its switch) if the logits compare identical and the tests pass.
set -u
source bench/notes/experiments/device-x.sh
L=$OUT/s48-b.log
{
nvidia-smi --query-gpu=name --format=csv,noheader
[ -f $f9 ] || $X synth --arch qwen35 --shape 9b --type q4_0 -o $f9 > /dev/null 2>&1 &
[ -f $f35 ] || $X synth --arch qwen35moe --shape 35b-a3b --type q4_0 -o $f35 > /dev/null 2>&1 &
[ "${SHORT:-0}" = 2 ] || gpu_tests 'GpuMatmul.*:GpuMoe.*:GpuOps.Moe*'
wait
IDS=$(seq -s, 100 164)
for e in 0 1; do timeout 60 env MEMRA_EXP_EARLY_TILE=$e MEMRA_EXP_ONE_ACT=$e MEMRA_EXP_COMBINE1=$e $X logits -m $f35 --device cuda --ids $IDS --mode decode -o /tmp/t$e.bin 2>/dev/null; done
echo -n "35B logits decode 65 ids, all three switches on vs off: "; cmp /tmp/t0.bin /tmp/t1.bin && echo identical
for r in 1 2; do for c in 000 100 010 001 111; do
  echo -n "r$r 35B early_tile=${c:0:1} one_act=${c:1:1} combine1=${c:2:1}: "
  MEMRA_EXP_EARLY_TILE=${c:0:1} MEMRA_EXP_ONE_ACT=${c:1:1} MEMRA_EXP_COMBINE1=${c:2:1} timeout 60 $X bench -m $f35 --device cuda -p 0 -n 64 -b 1 -d 512 -r 3 --ctx 2048 2>/dev/null | rows
done; done
if [ "${SHORT:-0}" = 2 ]; then gpu_tests 'GpuMoe.*:GpuOps.Moe*'; exit 0; fi
[ "${SHORT:-0}" = 1 ] && R9=1 || R9="1 2"
for r in $R9; do for e in 0 1; do
  echo -n "r$r 9B early_tile=$e: "; MEMRA_EXP_EARLY_TILE=$e timeout 60 $X bench -m $f9 --device cuda -p 0 -n 128 -r 3 --ctx 2048 2>/dev/null | rows
done; done
[ "${SHORT:-0}" = 1 ] && exit 0
timeout 100 $X bench -m $f35 --device cuda -p 0 -n 32 -b 4 -d 512 -r 1 --ctx 2048 --verify-exact 2>&1 | grep -E 'verify-exact|error'
for m in 9 35; do
  f=$f9; [ $m = 35 ] && f=$f35
  MEMRA_CUDA_GRAPHS=0 timeout 60 ncu --clock-control none -k regex:attention --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread --csv \
    $X bench -m $f --device cuda -p 0 -n 6 -b 1 -d 512 -r 1 --ctx 2048 > /tmp/ncu$m.csv 2>/dev/null
  echo "== ncu $m: attention kernels, last 24 launches (name, grid, block, regs, ns)"
  python3 - /tmp/ncu$m.csv <<'PY'
import csv, sys, collections
rows = list(csv.DictReader(open(sys.argv[1])))
by = collections.OrderedDict()
for r in rows:
    by.setdefault(r['ID'], {})[r['Metric Name']] = r['Metric Value']; by[r['ID']]['name'] = r['Kernel Name'][:60]
for i, (k, v) in enumerate(list(by.items())[-24:]):
    print(v['name'], v.get('launch__grid_size'), v.get('launch__block_size'), v.get('launch__registers_per_thread'), v.get('gpu__time_duration.sum'))
PY
done
} 2>&1 | tee $L
