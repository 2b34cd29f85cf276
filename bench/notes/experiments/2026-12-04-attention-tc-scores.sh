#!/usr/bin/env bash
# Measured on the H200 in session 24 (bench/results/2026-12-04-1900-h200-session24.md section 2):
# correct and exact, slower at every depth and B (B = 64 d4096 352 -> 447 us a layer). Kept for the record.
# Device-call script for bench/notes/experiments/2026-12-04-attention-tc-scores.patch: the bundle of a
# build with the patch as .gpu/bundle.tar.xz (scripts/gpu-bundle.sh). MEMRA_X_ATTN_TC=1 takes the
# tensor-core q.k and p.V paths of attention_split_kernel (f16 cache). ~4 minutes with the 9B synth.
set -u
mkdir -p /tmp/g && tar xJf .gpu/bundle.tar.xz -C /tmp/g
export LD_LIBRARY_PATH=/tmp/g/lib MEMRA_GPU_TEST_DIR=/tmp/gt
mkdir -p /tmp/gt
M=/tmp/g/bin/memra T=/tmp/g/bin/memra_tests
{
for x in 0 1; do
  echo "== MEMRA_X_ATTN_TC=$x: op table (attention), per-layer cost by depth"
  MEMRA_X_ATTN_TC=$x $T --gtest_filter='GpuOps.Attention:GpuAttention*' 2>&1 | grep -E "attention .*f16|FAILED|PASSED|us/call|Failure" | head -30
done
$M synth --arch qwen35 --shape 9b --type q4_0 -o /tmp/9b.gguf >/dev/null 2>&1
row() { grep -E 'tg32' | cut -d'|' -f5,6,7 | tr '\n' ' '; echo; }
for r in 1 2; do
  for x in 0 1; do
    echo -n "TC=$x d512  "; MEMRA_X_ATTN_TC=$x $M bench -m /tmp/9b.gguf --device cuda -p 0 -n 32 -b 1,16,64 -d 512 -r 2 --ctx 8192 2>/dev/null | row
    echo -n "TC=$x d4096 "; MEMRA_X_ATTN_TC=$x $M bench -m /tmp/9b.gguf --device cuda -p 0 -n 32 -b 1,16,64 -d 4096 -r 2 --ctx 8192 2>/dev/null | row
  done
done
for x in 0 1; do
  echo -n "TC=$x d32768 B=1 "; MEMRA_X_ATTN_TC=$x $M bench -m /tmp/9b.gguf --device cuda -p 0 -n 32 -b 1 -d 32000 -r 2 --ctx 32768 2>/dev/null | row
done
echo "== verify-exact with TC"
MEMRA_X_ATTN_TC=1 $M bench -m /tmp/9b.gguf --device cuda -p 0 -n 32 -b 2,16,64 -d 4096 -r 1 --ctx 8192 --verify-exact 2>&1 | grep verify-exact
} 2>&1 | tee $OUT/attn-tc.log
