#!/usr/bin/env bash
# RAN in session 30 (an H100; bench/results/2026-12-05-1030-session30.md): the offset codes were
# slower and are reverted on main; to run this again, build a bundle from main with
# bench/notes/experiments/2026-12-05-offset-codes.patch applied.
# Device-call script for session 29's offset codes (Q4_0 / Q8_0 / Q4_K / Q5_K decode their codes with
# an offset left in; the k-tile's min terms take it out: matmul_order.h), never run on hardware
# before: main (.gpu/bundle.tar.xz, built from the commit that landed it) against main before it
# (.gpu/main0.xz: d924ea6's code, the L2 evict_first policy) and before that (.gpu/pf.xz: evict_first
# off, session 28's experiment binary without MEMRA_CUDA_PREFETCH_MB).
#   bash bench/notes/experiments/2026-12-05-offset-codes.sh 1   (~6 min) GPU tests (the op table's
#        real shapes print each case's error / bound: the offsets' roundings must stay small), then
#        9B Q4_0: decode logits new vs old (max |diff| over max |logit|, argmax agreement), main0 vs
#        pf (must be identical: a cache policy), tg32 B = 1 / 16 / 64 @ d512 + pp512, two rounds.
#   bash bench/notes/experiments/2026-12-05-offset-codes.sh 0   (~4 min, for a short budget) stage 1
#        without GpuMatmul / GpuMoe, main0 vs pf and the second round.
#   bash bench/notes/experiments/2026-12-05-offset-codes.sh 2   (~6 min) the same rows for q4_k and
#        q8_0, q6_k (its bits must not move: cmp), --verify-exact at B = 16 / 64 (q4_0, q4_k).
# carry [".gpu/bundle.tar.xz", ".gpu/main0.xz", ".gpu/pf.xz"]
set -u
STAGE=${1:-1}
ROUNDS="1 2"
[ "$STAGE" = 0 ] && ROUNDS=1
mkdir -p /tmp/g /tmp/o && tar xJf .gpu/bundle.tar.xz -C /tmp/g && xz -dc .gpu/main0.xz > /tmp/o/memra &&
  chmod +x /tmp/o/memra
[ "$STAGE" = 1 ] && xz -dc .gpu/pf.xz > /tmp/o/pf && chmod +x /tmp/o/pf
export LD_LIBRARY_PATH=/tmp/g/lib
N=/tmp/g/bin/memra O=/tmp/o/memra
IDS=$(seq -s, 100 400)
row() { grep -E 'tg32|pp512' | cut -d'|' -f5,6,7 | tr '\n' ' '; echo; }
# Relative change of two raw float32 logit files (python3 with numpy is on the device image).
cmp_logits() {
  python3 - "$1" "$2" 301 <<'EOF'
import sys, numpy as np
a = np.fromfile(sys.argv[1], dtype=np.float32); b = np.fromfile(sys.argv[2], dtype=np.float32)
if a.size != b.size or a.size == 0: print("sizes differ", a.size, b.size); sys.exit()
n = int(sys.argv[3]); v = a.size // n
A, B = a.reshape(n, v), b.reshape(n, v)
rel = np.abs(A - B).max(axis=1) / np.abs(B).max(axis=1)
print(f"{n} steps: max |diff| / max |logit| median {np.median(rel):.2e} max {rel.max():.2e}; "
      f"argmax agrees {(A.argmax(1) == B.argmax(1)).mean() * 100:.1f}%; identical {np.array_equal(a, b)}")
EOF
}
compare_type() {  # TYPE: synth, logits new vs old, bench rows old / new twice
  local t=$1 M=/tmp/9b-$1.gguf
  $N synth --arch qwen35 --shape 9b --type "$t" -o $M >/dev/null 2>&1 || { echo "synth $t failed"; return; }
  $N logits -m $M --device cuda --ids $IDS --mode decode -o /tmp/l-n.bin 2>/dev/null
  $O logits -m $M --device cuda --ids $IDS --mode decode -o /tmp/l-o.bin 2>/dev/null
  echo -n "$t logits decode new vs old: "; cmp_logits /tmp/l-n.bin /tmp/l-o.bin
  if [ -x /tmp/o/pf ]; then
    /tmp/o/pf logits -m $M --device cuda --ids $IDS --mode decode -o /tmp/l-p.bin 2>/dev/null
    echo -n "$t logits decode main0 (evict_first) vs pf: "; cmp /tmp/l-o.bin /tmp/l-p.bin && echo identical
  fi
  for r in $ROUNDS; do
    echo -n "$t r$r old: "; $O bench -m $M --device cuda -p 512 -n 32 -b 1,16,64 -d 512 -r 2 2>/dev/null | row
    echo -n "$t r$r new: "; $N bench -m $M --device cuda -p 512 -n 32 -b 1,16,64 -d 512 -r 2 2>/dev/null | row
  done
  [ -x /tmp/o/pf ] && { echo -n "$t pf: "; /tmp/o/pf bench -m $M --device cuda -p 512 -n 32 -b 1,16,64 -d 512 -r 2 2>/dev/null | row; }
}
{
$N --version; $O --version
if [ "$STAGE" != 2 ]; then
  FILTER='GpuOps.Matmul:GpuMatmul.*:GpuMoe.*:GpuModel.Synth9bFourLayersMatchesCpuForEveryType'
  [ "$STAGE" = 0 ] && FILTER='GpuOps.Matmul:GpuModel.Synth9bFourLayersMatchesCpuForEveryType'
  /tmp/g/bin/memra_tests --gtest_filter="$FILTER" 2>&1 |
    grep -E '^\[ *(OK|FAILED|PASSED|SKIPPED) |q4_0|q8_0|q4_k|q5_k|q6_k|iq4|FAIL|bound'
  compare_type q4_0
else
  for t in q4_k q8_0; do compare_type $t; rm -f /tmp/9b-$t.gguf; done
  M=/tmp/9b-q6_k.gguf
  $N synth --arch qwen35 --shape 9b --type q6_k -o $M >/dev/null 2>&1
  $N logits -m $M --device cuda --ids $IDS --mode decode -o /tmp/l-n.bin 2>/dev/null
  $O logits -m $M --device cuda --ids $IDS --mode decode -o /tmp/l-o.bin 2>/dev/null
  echo -n "q6_k logits decode new vs old (same order): "; cmp /tmp/l-n.bin /tmp/l-o.bin && echo identical
  rm -f $M
  for t in q4_0 q4_k; do
    M=/tmp/9b-$t.gguf
    [ -f $M ] || $N synth --arch qwen35 --shape 9b --type "$t" -o $M >/dev/null 2>&1
    $N bench -m $M --device cuda -n 32 -b 16,64 -d 512 --verify-exact 2>&1 | grep -E 'verify-exact|error'
    # The B = 64 step by op (no per-op table at 64 rows was taken before; graphs off).
    [ $t = q4_0 ] && MEMRA_CUDA_PROFILE=1 $N bench -m $M --device cuda -p 0 -n 16 -b 64 -d 512 -r 1 --ctx 8192 2>&1 |
      grep -A40 cuda-profile > $OUT/profile-b64.txt
    rm -f $M
  done
fi
} 2>&1 | tee $OUT/offset-codes-$STAGE.log
