#!/usr/bin/env bash
# RUN in session 42 (phases l and k; bench/results/2026-12-06-1840-h100-session42.md): the knob lost
# and was deleted, so phases l, s and m no longer run on main; phase k still does.
# Prepared in session 41, NOT run (every start after the first four calls was refused): the first
# GPU run of MEMRA_CUDA_SEG_PACK (e300796: K segments a tiled matmul block sums in turn; same bits).
#   l: the short form: the packed-segment GPU test, packs 1 / 2 / 8 / 1 / 8 at pp512 and B = 1, 16,
#      64 (9B Q4_0), --verify-exact at pack 8 (~250 s with the synth)
#   s: the full sweep (packs 1, 2, 4, 8, two rounds, B = 1, 4, 16, 32, 64) and per-op profiles at
#      B = 64 with packs 1 and 8 (which matrices gain: ffn_down's 8 segments, the 2-segment ones)
#   m: 35B-A3B (the grouped gate+up has 2 segments): packs 1 / 2 / 1 / 2 at pp512, B = 1, 16, 64
#   k: per-kernel durations of B = 1 decode steps (ncu, kernels serialized, caches not flushed):
#      their sum against the step's time is the idle share issue 10 asks for
# The default (pack 1) runs the changed kernel as well and has not run on a GPU either: compare its
# rows with bench/results/2026-12-06-1439-h100-session41.md section 1 (34cf67d, H100: B = 1 371,
# 16 3,987, 64 6,130 tok/s @ d512; pp512 11,147) before anything else.
# Then set seg_pack()'s rule in k_matmul.cu from the rows (by rows and segments), or delete the knob.
# Carry .gpu/bundle.tar.xz only.
set -u
[ -x /tmp/g/bin/memra ] || { mkdir -p /tmp/g && tar xJf .gpu/bundle.tar.xz -C /tmp/g; }
export LD_LIBRARY_PATH=/tmp/g/lib
M=/tmp/g/bin/memra
F=/tmp/9b.gguf
[ "${1:-}" = m ] || [ -f $F ] || $M synth --arch qwen35 --shape 9b --type q4_0 -o $F > /dev/null 2>&1
{
nvidia-smi --query-gpu=name --format=csv,noheader
case "${1:?phase}" in
  s)
    /tmp/g/bin/memra_tests --gtest_filter='GpuMatmul.Packed*:GpuMatmul.RowsAre*' 2>&1 | tail -4
    for round in 1 2; do
      for P in 1 2 4 8; do
        echo "== seg pack $P (round $round)"
        MEMRA_CUDA_SEG_PACK=$P $M bench -m $F --device cuda -p 512 -n 32 -b 1,4,16,32,64 -d 512 -r 1 --ctx 8192 2>&1 \
          | grep -E '^\| [^-]' | grep -v '| model |' | cut -d'|' -f5-9
      done
    done
    MEMRA_CUDA_SEG_PACK=8 $M bench -m $F --device cuda -p 0 -n 16 -b 64 -d 512 -r 1 --ctx 8192 --verify-exact 2>&1 | grep verify-exact
    for P in 1 8; do
      echo "== profile B = 64, seg pack $P"
      MEMRA_CUDA_SEG_PACK=$P MEMRA_CUDA_PROFILE=1 $M bench -m $F --device cuda -p 0 -n 16 -b 64 -d 512 -r 1 --ctx 8192 2>&1 \
        | grep -E 'r64|deltanet|act_f16|rms_norm' | head -14
    done ;;
  l)  # the short form (one start's worth of device time left): packs 1, 2, 8, then 1 and 8 again
    /tmp/g/bin/memra_tests --gtest_filter='GpuMatmul.Packed*' 2>&1 | tail -2
    for P in 1 2 8 1 8; do
      echo "== seg pack $P"
      MEMRA_CUDA_SEG_PACK=$P $M bench -m $F --device cuda -p 512 -n 32 -b 1,16,64 -d 512 -r 1 --ctx 8192 2>&1 \
        | grep -E '^\| [^-]' | grep -v '| model |' | cut -d'|' -f5-9
    done
    MEMRA_CUDA_SEG_PACK=8 $M bench -m $F --device cuda -p 0 -n 16 -b 64 -d 512 -r 1 --ctx 8192 --verify-exact 2>&1 | grep verify-exact ;;
  m)
    G=/tmp/35b.gguf
    [ -f $G ] || $M synth --arch qwen35moe --shape 35b-a3b --type q4_0 -o $G > /dev/null 2>&1
    for P in 1 2 1 2; do
      echo "== 35B-A3B seg pack $P"
      MEMRA_CUDA_SEG_PACK=$P $M bench -m $G --device cuda -p 512 -n 32 -b 1,16,64 -d 512 -r 1 --ctx 8192 2>&1 \
        | grep -E '^\| [^-]' | grep -v '| model |' | cut -d'|' -f5-9
    done ;;
  k)
    # One decode step's kernels at B = 1 in isolation: skip the prefill (512 tokens) and a few
    # tokens, then 3 tokens' launches. Sum of durations vs the step's time = the bubbles.
    MEMRA_CUDA_GRAPHS=0 timeout 120 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
      --csv --launch-skip 2000 --launch-count 1100 $M bench -m $F --device cuda -p 0 -n 12 -b 1 -d 512 -r 1 --ctx 8192 \
      > $OUT/ncu-b1-durations.csv 2>/dev/null
    python3 - <<'PY'
import csv, collections, os
rows = [r for r in csv.reader(open(os.environ['OUT'] + '/ncu-b1-durations.csv')) if len(r) > 10 and r[-3] == 'gpu__time_duration.sum']
tot = collections.Counter(); cnt = collections.Counter()
for r in rows:
    name = r[4].split('(')[0][-60:]; v = float(r[-1].replace(',', ''))
    unit = r[-2]
    v = v / 1000 if unit == 'nsecond' else v * 1000 if unit == 'msecond' else v
    tot[name] += v; cnt[name] += 1
s = sum(tot.values())
print(f"kernels {len(rows)}, sum {s:.1f} us")
for n, v in tot.most_common(25): print(f"  {v:9.1f} us {cnt[n]:5d} x {v/cnt[n]:7.2f}  {n}")
PY
    ;;
esac
} 2>&1 | tee $OUT/s41-$1.log
