#!/usr/bin/env bash
# Prepared in session 39 for the next device session (not run). Carry [".gpu/bundle.tar.xz" (main),
# ".gpu/list.xz" (main + 2026-12-06-s39-attn-mixed-depth-list.patch: `git apply`, build, then
# `scripts/gpu-bundle.sh --memra list`)].
#   d: mixed-depth decode, main (M) against the list patch (X): 9B Q4_0 B = 16 / 64, one sequence
#      32,000 deep among sequences at 512 (f16, then the 8-bit cache), --verify-exact, logits cmp;
#      and the unlisted rows (-d 512, no --deep) that must not move
#   p: per-op profiles of the 9B step at B = 1 / 16 / 64 (graphs off), then phase r
#   r: Nsight Compute of the MoE routing kernel at B = 64 (35B-A3B: `moe route` 41 us a layer
#      against 13 at B = 1, events, graphs off; the skip passes the 8 prefilled contexts' 320 launches)
set -u
mkdir -p /tmp/g && { [ -x /tmp/g/bin/memra ] || tar xJf .gpu/bundle.tar.xz -C /tmp/g; }
export LD_LIBRARY_PATH=/tmp/g/lib
M=/tmp/g/bin/memra X=/tmp/g/list
[ -f .gpu/list.xz ] && { [ -x $X ] || { xz -dc .gpu/list.xz > $X && chmod +x $X; }; }
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
