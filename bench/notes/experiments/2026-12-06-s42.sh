#!/usr/bin/env bash
# Session 42's device calls (phase a ran on 333a94a, whose MEMRA_CUDA_SEG_PACK was then deleted). Carry .gpu/bundle.tar.xz (+ .gpu/memra-want.xz for phase a: main
# 333a94a with pick_config's "blocks wanted an SM from 17 rows" read from MEMRA_X_WANT, default 2 =
# main's rule; an experiment binary, not committed).
#   a: the packed-segment GPU test; 9B Q4_0 pp512 and B = 1, 16, 64 @ d512 at seg packs 1 / 8 / 2 / 1 / 8;
#      --verify-exact at pack 8; then the want experiment at B = 32, 64 (1 / 2 / 4 blocks an SM)
#   n: the GPU's busy share of a decode step (issue 10): an Nsight Systems timeline (graphs and PDL
#      on, graph nodes traced) of 9B B = 1 and 16 tg128; the union of kernel intervals between the
#      last 101 embed launches (100 decode steps) against that window's length
#   t: QUICK gpu-check tests (carry .fixtures too)
#   f: the bundle built from the seg-pack revert (34cf67d's kernel) with MEMRA_X_WANT read for 17-64
#      rows (default 2 = main's rule; not committed): want 2 / 3 at B = 24, 32, 48, 64 in turns, then
#      the record rows (pp512 + tg128, B = 1..64 --verify-exact) and the GpuMatmul tests
set -u
[ "${1:-}" = f ] && rm -rf /tmp/g
source bench/notes/experiments/device-env.sh
{
nvidia-smi --query-gpu=name --format=csv,noheader
case "${1:?phase}" in
  a)
    /tmp/g/bin/memra_tests --gtest_filter='GpuMatmul.Packed*' 2>&1 | tail -2
    for P in 1 8 2 1 8; do
      echo "== seg pack $P"
      MEMRA_CUDA_SEG_PACK=$P $M bench -m $F --device cuda -p 512 -n 32 -b 1,16,64 -d 512 -r 1 --ctx 8192 2>&1 | rows
    done
    MEMRA_CUDA_SEG_PACK=8 $M bench -m $F --device cuda -p 0 -n 16 -b 64 -d 512 -r 1 --ctx 8192 --verify-exact 2>&1 | grep verify-exact
    if [ -f .gpu/memra-want.xz ]; then
      xz -dc .gpu/memra-want.xz > /tmp/g/memra-want && chmod +x /tmp/g/memra-want
      for W in 2 1 4 2 1; do
        echo "== want $W blocks an SM"
        MEMRA_X_WANT=$W /tmp/g/memra-want bench -m $F --device cuda -p 0 -n 32 -b 32,64 -d 512 -r 1 --ctx 8192 2>&1 | rows
      done
    fi ;;
  f)
    /tmp/g/bin/memra_tests --gtest_filter='GpuMatmul*' 2>&1 | grep -E '^\[  (PASSED|FAILED)|tests ran'
    for W in 2 3 2 3; do
      echo "== want $W"
      MEMRA_X_WANT=$W $M bench -m $F --device cuda -p 0 -n 64 -b 24,32,48,64 -d 512 -r 1 --ctx 8192 2>&1 | rows
    done
    echo "== record (want 2)"
    $M bench -m $F --device cuda -p 512 -n 128 -r 3 --ctx 8192 2>&1 | rows
    $M bench -m $F --device cuda -p 0 -n 64 -b 1,2,4,8,16,32,64 -d 512 -r 3 --ctx 8192 --verify-exact 2>&1 | grep -E 'verify-exact|^\| [^-]' | grep -v '| model |' | cut -d'|' -f1,5-9
    echo "== record (want 3)"
    MEMRA_X_WANT=3 $M bench -m $F --device cuda -p 0 -n 64 -b 32,64 -d 512 -r 3 --ctx 8192 --verify-exact 2>&1 | grep -E 'verify-exact|^\| [^-]' | grep -v '| model |' | cut -d'|' -f1,5-9 ;;
  n)
    NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda*/nsight-systems*/bin/nsys 2>/dev/null | head -1)
    echo "nsys: $NSYS"
    for b in 1 16; do
      $NSYS profile --cuda-graph-trace=node --trace=cuda -f true -o /tmp/tl$b $M bench -m $F --device cuda -p 0 -n 128 -b $b -d 512 -r 1 --ctx 8192 2>&1 | rows
      $NSYS stats --report cuda_gpu_trace --format csv -o /tmp/tl$b /tmp/tl$b.nsys-rep > /dev/null 2>&1
      python3 - /tmp/tl${b}_cuda_gpu_trace.csv $b <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
if not rows or 'Start (ns)' not in rows[0]: sys.exit(f"unexpected trace columns: {list(rows[0]) if rows else 'no rows'}")
ks = [(int(r['Start (ns)']), int(r['Start (ns)']) + int(r['Duration (ns)']), r['Name']) for r in rows if r.get('Duration (ns)')]
ks.sort()
emb = [k[0] for k in ks if 'embed' in k[2]]
lo, hi = emb[-101], emb[-1]  # the last 100 decode steps (tg128: the prompt's launches are before)
w = [k for k in ks if lo <= k[0] < hi]
busy, cur_s, cur_e = 0, None, None
for s, e, _ in w:
    e = min(e, hi)
    if cur_e is None or s > cur_e:
        if cur_e is not None: busy += cur_e - cur_s
        cur_s, cur_e = s, e
    else:
        cur_e = max(cur_e, e)
busy += cur_e - cur_s
steps = 100
print(f"B = {sys.argv[2]}: {steps} steps, {(hi - lo) / steps / 1e3:.1f} us a step, {len(w) / steps:.0f} kernels a step, "
      f"GPU busy {100 * busy / (hi - lo):.1f}% (idle {(hi - lo - busy) / steps / 1e3:.1f} us a step), "
      f"kernel durations summed {sum(min(e, hi) - s for s, e, _ in w) / steps / 1e3:.1f} us a step")
PY
    done ;;
  t)
    BUILD=/tmp/g/bin QUICK=1 scripts/gpu-check.sh tests 2>&1 | tail -25
    cp bench/results/*gpu-check* $OUT/ 2>/dev/null ;;
esac
} 2>&1 | tee $OUT/s42-$1.log
