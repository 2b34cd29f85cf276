#!/usr/bin/env bash
# Device-call script for session 25's SASS cuts (f7d92cd float pieces as whole A fragments, 6f410ff
# Q8_0 PRMT operands, 3c8ef83 Q4_K / Q5_K scales without I2FP) and the Q3_K / Q5_0 transcodes
# (be17659), against c5f4d6a (the last main measured on the H200). Same bits expected for every type
# but Q4_K / Q5_K: session 26 made their min term one tensor-core product a k-tile (an order change:
# their logits differ from c5f4d6a's by rounding; the script prints the largest relative difference,
# and `--verify-exact` checks them alone vs batched).
# Prepare here:
#   git worktree add /tmp/wt-old c5f4d6a && cmake -S /tmp/wt-old -B /tmp/wt-old/build -G Ninja \
#     -DCMAKE_BUILD_TYPE=Release -DMEMRA_EMBED_DEMO=OFF && cmake --build /tmp/wt-old/build --target memra
#   strip -o /tmp/memra-old /tmp/wt-old/build/memra && xz -c /tmp/memra-old > .gpu/old.xz
#   scripts/gpu-bundle.sh build && rm -rf .fixtures      (main's binaries: .gpu/bundle.tar.xz)
# (session 25 left .gpu/old.xz built from c5f4d6a and .gpu/bundle.tar.xz of main: check
# `xz -dc .gpu/old.xz | strings | grep -m1 'commit c5f4d6a'`.) ~9 minutes on the H200 (split it in two calls if a synth is slow).
# Two calls of ~5 minutes: `bash <this> 1` (the 9B types) then `bash <this> 2` (2B float layouts,
# Q3_K / Q5_0 rows, the emulation-checked op tests on hardware); no argument runs both (~11 min:
# over one call's 600 s).
set -u
PART=${1:-all}
# Session 27: "new" here is session 26's binary (.gpu/s26.xz, f7f3d77: the kernels this script is
# about); main's bundle (session 27's launch fusions on top, same bits) only supplies the libraries
# and the op tests. Carry .gpu/bundle.tar.xz, .gpu/old.xz and .gpu/s26.xz.
mkdir -p /tmp/g /tmp/o && tar xJf .gpu/bundle.tar.xz -C /tmp/g && xz -dc .gpu/old.xz > /tmp/o/memra && chmod +x /tmp/o/memra
xz -dc .gpu/s26.xz > /tmp/o/s26 && chmod +x /tmp/o/s26
export LD_LIBRARY_PATH=/tmp/g/lib MEMRA_GPU_TEST_DIR=/tmp/gt
mkdir -p /tmp/gt
N=/tmp/o/s26 O=/tmp/o/memra
{
$N --version; $O --version
IDS=$(seq -s, 100 140)
row() { grep -E 'tg32|pp512' | cut -d'|' -f5,6,7 | tr '\n' ' '; echo; }
[ "$PART" = 2 ] || for t in bf16 q8_0 q4_k q5_k; do
  $N synth --arch qwen35 --shape 9b --type $t -o /tmp/9b-$t.gguf >/dev/null 2>&1
  for m in decode prefill; do
    for b in N O; do eval "\$$b" logits -m /tmp/9b-$t.gguf --device cuda --ids $IDS --mode $m -o /tmp/l-$m-$b.bin 2>/dev/null; done
    echo -n "logits $t $m new vs old: "; cmp /tmp/l-$m-N.bin /tmp/l-$m-O.bin && echo identical
    python3 -c "import array,sys; a=array.array('f',open('/tmp/l-$m-N.bin','rb').read()); b=array.array('f',open('/tmp/l-$m-O.bin','rb').read()); print('  max |new-old| / max |old| = %.3g' % (max(abs(x-y) for x,y in zip(a,b)) / max(abs(y) for y in b)))" 2>&1 | tail -1
  done
  case $t in q4_k|q5_k) echo "$t --verify-exact:"; $N bench -m /tmp/9b-$t.gguf --device cuda -p 0 -n 32 -b 16,64 -d 512 -r 1 --ctx 8192 --verify-exact 2>&1 | grep -E 'differ|tg32' | cut -c1-170;; esac
  for r in 1 2; do for b in O N; do
    echo -n "r$r $t $b: "; eval "\$$b" bench -m /tmp/9b-$t.gguf --device cuda -p 512 -n 32 -b 1,16,64 -d 512 -r 2 --ctx 8192 2>/dev/null | row
  done; done
  rm -f /tmp/9b-$t.gguf
done
# The other float layouts on the 2B (small files): identity, and 2B BF16 tg128 (514 in session 21).
[ "$PART" = 1 ] || for t in f16 f32 bf16; do
  $N synth --arch qwen35 --shape 2b --type $t -o /tmp/2b-$t.gguf >/dev/null 2>&1
  for b in N O; do eval "\$$b" logits -m /tmp/2b-$t.gguf --device cuda --ids $IDS --mode decode -o /tmp/l2-$b.bin 2>/dev/null; done
  echo -n "logits 2b $t decode new vs old: "; cmp /tmp/l2-N.bin /tmp/l2-O.bin && echo identical
  for b in O N; do echo -n "2b $t $b: "; eval "\$$b" bench -m /tmp/2b-$t.gguf --device cuda -p 512 -n 128 -r 2 2>/dev/null | grep -E 'tg128|pp512' | cut -d'|' -f5,6,7 | tr '\n' ' '; echo; done
  rm -f /tmp/2b-$t.gguf
done
[ "$PART" = 1 ] || for t in q3_k q5_0; do
  $N synth --arch qwen35 --shape 9b --type $t -o /tmp/9b-$t.gguf >/dev/null 2>&1
  echo "$t (new only):"; $N bench -m /tmp/9b-$t.gguf --device cuda -p 512 -n 32 -b 1,16,64 -d 512 -r 2 --ctx 8192 --verify-exact 2>&1 | grep -E 'note|differ|tg32|pp512' | cut -c1-170
  rm -f /tmp/9b-$t.gguf
done
[ "$PART" = 1 ] || /tmp/g/bin/memra_tests --gtest_filter='GpuOps.Matmul:GpuOps.RowWise:GpuOps.Moe:GpuMatmul.*:CudaLayout*' 2>&1 | grep -E "FAILED|PASSED|Failure"
} 2>&1 | tee $OUT/sass-cuts-$PART.log
