#!/usr/bin/env bash
# Session 42's device calls. Carry .gpu/bundle.tar.xz (+ .gpu/memra-want.xz for phase a: main
# 333a94a with pick_config's "blocks wanted an SM from 17 rows" read from MEMRA_X_WANT, default 2 =
# main's rule; an experiment binary, not committed).
#   a: the packed-segment GPU test; 9B Q4_0 pp512 and B = 1, 16, 64 @ d512 at seg packs 1 / 8 / 2 / 1 / 8;
#      --verify-exact at pack 8; then the want experiment at B = 32, 64 (1 / 2 / 4 blocks an SM)
#   t: QUICK gpu-check tests (carry .fixtures too)
#   f: the bundle built from the seg-pack revert (34cf67d's kernel) with MEMRA_X_WANT read for 17-64
#      rows (default 2 = main's rule; not committed): want 2 / 3 at B = 24, 32, 48, 64 in turns, then
#      the record rows (pp512 + tg128, B = 1..64 --verify-exact) and the GpuMatmul tests
set -u
[ "${1:-}" = f ] && rm -rf /tmp/g
[ -x /tmp/g/bin/memra ] || { mkdir -p /tmp/g && tar xJf .gpu/bundle.tar.xz -C /tmp/g; }
export LD_LIBRARY_PATH=/tmp/g/lib
M=/tmp/g/bin/memra
F=/tmp/9b.gguf
[ -f $F ] || $M synth --arch qwen35 --shape 9b --type q4_0 -o $F > /dev/null 2>&1
rows() { grep -E '^\| [^-]' | grep -v '| model |' | cut -d'|' -f5-9; }
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
  t)
    BUILD=/tmp/g/bin QUICK=1 scripts/gpu-check.sh tests 2>&1 | tail -25
    cp bench/results/*gpu-check* $OUT/ 2>/dev/null ;;
esac
} 2>&1 | tee $OUT/s42-$1.log
