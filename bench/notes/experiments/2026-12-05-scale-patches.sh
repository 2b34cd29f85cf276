#!/usr/bin/env bash
# Device-call script for the two decode patches of session 24 (same bits expected; speed unmeasured):
#   2026-12-05-q4-q8-scales-per-ktile.patch  Q4_0 / Q8_0 block scales from one 16-byte load a row
#                                            and k-tile (as Q6_K's since 0c7b41a: +3% at B = 1)
#   2026-12-05-q4k-scale-fields.patch        Q4_K / Q5_K scales and mins repacked as 16 six-bit
#                                            fields (one shift + AND each instead of ~4-5 for
#                                            sub-blocks 4-7)
# Prepare here: build main and `xz -c memra > .gpu/old.xz`; apply both patches, build, and
# `scripts/gpu-bundle.sh build` (.gpu/bundle.tar.xz; remove .fixtures). ~4 minutes on the H200.
# Land a patch only where it is not slower (each one touches different types, so the rows separate
# them: q4_0 / q8_0 rows the first, q4_k the second).
set -u
mkdir -p /tmp/g /tmp/o && tar xJf .gpu/bundle.tar.xz -C /tmp/g && xz -dc .gpu/old.xz > /tmp/o/memra && chmod +x /tmp/o/memra
export LD_LIBRARY_PATH=/tmp/g/lib MEMRA_GPU_TEST_DIR=/tmp/gt
mkdir -p /tmp/gt
N=/tmp/g/bin/memra O=/tmp/o/memra
{
$N --version; $O --version
/tmp/g/bin/memra_tests --gtest_filter='GpuOps.Matmul:GpuOps.Moe:GpuOps.RowWise:GpuMatmul.*:CudaLayout*' 2>&1 | grep -E "FAILED|PASSED|Failure"
IDS=$(seq -s, 100 140)
row() { grep -E 'tg32|pp512' | cut -d'|' -f5,6,7 | tr '\n' ' '; echo; }
for t in q4_0 q8_0 q4_k; do
  $N synth --arch qwen35 --shape 9b --type $t -o /tmp/9b-$t.gguf >/dev/null 2>&1
  for m in decode prefill; do
    for b in N O; do eval "\$$b" logits -m /tmp/9b-$t.gguf --device cuda --ids $IDS --mode $m -o /tmp/l-$m-$b.bin 2>/dev/null; done
    echo -n "logits $t $m new vs old: "; cmp /tmp/l-$m-N.bin /tmp/l-$m-O.bin && echo identical
  done
  for r in 1 2; do for b in O N; do
    echo -n "r$r $t $b: "; eval "\$$b" bench -m /tmp/9b-$t.gguf --device cuda -p 512 -n 32 -b 1,16,64 -d 512 -r 2 --ctx 8192 2>/dev/null | row
  done; done
  rm -f /tmp/9b-$t.gguf
done
} 2>&1 | tee $OUT/scale-patches.log
