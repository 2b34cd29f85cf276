#!/usr/bin/env bash
# Session 32, device call 3: the landed 12-warp (2, 8) blocks (Q4_0, Q4_K) against .gpu/main.xz
# (164afaa's memra: main's code before this session). Logits must be identical (a block size
# changes no bits); pp512 alternating; --verify-exact at B = 128 (its SwiGLU takes the (2, 8)
# shape); the matmul GPU tests.
#   bash bench/notes/experiments/2026-12-05-wide-landed.sh   carry [".gpu/bundle.tar.xz", ".gpu/main.xz"]
set -u
mkdir -p /tmp/g /tmp/o && tar xJf .gpu/bundle.tar.xz -C /tmp/g && xz -dc .gpu/main.xz > /tmp/o/old && chmod +x /tmp/o/old
export LD_LIBRARY_PATH=/tmp/g/lib
N=/tmp/g/bin/memra O=/tmp/o/old
row() { grep -E 'tg|pp512' | cut -d'|' -f5,6,7 | tr '\n' ' '; echo; }
{
$N --version; nvidia-smi --query-gpu=name --format=csv,noheader
for t in q4_0 q4_k; do
  M=/tmp/9b-$t.gguf
  $N synth --arch qwen35 --shape 9b --type $t -o $M >/dev/null 2>&1 || echo "synth $t failed"
  for b in new:$N old:$O; do
    ${b#*:} logits -m $M --device cuda --ids "$(seq -s, 100 400)" --mode prefill -o /tmp/l-${b%%:*}.bin 2>&1 | grep -v wrote
  done
  echo -n "$t prefill logits new vs old: "; cmp /tmp/l-new.bin /tmp/l-old.bin && echo identical
  for r in 1 2; do
    for b in new:$N old:$O; do
      echo -n "r$r $t ${b%%:*}: "; ${b#*:} bench -m $M --device cuda -p 512 -n 0 -r 3 2>/dev/null | row
    done
  done
  [ $t = q4_0 ] && $N bench -m $M --device cuda -n 8 -b 128 -d 512 -r 1 --verify-exact 2>&1 | grep -E 'verify-exact|error|differ|tg8'
  rm -f $M
done
/tmp/g/bin/memra_tests --gtest_brief=1 --gtest_filter='GpuOps.Matmul:GpuMatmul*' 2>&1 | tail -15
} 2>&1 | tee $OUT/wide-landed.log
