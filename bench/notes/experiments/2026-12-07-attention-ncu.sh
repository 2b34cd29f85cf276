#!/usr/bin/env bash
# Ran in session 27 (bench/results/2026-12-05-0253-h200-s27-ncu-attention-*.txt, without --clock-control none then).
# Device-call script: why decode attention reads a long cache at ~2.0 TB/s (B = 1, depth 32767:
# 67 us a 9B layer, GpuAttentionPerf; issue 10 wants depth 32768 within 10% of depth 0). Nsight
# Compute on one steady attention_split_kernel launch and one combine launch of that case: the
# speed-of-light, warp-state (stall reasons), occupancy, launch and memory sections. The estimate
# in bench/notes/pending-on-hardware.md (B.) says ~95 warp instructions a 1 KB key, ~41% of the
# issue slots at full bandwidth, and one 128-key split a block: 3.9 waves of 8-warp blocks whose
# K loads, softmax and V loads run one after another (V's DRAM latency is not overlapped with the
# scores). This tells which of these sets the 67 us before any change is made.
# Since session 37 the split step is the tensor-core kernel (attention_tc_split_kernel) wherever the
# shape allows, GpuAttentionPerf's 9B shape included; KERNELS picks the kernels (default: it and the
# merge; the CUDA-core kernel runs only where MEMRA's tests turn attn_tc off).
# Needs .gpu/bundle.tar.xz (scripts/gpu-bundle.sh build). ~2 minutes.
set -u
mkdir -p /tmp/g && tar xJf .gpu/bundle.tar.xz -C /tmp/g
export LD_LIBRARY_PATH=/tmp/g/lib
# GpuAttentionPerf runs 7 cases of 3 warm-up + 20 timed calls; the third case (B = 1, depth 32767)
# starts at launch 46 of each kernel: skip its warm-up too.
for k in ${KERNELS:-attention_tc_split_kernel attention_combine}; do
  ncu --clock-control none --kernel-name "regex:$k" --launch-skip 49 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    --section MemoryWorkloadAnalysis --section SchedulerStats \
    /tmp/g/bin/memra_tests --gtest_filter='GpuAttentionPerf.DecodeCostByDepth' 2>&1 | tee "$OUT/ncu-$k.txt" | tail -60
done
