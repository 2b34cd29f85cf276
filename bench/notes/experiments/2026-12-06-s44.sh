#!/usr/bin/env bash
# Session 44's device calls. Carry .gpu/bundle.tar.xz (the build under test) and .gpu/B0.xz (main's
# memra: `xz -c` of a main bundle's bin/memra, already stripped) or .gpu/Y.xz (an experiment
# build: scripts/gpu-bundle.sh --memra Y); the tracked files (~35 MB) + the bundle + one more memra
# is what fits the 64 MiB transfer.
# Ran in session 44: w1, w2, g (results: bench/results/2026-12-07-0045-h100-session44.md).
# Not run: l / l2, the argmax / 3-blocks candidate; session 45 folded it into
# 2026-12-07-s45-argmax-attn-blocks.patch (with K rolled) and 2026-12-07-s45.sh x / y / z, and removed them here.
#   g: issue 10's idle share without nsys: s43.sh g's Nsight Compute graph profiling of the decode
#      step graphs, at depth 0 and 16 steps, with the workload names it saw and the bench steps
#   w1 / w2: the walking decode attention (the bundle built with 2026-12-07-s44-attention-walk.patch
#      applied: its memra M and memra_tests; the patch carries the experiment-only MEMRA_EXP_WALK_*
#      override w2 uses) against main (.gpu/B0.xz, f452e10) and, if carried, .gpu/Y.xz:
#      w1 the attention GPU tests, then tg128 B = 1 @ d0 / d32768 (8-bit and f16 caches), builds
#      alternating; w2 the walk length swept (MEMRA_EXP_WALK_Q8 / _F16, an experiment-only
#      override; 1 = the one-split kernel), --verify-exact at B = 1, 2 @ d32768 and B = 16 / 64
#      @ d4096 against main
#   c: Nsight Compute of the 8-bit decode attention's split kernel at d32768 (one steady decode
#      launch; graphs off): speed of light, warp states, occupancy, memory, scheduler (session 44
#      ran it inline, with the walk kernel beside it)
set -u
source bench/notes/experiments/device-env.sh
for n in Y B0; do
  [ -f .gpu/$n.xz ] && { [ -x /tmp/g/$n ] || { xz -dc .gpu/$n.xz > /tmp/g/$n && chmod +x /tmp/g/$n; }; }
done
Y=/tmp/g/Y B0=/tmp/g/B0
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
b() { local bin=$1 kv=$2; shift 2; MEMRA_CUDA_KV=$kv timeout 200 $bin bench -m $F --device cuda "$@" 2>/dev/null | rows; }
{
nvidia-smi --query-gpu=name --format=csv,noheader
case "${1:?phase}" in
  g)
    # s43.sh g at depth 0 (no prefill kernels to profile before the step graphs; at d512 they were
    # ~370 workloads) and 16 steps.
    for b1 in 1 16; do
      timeout 150 $NCU --clock-control none --cache-control none --graph-profiling graph --csv \
        --metrics gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_elapsed.avg,dram__bytes_read.sum \
        $M bench -m $F --device cuda -p 0 -n 16 -b $b1 -d 0 -r 1 --ctx 8192 > $OUT/ncu-graphs-b$b1.csv 2>&1
      echo "ncu B=$b1 rc=$? lines $(wc -l < $OUT/ncu-graphs-b$b1.csv)"
    done
    for f in $OUT/ncu-graphs-b*.csv; do
      echo "== names in $f (count, name)"
      python3 - "$f" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ii, ki = h.index('ID'), h.index('Kernel Name')
seen = {}
for r in rows[1:]: seen[r[ii]] = r[ki]
for n, c in collections.Counter(v[:90] for v in seen.values()).most_common(25): print(f"  {c:5d} {n}")
m = collections.defaultdict(dict)
for r in rows[1:]:
    try: m[r[ii]][r[h.index('Metric Name')]] = float(r[h.index('Metric Value')].replace(',', ''))
    except ValueError: pass
ids = sorted(m, key=int)
print("last 14 workloads: id, name, us, SM-active %, GB read")
for k in ids[-14:]:
    v = m[k]
    try: print(f"  {k} {seen[k][:40]!r}: {v['gpu__time_duration.sum'] / 1e3:.1f} us, {100 * v['sm__cycles_active.avg'] / v['sm__cycles_elapsed.avg']:.1f}%, {v['dram__bytes_read.sum'] / 1e9:.3f}")
    except KeyError as e: print(f"  {k} {seen[k][:40]!r}: missing {e}")
