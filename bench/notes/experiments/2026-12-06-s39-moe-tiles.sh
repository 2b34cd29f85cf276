#!/usr/bin/env bash
# Session 39: the MoE grouped launches with block lists (GroupTiles, written by moe_route: a block
# for each row tile of a used slot, the shared slot's first) against main fa564e5's grid of every
# slot x every tile of the largest possible group (B = 64: 257 x 4 blocks a row tile, ~78% empty;
# pp512: 256 x 32). Same rows, same tile shapes: the same bits.
# Carry [".gpu/bundle.tar.xz" (the new build, X), ".gpu/main.xz" (fa564e5's memra, M)].
# Ran twice: with a list for every grouped launch (B = 1 -4%), then only where a group can
# outgrow one block's rows (PROFILE=0: no per-op tables the second time).
set -u
mkdir -p /tmp/gx && { [ -x /tmp/gx/bin/memra ] || tar xJf .gpu/bundle.tar.xz -C /tmp/gx; }
export LD_LIBRARY_PATH=/tmp/gx/lib
X=/tmp/gx/bin/memra M=/tmp/gx/main
[ -x $M ] || { xz -dc .gpu/main.xz > $M && chmod +x $M; }
F=/tmp/35b.gguf
row() { grep -E '^\| [^-]' | grep -v '| model |' | cut -d'|' -f5-10; }
b() { local bin=$1; shift; timeout 250 $bin bench -m $F --device cuda "$@" 2> >(grep -E 'verify-exact|rror' >&2) | row; }
{
nvidia-smi --query-gpu=name --format=csv,noheader; $M --version; $X --version
/tmp/gx/bin/memra_tests --gtest_filter='GpuMoe.*:GpuOps.Moe:GpuOps.Matmul' --gtest_brief=1 2>&1 | grep -E 'moe_ffn|FAIL|PASSED|rror' | tail -12
[ -f $F ] || $X synth --arch qwen35moe --shape 35b-a3b --type q4_0 -o $F >/dev/null 2>&1 || echo "synth failed"
ids=$(seq -s, 100 611)
for mode in decode prefill; do
  n=$([ $mode = decode ] && echo 300 || echo 512)
  sub=$(echo $ids | cut -d, -f1-$n)
  for bin in M X; do ${!bin} logits -m $F --device cuda --ids $sub --mode $mode -o /tmp/l-$bin.bin 2>/dev/null; done
  echo -n "logits $mode ($n ids) X vs M: "; cmp /tmp/l-M.bin /tmp/l-X.bin && echo identical
done
rm -f /tmp/l-*.bin
for r in 1 2; do
  for bin in M X; do
    echo "r$r $bin pp512, tg32 B=1,16,32,64 @ d512:"
    b ${!bin} -p 512 -n 0 -r 2 --ctx 8192
    b ${!bin} -p 0 -n 32 -b 1,16,32,64 -d 512 -r 2 --ctx 8192
  done
done
echo "X --verify-exact B=16,64:"; b $X -p 0 -n 32 -b 16,64 -d 512 -r 1 --ctx 8192 --verify-exact
[ "${PROFILE:-1}" = 1 ] && for bin in M X; do
  MEMRA_CUDA_PROFILE=1 ${!bin} bench -m $F --device cuda -p 0 -n 16 -b 64 -d 512 -r 1 --ctx 8192 2> $OUT/moe-profile-b64-$bin.txt > /dev/null
  echo "$bin profile B=64:"; grep -E 'moe|cuda-profile' $OUT/moe-profile-b64-$bin.txt | head -8
done
} 2>&1 | tee $OUT/s39-moe-tiles.log
