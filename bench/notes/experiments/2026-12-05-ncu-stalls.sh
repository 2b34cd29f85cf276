#!/usr/bin/env bash
# For the next device call (not run yet): why the 12-warp (2, 8) prefill kernel issues one
# instruction a warp every ~22 cycles (session 32's Nsight table: 7.3 warp cycles per issue at 3
# warps a scheduler). Stall reasons per issued instruction for the first four matmul launches of a
# 512-row prefill (fused GDN projection, ssm_out, SwiGLU, ffn_down), and the same for a B = 64
# decode step's launches, with clocks unlocked (--clock-control none: locked clocks ran the SM at
# 1.5 GHz in session 27).
#   bash bench/notes/experiments/2026-12-05-ncu-stalls.sh   carry [".gpu/bundle.tar.xz"]   (~60 s)
set -u
mkdir -p /tmp/g && tar xJf .gpu/bundle.tar.xz -C /tmp/g
export LD_LIBRARY_PATH=/tmp/g/lib
N=/tmp/g/bin/memra M=/tmp/9b.gguf
NCU=$(ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
$N synth --arch qwen35 --shape 9b --type q4_0 -o $M >/dev/null 2>&1 || echo "synth failed"
STALLS='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
$NCU --clock-control none -k regex:matmul_kernel --launch-count 4 --metrics "$STALLS" \
  --section SpeedOfLight --section Occupancy --section WarpStateStats \
  $N logits -m $M --device cuda --ids "$(seq -s, 100 611)" --mode prefill -o /tmp/l.bin > $OUT/ncu-stalls-pp512.txt 2>&1
grep -E "matmul_kernel|Duration|stalled" $OUT/ncu-stalls-pp512.txt | awk '$NF+0 >= 0.3 || /matmul|Duration/' | cut -c1-150
