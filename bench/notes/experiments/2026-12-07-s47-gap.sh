#!/usr/bin/env bash
# Session 47: how long the GPU waits for the host between decode steps (MEMRA_EXP_GAP=1 in the
# experiment build, 2026-12-07-s47-experiment-build.patch on ab90339: events from a step's first upload to its argmax, against the wall time between
# steps). Carry .gpu/X.xz and .gpu/lib.tar.xz.
set -u
mkdir -p /tmp/g/bin /tmp/memra-gpu && tar xJf .gpu/lib.tar.xz -C /tmp/g && xz -dc .gpu/X.xz > /tmp/g/bin/X && chmod +x /tmp/g/bin/X
export LD_LIBRARY_PATH=/tmp/g/lib
X=/tmp/g/bin/X
f9=/tmp/9b.gguf; f35=/tmp/memra-gpu/qwen35moe-35b-a3b-q4_0.gguf
{
nvidia-smi --query-gpu=name --format=csv,noheader
[ -f $f9 ] || $X synth --arch qwen35 --shape 9b --type q4_0 -o $f9 > /dev/null 2>&1
for b in 1 1 16; do for pin in "" 1; do
  echo "9B B=$b pinned=[$pin]"
  MEMRA_EXP_PINNED=$pin MEMRA_EXP_GAP=1 timeout 60 $X bench -m $f9 --device cuda -p 0 -n 128 -b $b -d 512 -r 3 --ctx 2048 2>&1 | grep -E 'tg128|\[gap\]' | cut -d'|' -f5-8
done; done
echo "9B tg128 (no depth)"
MEMRA_EXP_GAP=1 timeout 60 $X bench -m $f9 --device cuda -p 0 -n 128 -r 3 --ctx 2048 2>&1 | grep -E 'tg128|\[gap\]' | cut -d'|' -f5-8
[ -f $f35 ] || $X synth --arch qwen35moe --shape 35b-a3b --type q4_0 -o $f35 > /dev/null 2>&1
for b in 1; do for pin in "" 1; do
  echo "35B B=$b pinned=[$pin]"
  MEMRA_EXP_PINNED=$pin MEMRA_EXP_GAP=1 timeout 60 $X bench -m $f35 --device cuda -p 0 -n 128 -b $b -d 512 -r 3 --ctx 2048 2>&1 | grep -E 'tg128|\[gap\]' | cut -d'|' -f5-8
done; done
} 2>&1 | tee $OUT/s47-gap.log
