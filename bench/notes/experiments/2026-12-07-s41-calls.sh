#!/usr/bin/env bash
# Prepared in session 40 for the next device session; run in session 41 (H100, all four phases:
# bench/results/2026-12-06-1439-h100-session41.md). Carry .gpu/bundle.tar.xz (main:
# `cmake --build build && scripts/gpu-bundle.sh build`), + .gpu/fx.tar.xz for phase t (the bundle
# and the fixtures together fit the 64 MiB carry; a second memra .xz beside them does not).
# Copy back only this call's files (session 40 copied every old gpu-check file and the transfer's
# file count dropped the new ones).
#   q: QUICK gpu-check bench, then batch (now with B = 48): the dense rows' first run since cfba02f (8-bit decode K
#      load), 8c92f98 (mixed-depth attention work list: the --deep rows) and 2b9fcb6 (SwiGLU at
#      33-48 rows on the 2-n-tile shape; B = 40 by hand below), then 1458187's list layout across a
#      block crossing with graphs replaying
#   m: QUICK gpu-check moe (a57fbac moved the block list into one GroupTiles: same launches; expect
#      0 differ and session 39's numbers)
#   n: Nsight Compute with per-instruction stall samples (SASS, --page source) of the B = 64 matmuls
#      (SwiGLU (2, 4, 8 warps) and ffn_down (1, 2, 4): 0.45-0.6 issued warps a scheduler, 17-25% of
#      the read bandwidth; wider shapes lost, section 4 of 2026-12-06-1140-h100-session40.md) and of
#      the MoE routing kernel at B = 64 (22.6 us under Nsight, SMs active ~5.4 us of it on average:
#      where do its 64 blocks wait?)
set -u
[ -x /tmp/g/bin/memra ] || { mkdir -p /tmp/g && tar xJf .gpu/bundle.tar.xz -C /tmp/g; }
export LD_LIBRARY_PATH=/tmp/g/lib BUILD=/tmp/g/bin QUICK=1
M=/tmp/g/bin/memra
touch /tmp/call-start
{
nvidia-smi --query-gpu=name --format=csv,noheader
case "${1:?phase}" in
  q) scripts/gpu-check.sh bench 2>&1 | tail -30; scripts/gpu-check.sh batch 2>&1 | tail -40
     $M bench -m /tmp/memra-gpu/qwen35-9b-q4_0.gguf --device cuda -p 0 -n 32 -b 40 -d 512 -r 2 --ctx 8192 --verify-exact 2>&1 \
       | grep -E 'verify-exact|^\| [^-]' | grep -v '| model |'
     # 1458187 on hardware: the shallow sequences cross position 512 (a new KV block: a longer work
     # list) while recorded decode graphs replay; the replay check and --verify-exact must pass
     $M bench -m /tmp/memra-gpu/qwen35-9b-q4_0.gguf --device cuda -p 0 -n 32 -b 16,64 -d 500 --deep 32000 -r 2 --ctx 33000 \
       --verify-exact 2>&1 | grep -E 'verify-exact|rror|^\| [^-]' | grep -v '| model |' ;;
  t) [ -f .gpu/fx.tar.xz ] && tar xJf .gpu/fx.tar.xz; scripts/gpu-check.sh tests 2>&1 | tail -12 ;;
  m) scripts/gpu-check.sh moe 2>&1 | tail -20 ;;
  n)
    F=/tmp/9b.gguf
    [ -f $F ] || $M synth --arch qwen35 --shape 9b --type q4_0 -o $F >/dev/null 2>&1
    sass() {  # NAME REGEX SKIP COUNT MODEL B
      MEMRA_CUDA_GRAPHS=0 timeout 150 ncu --clock-control none --kernel-name-base demangled --kernel-name regex:"$2" \
        --launch-skip $3 --launch-count $4 --section SourceCounters --section WarpStateStats --import-source no \
        -o /tmp/$1 $M bench -m $5 --device cuda -p 0 -n 4 -b $6 -d 512 -r 1 --ctx 8192 > /dev/null 2>&1
      ncu --import /tmp/$1.ncu-rep --page source --csv --print-source sass > $OUT/ncu-sass-$1.csv 2>&1
      ncu --import /tmp/$1.ncu-rep --page details 2>&1 | grep -E 'matmul_kernel|route_group|Duration|Warp Cycles' | cut -c1-160
    }
    # skip 1042: the 8 prefilled contexts' matmuls (129 a context) and the first decode layer's qkv
    # and ssm_out, so the two are layer 0's SwiGLU and ffn_down (session 40's order, 9B at B = 64)
    sass matmul-b64 matmul_kernel 1042 2 $F 64
    rm -f $F; F=/tmp/35b.gguf
    [ -f $F ] || $M synth --arch qwen35moe --shape 35b-a3b --type q4_0 -o $F >/dev/null 2>&1
    sass route-b64 route_group_kernel 400 1 $F 64 ;;
esac
} 2>&1 | tee $OUT/s41-$1.log
find bench/results -newer /tmp/call-start -type f -exec cp {} $OUT/ \;
ls $OUT
