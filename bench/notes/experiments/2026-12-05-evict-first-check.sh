#!/usr/bin/env bash
# Device-call script: main with the weights' L2 evict_first policy (.gpu/bundle.tar.xz) against the
# session-28 experiment binary with it off (.gpu/pf.xz, MEMRA_CUDA_PREFETCH_MB unset = main before):
# decode logits cmp, the matmul and model exactness tests, tg32 B = 1 / 16 / 64, pp512. ~2 min.
set -u
mkdir -p /tmp/g /tmp/p && tar xJf .gpu/bundle.tar.xz -C /tmp/g && xz -dc .gpu/pf.xz > /tmp/p/memra && chmod +x /tmp/p/memra
export LD_LIBRARY_PATH=/tmp/g/lib
N=/tmp/g/bin/memra P=/tmp/p/memra
{
$N --version
M=/tmp/9b-q4_0.gguf
$N synth --arch qwen35 --shape 9b --type q4_0 -o $M >/dev/null 2>&1
IDS=$(seq -s, 100 400)
$N logits -m $M --device cuda --ids $IDS --mode decode -o /tmp/l-n.bin 2>/dev/null
$P logits -m $M --device cuda --ids $IDS --mode decode -o /tmp/l-p.bin 2>/dev/null
echo -n "logits decode 301 ids evict_first vs before: "; cmp /tmp/l-n.bin /tmp/l-p.bin && echo identical
$N logits -m $M --device cuda --ids $IDS --mode prefill -o /tmp/p-n.bin 2>/dev/null
$P logits -m $M --device cuda --ids $IDS --mode prefill -o /tmp/p-p.bin 2>/dev/null
echo -n "logits prefill 301 ids evict_first vs before: "; cmp /tmp/p-n.bin /tmp/p-p.bin && echo identical
row() { grep -E 'tg32|pp512' | cut -d'|' -f5,6,7 | tr '\n' ' '; echo; }
for r in 1; do
  echo -n "r$r before: "; $P bench -m $M --device cuda -p 512 -n 32 -b 1,16,64 -d 512 -r 2 2>/dev/null | row
  echo -n "r$r evict_first: "; $N bench -m $M --device cuda -p 512 -n 32 -b 1,16,64 -d 512 -r 2 2>/dev/null | row
done
/tmp/g/bin/memra_tests --gtest_filter='GpuMatmul.*:GpuMoe.*' 2>&1 | grep -E '^\[ *(OK|FAILED|PASSED|SKIPPED) ' 
} 2>&1 | tee $OUT/evict-first-check.log
