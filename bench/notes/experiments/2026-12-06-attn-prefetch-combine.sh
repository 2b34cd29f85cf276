#!/usr/bin/env bash
# Ran in session 38 on an H100 (bench/results/2026-12-06-0700-h100-session38.md). Its switches are
# not on main: every variant is in 2026-12-06-attn-prefetch-kvh-combine.patch (on f64f525); main took
# the merge's batches of 16 for long rows, the KV-head-adjacent launch order and the table read.
# Session 38: decode attention deep in the context (issue 10: depth 32768 within 10% of depth 0).
# Nsight (this session, H100, B = 1 depth 32767): the tensor-core split kernel 57 us at 73% of DRAM
# (1,024 blocks in 3.9 waves of 2 an SM: every block loads its split at its start, so DRAM idles
# while a wave computes), the merge 11.6 us in 16 blocks. Two experiment switches in one binary:
#   MEMRA_X_ATTN_PREFETCH=W  each split block prefetches into L2 the K / V rows of the block W waves
#                            after it (cp.async.bulk.prefetch.L2), once its own loads are issued
#   MEMRA_X_COMBINE="S B"    the merge in S column slices a head, B split loads in flight a thread
#                            (main: "1 8"); every variant sums each column in main's order
# Neither changes a value: decode logits over 1,301 steps (11 splits) must be cmp-identical.
# Carry [".gpu/bundle.tar.xz"]. Phase a: bits, then tg32 B = 1 @ d32000 per variant (f16, then
# the 8-bit cache), d4096 B = 1 / 16 / 64 and pp512 @ d16384 with the prefetch off / on.
set -u
PHASE=${1:-a}
mkdir -p /tmp/g && { [ -x /tmp/g/bin/memra ] || tar xJf .gpu/bundle.tar.xz -C /tmp/g; }
export LD_LIBRARY_PATH=/tmp/g/lib
X=/tmp/g/bin/memra
M=/tmp/9b.gguf
[ -f $M ] || $X synth --arch qwen35 --shape 9b --type q4_0 -o $M >/dev/null 2>&1 || echo "synth failed"
row() { grep -E '^\| [^-]' | grep -v '| model |' | cut -d'|' -f5-10; }
# v P "S B" ARGS..
v() { local p=$1 c=$2; shift 2; MEMRA_X_ATTN_PREFETCH=$p MEMRA_X_COMBINE="$c" timeout 150 $X bench -m $M --device cuda "$@" 2>/dev/null | row; }
bits() {
  local ids; ids=$(seq -s, 100 1400)
  MEMRA_X_ATTN_PREFETCH=0 MEMRA_X_COMBINE="1 8" $X logits -m $M --device cuda --ids $ids --mode decode -o /tmp/l-base.bin 2>/dev/null
  for cfg in "1 4 16" "0 2 16" "0 4 8" "0 1 16"; do
    set -- $cfg
    MEMRA_X_ATTN_PREFETCH=$1 MEMRA_X_COMBINE="$2 $3" $X logits -m $M --device cuda --ids $ids --mode decode -o /tmp/l-x.bin 2>/dev/null
    echo -n "logits ($KV) P=$1 C=$2,$3 vs base: "; cmp /tmp/l-base.bin /tmp/l-x.bin && echo identical
  done
}
{
nvidia-smi --query-gpu=name --format=csv,noheader; $X --version
case "$PHASE" in
a)
  KV=f16 bits
  for r in 1 2; do
    for cfg in "0 1 8" "0.5 1 8" "1 1 8" "2 1 8" "0 4 8" "0 2 16" "0 4 16" "0 1 16" "1 4 16"; do
      set -- $cfg; echo "r$r d32000 B=1 f16 P=$1 C=$2,$3:"; v $1 "$2 $3" -p 0 -n 32 -b 1 -d 32000 -r 2 --ctx 33000
    done
  done
  for p in 0 1; do echo "d4096 f16 P=$p:"; v $p "1 8" -p 0 -n 32 -b 1,16,64 -d 4096 -r 2 --ctx 8192; done
  for p in 0 1; do echo "pp512 d16384 f16 P=$p:"; v $p "1 8" -p 512 -n 0 -d 16384 -r 2 --ctx 17000; done ;;
q)
  export MEMRA_CUDA_KV=q8_0
  KV=q8_0 bits
  for r in 1 2; do
    for cfg in "0 1 8" "0.5 1 8" "1 1 8" "2 1 8" "1 4 16" "0 4 16"; do
      set -- $cfg; echo "r$r d32000 B=1 q8 P=$1 C=$2,$3:"; v $1 "$2 $3" -p 0 -n 32 -b 1 -d 32000 -r 2 --ctx 33000
    done
  done
  for p in 0 1; do echo "d4096 q8 P=$p:"; v $p "1 8" -p 0 -n 32 -b 1,64 -d 4096 -r 2 --ctx 8192; done
  echo "tg32 d0 B=1 (reference for the depth rows):"; v 0 "1 8" -p 0 -n 32 -b 1 -d 0 -r 2 --ctx 8192 ;;
