#!/usr/bin/env bash
# Session 43's device calls. Carry .gpu/bundle.tar.xz (main's build, scripts/gpu-bundle.sh build).
#   n: issue 10's idle share: session 42's phase n (an Nsight Systems timeline of 9B Q4_0 B = 1 and
#      16 tg128 @ d512, graphs and PDL on, graph nodes traced; the union of kernel intervals over the
#      last 100 decode steps against that window's length)
#   s: why the matmuls issue at ~42-50%: Nsight Compute's per-reason stall cycles (warp cycles per
#      issued instruction, by reason) for the B = 64 decode matmuls (the SwiGLU (2, 4) and the (1, 2)
#      launches, as session 40's ncu-matmul-b64; only with B64=1: session 41's SASS samples have
#      that kernel's stalls) and B = 1's streaming kernels, clocks not locked
#   g: the same question without nsys (not on the H100 image): Nsight Compute's graph profiling
#      of the decode-step graphs (their GPU time against bench's step, SM-active share inside).
#      Superseded by 2026-12-06-s44.sh g (run in session 44, at depth 0: no prefill workloads first)
#   d: issue 10's depth rows: 9B Q4_0 tg128 B = 1 @ d0 and d32768, f16 KV and the 8-bit KV
set -u
source bench/notes/experiments/device-env.sh
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
{
nvidia-smi --query-gpu=name --format=csv,noheader
case "${1:?phase}" in
  n) bash bench/notes/experiments/2026-12-06-s42.sh n ;;  # needs nsys: the H100 image has none (session 43)
  g)
    # The idle share without nsys: Nsight Compute profiles each replayed decode graph as one workload
    # (--graph-profiling graph): its duration against bench's ms a step (the host's share between
    # steps), and sm__cycles_active / elapsed inside it (SMs with no resident warp). Every workload
    # of the run is profiled with one cheap pass (the bandwidth probe, the context's prefill kernels,
    # then the step graphs); the graphs are taken to be the rows whose name has no kernel signature
    # (a guess: not run yet, so check the CSV's names first).
    for b in 1 16; do
      timeout 200 $NCU --clock-control none --cache-control none --graph-profiling graph --csv \
        --metrics gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_elapsed.avg,dram__bytes_read.sum \
        $M bench -m $F --device cuda -p 0 -n 24 -b $b -d 512 -r 1 --ctx 8192 > $OUT/ncu-graphs-b$b.csv 2>&1
      grep -E 'tg24' $OUT/ncu-graphs-b$b.csv | cut -d'|' -f5-9
      python3 - $OUT/ncu-graphs-b$b.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]
ii, ki, mi, vi = (h.index(c) for c in ('ID', 'Kernel Name', 'Metric Name', 'Metric Value'))
m, name = collections.defaultdict(dict), {}
for r in rows[1:]:
    m[r[ii]][r[mi]] = float(r[vi].replace(',', ''))
    name[r[ii]] = r[ki]
graphs = [k for k in sorted(m, key=int) if '(' not in name[k]]
print(f"{len(m)} workloads, {len(graphs)} without a kernel signature (graphs); the last 12:")
for k in graphs[-12:]:
    v = m[k]
    print(f"  {k} {name[k][:30]!r}: {v['gpu__time_duration.sum'] / 1e3:.1f} us, SMs active "
          f"{100 * v['sm__cycles_active.avg'] / v['sm__cycles_elapsed.avg']:.1f}%, read {v['dram__bytes_read.sum'] / 1e9:.2f} GB")
PY
    done ;;
  d)
    for kv in f16 q8_0; do
      echo "== KV $kv"
      MEMRA_CUDA_KV=$kv timeout 200 $M bench -m $F --device cuda -p 0 -n 128 -d 0,32768 -r 3 --ctx 33000 2>&1 | rows
    done ;;
  s)
    MET="smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio,smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio,smsp__average_warp_latency_per_inst_issued.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__warps_active.avg.per_cycle_active,smsp__inst_executed.sum,gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread"
    [ "${B64:-0}" = 1 ] && MEMRA_CUDA_GRAPHS=0 timeout 240 $NCU --clock-control none --kernel-name-base demangled --kernel-name regex:matmul_kernel \
      --launch-skip 1040 --launch-count 8 --metrics $MET $M bench -m $F --device cuda -p 0 -n 4 -b 64 -d 512 -r 1 --ctx 8192 > $OUT/ncu-stalls-b64.txt 2>&1
    MEMRA_CUDA_GRAPHS=0 timeout 240 $NCU --clock-control none --kernel-name-base demangled --kernel-name regex:matmul_stream_kernel \
      --launch-skip 200 --launch-count 6 --metrics $MET $M bench -m $F --device cuda -p 0 -n 4 -b 1 -d 512 -r 1 --ctx 8192 > $OUT/ncu-stalls-b1.txt 2>&1
    for f in $OUT/ncu-stalls-b*.txt; do
      echo "== $f"; grep -E 'matmul|stalled|latency_per|issue_active|warps_active|inst_executed|duration|grid_size|registers' $f | \
        awk '/matmul/ {print; next} {v=$NF; gsub(",","",v); if ($1 ~ /stalled/ && v+0 < 0.15) next; print}' | cut -c1-160
    done ;;
esac
} 2>&1 | tee $OUT/s43-$1.log