PY
    done
    for b1 in 1 16; do echo "bench B=$b1 tg16 @ d0 (no profiler):"; b $M f16 -p 0 -n 16 -b $b1 -d 0 -r 3 --ctx 8192; done ;;
  w1)
    $M --version; $B0 --version
    timeout 300 /tmp/g/bin/memra_tests --gtest_filter='GpuAttentionMixedDepths.*:GpuAttentionLongRow.*:GpuAttentionCutInvariance.*:GpuOps.Attention:GpuAttentionBlock.*' 2>&1 | grep -E '^\[  (  OK|FAILED|PASSED) |Failure|expected|Which' | head -40
    for r in 1 2; do for bin in B0 $([ -x /tmp/g/Y ] && echo Y) M; do
      echo "r$r $bin q8_0 tg128 B=1 @ d0,32768:"; b ${!bin} q8_0 -p 0 -n 128 -b 1 -d 0,32768 -r 3 --ctx 33000
    done; done
    for bin in B0 M; do echo "$bin f16 tg128 B=1 @ d0,32768:"; b ${!bin} f16 -p 0 -n 128 -b 1 -d 0,32768 -r 3 --ctx 33000; done ;;
  w2)
    for w in 1 2 4 8 16; do echo "M q8_0 walk $w tg64 B=1 @ d32768:"; MEMRA_EXP_WALK_Q8=$w b $M q8_0 -p 0 -n 64 -b 1 -d 32768 -r 3 --ctx 33000; done
    for w in 1 8; do echo "M f16 walk $w tg64 B=1 @ d32768:"; MEMRA_EXP_WALK_F16=$w b $M f16 -p 0 -n 64 -b 1 -d 32768 -r 3 --ctx 33000; done
    for kv in q8_0 f16; do echo "M $kv verify-exact B=1,2 @ d32768:"; MEMRA_CUDA_KV=$kv timeout 200 $M bench -m $F --device cuda -p 0 -n 16 -b 1,2 -d 32768 -r 1 --ctx 33000 --verify-exact 2>&1 | grep -E "differ|error|rror:" ; done
    for bin in B0 M B0 M; do echo "$bin f16 tg32 B=16,64 @ d512:"; b ${!bin} f16 -p 0 -n 32 -b 16,64 -d 512 -r 3 --ctx 8192; done
    for bin in B0 M; do echo "$bin q8_0 tg32 B=16,64 @ d4096:"; b ${!bin} q8_0 -p 0 -n 32 -b 16,64 -d 4096 -r 2 --ctx 8192; done
    for bin in B0 M; do echo "$bin q8_0 pp512 @ d16384:"; b ${!bin} q8_0 -p 512 -n 0 -d 16384 -r 2 --ctx 17000; done ;;
  c)
    # Demangled names read `attention_tc_split_kernel<(int)256, (int)1, (bool)1, (bool)1, (bool)0>`. The
    # merge is left out: its first launches at d32768 are the prefill's (skip > 64 chunks x 8 layers).
    for k in 'attention_tc_split_kernel<\(int\)256, \(int\)1, \(bool\)1, \(bool\)1'; do
      MEMRA_CUDA_KV=q8_0 MEMRA_CUDA_GRAPHS=0 timeout 280 $NCU --clock-control none --kernel-name-base demangled \
        --kernel-name "regex:$k" --launch-skip 16 --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
        --section MemoryWorkloadAnalysis --section SchedulerStats \
        $M bench -m $F --device cuda -p 0 -n 4 -b 1 -d 32768 -r 1 --ctx 33000 > "$OUT/ncu-q8-${k%%<*}.txt" 2>&1
      grep -E 'attention|Duration|DRAM Through|Memory Through|Registers|Achieved Occ|Theoretical Occ|Block Limit|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Waves Per SM|Grid Size|Dynamic Shared|Static Shared' \
        "$OUT/ncu-q8-${k%%<*}.txt" | cut -c1-150
    done ;;
esac
} 2>&1 | tee $OUT/s44-$1.log
