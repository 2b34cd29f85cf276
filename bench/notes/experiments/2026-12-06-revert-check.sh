#!/usr/bin/env bash
# Its comparisons ran on 2026-12-05 through 2026-12-05-s31-check.sh and an inline bulk4 call
# (bench/results/2026-12-05-1310-h200-session31.md): main0 and bulk4 measured, pf not again.
# Device-call script for main after session 30 (94ad752 and later): the order before the offset
# codes, the one-row streaming kernel's lane copies without an L2 policy (ptxas miscompiled the
# hinted form: bench/results/2026-12-05-1030-session30.md), IQ4_NL / IQ4_XS. Main's bundle against
# .gpu/main0.xz (d924ea6: the same order, every copy evict_first) and .gpu/pf.xz (no policy at all).
#   bash bench/notes/experiments/2026-12-06-revert-check.sh   (a few minutes) 9B Q4_0 decode + prefill logits
#        main vs main0 (must be identical: a cache policy changes no value), tg32 B = 1 / 16 / 64 @ d512
#        and pp512, main / main0 / pf / bulk4, two rounds (what the lane copies' policy was worth), then
#        --verify-exact B = 16 / 64 and the B = 64 per-op profile. bulk4 (.gpu/bulk4.xz) = main with
#        kBulkRing from 2,048-byte tiles (Q4_0 / Q4_K rings in bulk copies, with the evict_first
#        policy; its decode logits must equal main's too).
#   then the QUICK GPU suite: tar xJf .gpu/fx.tar.xz && mkdir -p /tmp/g && tar xJf .gpu/bundle.tar.xz
#        -C /tmp/g && LD_LIBRARY_PATH=/tmp/g/lib BUILD=/tmp/g/bin QUICK=1 scripts/gpu-check.sh tests
# carry [".gpu/lib.tar.xz", ".gpu/main.xz", ".gpu/main0.xz", ".gpu/bulk4.xz"] (bundle + all four: over 64 MiB)
set -u
# The four do not fit the 64 MiB carry beside the tree (32 MiB): a binary left out is skipped.
# Without the bundle (its memra_tests is 10 MiB): .gpu/lib.tar.xz + .gpu/main.xz (main's memra alone).
mkdir -p /tmp/g/bin /tmp/o
if [ -f .gpu/bundle.tar.xz ]; then tar xJf .gpu/bundle.tar.xz -C /tmp/g
else tar xJf .gpu/lib.tar.xz -C /tmp/g && xz -dc .gpu/main.xz > /tmp/g/bin/memra && chmod +x /tmp/g/bin/memra; fi
for b in main0 pf bulk4; do [ -f .gpu/$b.xz ] && xz -dc .gpu/$b.xz > /tmp/o/$b && chmod +x /tmp/o/$b; done
export LD_LIBRARY_PATH=/tmp/g/lib
N=/tmp/g/bin/memra O=/tmp/o/main0 P=/tmp/o/pf K=/tmp/o/bulk4 M=/tmp/9b-q4_0.gguf
row() { grep -E 'tg32|pp512' | cut -d'|' -f5,6,7 | tr '\n' ' '; echo; }
{
$N --version; nvidia-smi --query-gpu=name --format=csv,noheader
$N synth --arch qwen35 --shape 9b --type q4_0 -o $M >/dev/null 2>&1 || echo "synth failed"
for mode in decode prefill; do
  $N logits -m $M --device cuda --ids "$(seq -s, 100 400)" --mode $mode -o /tmp/l-n.bin 2>&1 | grep -v wrote
  $O logits -m $M --device cuda --ids "$(seq -s, 100 400)" --mode $mode -o /tmp/l-o.bin 2>&1 | grep -v wrote
  echo -n "logits $mode main vs main0: "; cmp /tmp/l-n.bin /tmp/l-o.bin && echo identical
done
[ -x $K ] && $K logits -m $M --device cuda --ids "$(seq -s, 100 400)" --mode decode -o /tmp/l-k.bin 2>&1 | grep -v wrote
$N logits -m $M --device cuda --ids "$(seq -s, 100 400)" --mode decode -o /tmp/l-n.bin 2>&1 | grep -v wrote
echo -n "logits decode main vs bulk4: "; cmp /tmp/l-n.bin /tmp/l-k.bin && echo identical
for r in 1 2; do
  for b in "main $N" "main0 $O" "pf $P" "bulk4 $K"; do
    set -- $b
    [ -x "$2" ] || continue
    echo -n "r$r $1: "; $2 bench -m $M --device cuda -p 512 -n 32 -b 1,16,64 -d 512 -r 2 2>/dev/null | row
  done
done
$N bench -m $M --device cuda -n 32 -b 16,64 -d 512 --verify-exact 2>&1 | grep -E 'verify-exact|error|differ'
MEMRA_CUDA_PROFILE=1 $N bench -m $M --device cuda -p 0 -n 16 -b 64 -d 512 -r 1 --ctx 8192 2>&1 |
  grep -A40 cuda-profile > $OUT/profile-b64.txt
} 2>&1 | tee $OUT/revert-check.log
