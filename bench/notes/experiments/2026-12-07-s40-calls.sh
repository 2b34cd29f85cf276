#!/usr/bin/env bash
# Prepared in session 39, run in session 40 (phases d, p, x, st; results in
# bench/results/2026-12-06-1140-h100-session40.md). Phase st's copy of every gpu-check file to $OUT
# made the transfer drop the new logs (file count): copy only a call's own files. Carry [".gpu/bundle.tar.xz" (main),
# ".gpu/list.xz" (main + 2026-12-06-s39-attn-mixed-depth-list.patch: `git apply`, build, then
# `scripts/gpu-bundle.sh --memra list`)].
#   d: mixed-depth decode, main (M) against the list patch (X): 9B Q4_0 B = 16 / 64, one sequence
#      32,000 deep among sequences at 512 (f16, then the 8-bit cache), --verify-exact, logits cmp;
#      and the unlisted rows (-d 512, no --deep) that must not move
#   p: per-op profiles of the 9B step at B = 1 / 16 / 64 (graphs off), then phase r
#   x: decode steps through the Gated DeltaNet prompt form (X: MEMRA_X_GDN_DECODE_SEQS), Nsight of
#      the fused kernel at B = 16 and the matmuls at B = 64
#   s: matmul tile shapes forced at 33-64 rows (X: MEMRA_X_SHAPE_SW / MEMRA_X_SHAPE), B = 48 / 64
#   st: s (one round), then QUICK gpu-check tests
#   r: Nsight Compute of the MoE routing kernel at B = 64 (35B-A3B: `moe route` 41 us a layer
#      against 13 at B = 1, events, graphs off; the skip passes the 8 prefilled contexts' 320 launches)
set -u
mkdir -p /tmp/g && { [ -x /tmp/g/bin/memra ] || tar xJf .gpu/bundle.tar.xz -C /tmp/g; }
export LD_LIBRARY_PATH=/tmp/g/lib
M=/tmp/g/bin/memra X=/tmp/g/${XNAME:-list}
[ -f .gpu/${XNAME:-list}.xz ] && { [ -x $X ] || { xz -dc .gpu/${XNAME:-list}.xz > $X && chmod +x $X; }; }
row() { grep -E '^\| [^-]' | grep -v '| model |' | cut -d'|' -f5-10; }
{
nvidia-smi --query-gpu=name --format=csv,noheader
case "${1:?phase}" in
  d)
    F=/tmp/9b.gguf
    [ -f $F ] || $M synth --arch qwen35 --shape 9b --type q4_0 -o $F >/dev/null 2>&1
    for kv in f16 q8_0; do
      for r in 1 2; do for bin in M X; do
        echo "r$r $bin $kv --deep 32000:"
        MEMRA_CUDA_KV=$kv timeout 280 ${!bin} bench -m $F --device cuda -p 0 -n 32 -b 16,64 -d 512 --deep 32000 \
          -r 2 --ctx 33000 --verify-exact 2> >(grep -E 'verify-exact|rror' >&2) | row
      done; done
    done
    for bin in M X; do echo "$bin f16 no --deep:"; timeout 200 ${!bin} bench -m $F --device cuda -p 0 -n 32 -b 1,16,64 -d 512 -r 2 --ctx 8192 2>/dev/null | row; done ;;
  p)
    # per-op profiles of the dense 9B decode step (events, graphs off) at B = 1 / 16 / 64, then r
    F=/tmp/9b.gguf
    [ -f $F ] || $M synth --arch qwen35 --shape 9b --type q4_0 -o $F >/dev/null 2>&1
    for b in 1 16 64; do
      MEMRA_CUDA_PROFILE=1 timeout 120 $M bench -m $F --device cuda -p 0 -n 16 -b $b -d 512 -r 1 --ctx 8192 2> $OUT/profile-9b-b$b.txt >/dev/null
      head -14 $OUT/profile-9b-b$b.txt
    done
    rm -f $F
    bash "$0" r ;;
  x)
    # the Gated DeltaNet prompt form (prep, 4 column slices a head, norm: the same bits) for decode
    # steps of MEMRA_X_GDN_DECODE_SEQS sequences or more (X = main + that env check), against main
    F=/tmp/9b.gguf
    [ -f $F ] || $M synth --arch qwen35 --shape 9b --type q4_0 -o $F >/dev/null 2>&1
    for r in 1 2; do for cfg in "M 0" "X 1" "X 8"; do set -- $cfg
      echo "r$r $1 seqs=$2:"; MEMRA_X_GDN_DECODE_SEQS=$2 timeout 200 ${!1} bench -m $F --device cuda -p 0 -n 32 -b 1,4,16,64 -d 512 -r 2 --ctx 8192 2>/dev/null | row
    done; done
    MEMRA_X_GDN_DECODE_SEQS=1 timeout 200 $X bench -m $F --device cuda -p 0 -n 32 -b 16 -d 512 -r 1 --ctx 8192 --verify-exact 2>&1 | grep -E 'verify-exact|rror'
    for b in 16 64; do
      MEMRA_X_GDN_DECODE_SEQS=1 MEMRA_CUDA_PROFILE=1 timeout 120 $X bench -m $F --device cuda -p 0 -n 16 -b $b -d 512 -r 1 --ctx 8192 2> $OUT/profile-9b-b$b-gdn-slices.txt >/dev/null
      grep -E 'deltanet|cuda-profile' $OUT/profile-9b-b$b-gdn-slices.txt
    done
    S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section LaunchStats"
    MEMRA_CUDA_GRAPHS=0 timeout 200 ncu --clock-control none --kernel-name-base demangled --kernel-name regex:deltanet_kernel \
      --launch-skip 30 --launch-count 2 $S $M bench -m $F --device cuda -p 0 -n 4 -b 16 -d 512 -r 1 --ctx 8192 > $OUT/ncu-gdn-b16.txt 2>&1
    MEMRA_CUDA_GRAPHS=0 timeout 200 ncu --clock-control none --kernel-name-base demangled --kernel-name regex:matmul_kernel \
      --launch-skip 1040 --launch-count 8 $S $M bench -m $F --device cuda -p 0 -n 4 -b 64 -d 512 -r 1 --ctx 8192 > $OUT/ncu-matmul-b64.txt 2>&1
    grep -E 'matmul_kernel|deltanet_kernel|Duration|Memory Throughput|Issued Warp|No Eligible|Registers Per|Achieved Occ' $OUT/ncu-gdn-b16.txt $OUT/ncu-matmul-b64.txt | cut -c1-200 | head -80 ;;
  s)
    # matmul tile shapes at 33-64 rows (X = main + MEMRA_X_SHAPE_SW / MEMRA_X_SHAPE: the SwiGLU and
    # the other launches forced to pick_config's shape index; same bits): B = 64 and 48
    F=/tmp/9b.gguf
    [ -f $F ] || $M synth --arch qwen35 --shape 9b --type q4_0 -o $F >/dev/null 2>&1
    for r in $(seq ${ROUNDS:-2}); do for cfg in "M - -" "M 0 -" "M - 1" "M 0 1" "M 0 0" "M 2 -"; do set -- $cfg
      echo "r$r $1 sw=$2 other=$3:"
      env $([ $2 != - ] && echo MEMRA_X_SHAPE_SW=$2) $([ $3 != - ] && echo MEMRA_X_SHAPE=$3) MEMRA_NOOP=1 \
        timeout 100 ${!1} bench -m $F --device cuda -p 0 -n 32 -b 48,64 -d 512 -r 2 --ctx 8192 2>/dev/null | row
    done; done
    MEMRA_X_SHAPE_SW=0 MEMRA_X_SHAPE=1 timeout 100 $M bench -m $F --device cuda -p 0 -n 32 -b 64 -d 512 -r 1 --ctx 8192 --verify-exact 2>&1 | grep -E 'verify-exact|rror'
    for cfg in "0 1" "1 2"; do set -- $cfg
      MEMRA_X_SHAPE_SW=$1 MEMRA_X_SHAPE=$2 MEMRA_CUDA_PROFILE=1 timeout 100 $M bench -m $F --device cuda -p 0 -n 16 -b 64 -d 512 -r 1 --ctx 8192 2> $OUT/profile-9b-b64-shape-$1-$2.txt >/dev/null
      grep -E 'r64' $OUT/profile-9b-b64-shape-$1-$2.txt
    done ;;
  st)
    # phase s cut to one round, then QUICK gpu-check tests (the fixtures: .gpu/fx.tar.xz)
    ROUNDS=1 bash "$0" s
    [ -f .gpu/fx.tar.xz ] && tar xJf .gpu/fx.tar.xz
    LD_LIBRARY_PATH=/tmp/g/lib BUILD=/tmp/g/bin QUICK=1 timeout 330 scripts/gpu-check.sh tests 2>&1 | tail -12
    cp bench/results/*gpu-check* $OUT/ 2>/dev/null; ls $OUT ;;
  r)
    F=/tmp/35b.gguf
    [ -f $F ] || $M synth --arch qwen35moe --shape 35b-a3b --type q4_0 -o $F >/dev/null 2>&1
    MEMRA_CUDA_GRAPHS=0 timeout 280 ncu --clock-control none --kernel-name-base demangled --kernel-name regex:route_group_kernel \
      --launch-skip 400 --launch-count 2 --section SpeedOfLight --section WarpStateStats --section LaunchStats \
      --section SchedulerStats --section SourceCounters \
      $M bench -m $F --device cuda -p 0 -n 8 -b 64 -d 512 -r 1 --ctx 8192 > $OUT/ncu-route-b64.txt 2>&1
    grep -E 'route_group|Duration|Elapsed|Issued Warp|Registers Per|Grid Size' $OUT/ncu-route-b64.txt | head -20 ;;
esac
} 2>&1 | tee $OUT/s40-$1.log