esac
} 2>&1 | tee $OUT/attn-prefetch-combine-$PHASE.log
# Phase n (separate call): Nsight Compute on one steady decode launch of the 8-bit (and f16) split
# kernel at B = 1, depth 32000 inside `memra bench` (the decode launches are the one-n-tile,
# staged-V instantiations; the prefill's 4-n-tile launches are skipped by name).
if [ "$PHASE" = n ]; then
  for kv in q8_0 f16; do
    [ $kv = q8_0 ] && k='tc_split_kernel<.int.256, .int.1, .bool.1, .bool.1>' || k='tc_split_kernel<.int.256, .int.1, .bool.0, .bool.1>'
    MEMRA_CUDA_KV=$kv MEMRA_CUDA_GRAPHS=0 timeout 280 ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:${k}" \
      --launch-skip 40 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section Occupancy \
      --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats --section SourceCounters \
      $X bench -m $M --device cuda -p 0 -n 8 -b 1 -d 32000 -r 1 --ctx 33000 > $OUT/ncu-split-$kv.txt 2>&1
    grep -E 'Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Grid Size|Issued Warp|stalled|Stall|cycles being' $OUT/ncu-split-$kv.txt | head -30
  done
fi
# Phase b (a second build: the block table read beside the rows, the merge's 32-load batches, the
# 8-bit decode kernel at 3 blocks an SM behind MEMRA_X_TC_Q8_MINB=3). O = phase a's binary
# (.gpu/old.xz, carried beside the bundle), X = this one. Bits first: decode logits X vs O.
if [ "$PHASE" = b ]; then
  O=/tmp/g/old; [ -x $O ] || { xz -dc .gpu/old.xz > $O && chmod +x $O; }
  # cfg NAME -> binary and environment: O (old, main's merge), X (new, main's merge), X16 / X32 (new,
  # merge batches of 16 / 32), X3 (new, 8-bit decode at 3 blocks an SM), X3b (X3 and batches of 16)
  run_cfg() { local name=$1 kv=$2; shift 2
    local bin=$X c="1 8" m=2
    case $name in O) bin=$O ;; X16) c="1 16" ;; X32) c="1 32" ;; X3) m=3 ;; X3b) m=3 c="1 16" ;; esac
    MEMRA_CUDA_KV=$kv MEMRA_X_COMBINE="$c" MEMRA_X_TC_Q8_MINB=$m MEMRA_X_ATTN_PREFETCH=0 timeout 150 $bin "$@"; }
  ids=$(seq -s, 100 1400)
  for kv in f16 q8_0; do
    run_cfg O $kv logits -m $M --device cuda --ids $ids --mode decode -o /tmp/l-O.bin 2>/dev/null
    for c in X X32 X3; do
      run_cfg $c $kv logits -m $M --device cuda --ids $ids --mode decode -o /tmp/l-x.bin 2>/dev/null
      echo -n "logits $kv $c vs O: "; cmp /tmp/l-O.bin /tmp/l-x.bin && echo identical
    done
  done
  for r in 1 2; do
    for kv in f16 q8_0; do
      for c in O X X16 X32 X3 X3b; do
        [ $kv = f16 ] && [ ${c:0:2} = X3 ] && continue
        echo "r$r d32000 B=1 $kv $c:"; run_cfg $c $kv bench -m $M --device cuda -p 0 -n 32 -b 1 -d 32000 -r 2 --ctx 33000 2>/dev/null | row
      done
    done
  done
  for cfg in "O f16" "X f16" "O q8_0" "X3 q8_0"; do
    set -- $cfg
    echo "d4096 $1 $2:"; run_cfg $1 $2 bench -m $M --device cuda -p 0 -n 32 -b 1,16,64 -d 4096 -r 2 --ctx 8192 2>/dev/null | row
  done
fi
# Phase c (a third build: MEMRA_X_TC_KVH_FAST=1 launches the KV heads of one split next to each other,
# grid.x = blocks x KV heads, so the blocks reading one cache row's head slices run at the same time;
# main's grid runs every split of head 0 first). O = phase a's binary. Bits, then rows.
if [ "$PHASE" = c ]; then
  O=/tmp/g/old; [ -x $O ] || { xz -dc .gpu/old.xz > $O && chmod +x $O; }
  rc() { local name=$1 kv=$2; shift 2; local bin=$X f=; [ $name = O ] && bin=$O; [ $name = K ] && f=1
    MEMRA_CUDA_KV=$kv MEMRA_X_TC_KVH_FAST=$f MEMRA_X_ATTN_PREFETCH=0 timeout 150 $bin "$@"; }
  ids=$(seq -s, 100 1400)
  for kv in f16 q8_0; do
    rc O $kv logits -m $M --device cuda --ids $ids --mode decode -o /tmp/l-O.bin 2>/dev/null
    rc K $kv logits -m $M --device cuda --ids $ids --mode decode -o /tmp/l-x.bin 2>/dev/null
    echo -n "logits $kv K vs O: "; cmp /tmp/l-O.bin /tmp/l-x.bin && echo identical
  done
  for r in 1 2; do
    for kv in f16 q8_0; do
      for c in O K; do echo "r$r d32000 B=1 $kv $c:"; rc $c $kv bench -m $M --device cuda -p 0 -n 32 -b 1 -d 32000 -r 2 --ctx 33000 2>/dev/null | row; done
    done
  done
  for c in O K; do echo "d4096 f16 $c:"; rc $c f16 bench -m $M --device cuda -p 0 -n 32 -b 1,16,64 -d 4096 -r 2 --ctx 8192 2>/dev/null | row; done
  for c in O K; do echo "pp512 d16384 f16 $c:"; rc $c f16 bench -m $M --device cuda -p 512 -n 0 -d 16384 -r 2 --ctx 17000 2>/dev/null | row; done
fi
