#!/usr/bin/env bash
# Session 32, device call 5: row tiles spanning the targets of fused launches (and the 12-warp
# (2, 8) blocks) against .gpu/main.xz (164afaa: main's code before this session). Logits must be
# identical; pp512 and tg32 @ d512 B = 1 / 16 / 64 alternating; the GpuMatmul tests.
#   bash bench/notes/experiments/2026-12-05-span-tiles.sh   carry [".gpu/bundle.tar.xz", ".gpu/main.xz"]
set -u
mkdir -p /tmp/g /tmp/o && tar xJf .gpu/bundle.tar.xz -C /tmp/g && xz -dc .gpu/main.xz > /tmp/o/old && chmod +x /tmp/o/old
export LD_LIBRARY_PATH=/tmp/g/lib
N=/tmp/g/bin/memra O=/tmp/o/old M=/tmp/9b-q4_0.gguf
row() { grep -E 'tg|pp512' | cut -d'|' -f5,6,7 | tr '\n' ' '; echo; }
{
$N --version; nvidia-smi --query-gpu=name --format=csv,noheader
$N synth --arch qwen35 --shape 9b --type q4_0 -o $M >/dev/null 2>&1 || echo "synth failed"
for mode in prefill decode; do
  for b in new:$N old:$O; do
    ${b#*:} logits -m $M --device cuda --ids "$(seq -s, 100 400)" --mode $mode -o /tmp/l-${b%%:*}.bin 2>&1 | grep -v wrote
  done
  echo -n "$mode logits new vs old: "; cmp /tmp/l-new.bin /tmp/l-old.bin && echo identical
done
for r in 1 2; do
  for b in new:$N old:$O; do
    echo -n "r$r ${b%%:*}: "; ${b#*:} bench -m $M --device cuda -p 512 -n 32 -b 1,16,64 -d 512 -r 2 2>/dev/null | row
  done
done
/tmp/g/bin/memra_tests --gtest_brief=1 --gtest_filter='GpuMatmul*' 2>&1 | tail -3
} 2>&1 | tee $OUT/span-tiles.log
