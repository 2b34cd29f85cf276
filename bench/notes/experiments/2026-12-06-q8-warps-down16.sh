#!/usr/bin/env bash
# Prepared in session 32, not run yet. Two prefill block sizes on top of main (ec83790), in one
# binary (.gpu/next.xz, built from ec83790 + 2026-12-06-q8-warps-down16.patch; the bundle's lib/ is
# .gpu/lib.tar.xz). Both leave bits alone (a block size never changes them): the logits must match.
# - MEMRA_X_Q8_WARPS=9: Q8_0's (2, 8) shape in 9-warp blocks (384-thread instantiation: 168
#   registers, 8-10 local loads / stores in the k-loop; 9 warps' stages are 218 KB, 12 would not fit).
# - MEMRA_X_WIDE_DOWN=16: Q4_0's (2, 8) launches of 8 K segments (ffn_down) in 16-warp blocks
#   (512 threads, 128 registers, 15-16 spills in the loop): 512 blocks, 4 rounds of 132 SMs, instead of
#   704 blocks in 6 (5.33 of work) at 12 warps.
#   bash bench/notes/experiments/2026-12-06-q8-warps-down16.sh   carry [".gpu/lib.tar.xz", ".gpu/next.xz"]   (~2 min)
set -u
mkdir -p /tmp/g && tar xJf .gpu/lib.tar.xz -C /tmp/g && xz -dc .gpu/next.xz > /tmp/g/next && chmod +x /tmp/g/next
export LD_LIBRARY_PATH=/tmp/g/lib
X=/tmp/g/next
row() { grep -E 'tg|pp512' | cut -d'|' -f5,6,7 | tr '\n' ' '; echo; }
# same_logits MODEL KNOB=VALUE: prefill logits with and without the knob, compared with cmp.
same_logits() {
  $X logits -m $1 --device cuda --ids "$(seq -s, 100 400)" --mode prefill -o /tmp/a.bin 2>&1 | grep -v wrote
  env $2 $X logits -m $1 --device cuda --ids "$(seq -s, 100 400)" --mode prefill -o /tmp/b.bin 2>&1 | grep -v wrote
  echo -n "$1 prefill logits $2 vs main: "; cmp /tmp/a.bin /tmp/b.bin && echo identical
}
# pp_rounds MODEL KNOB V1 V2: pp512 alternating the knob's two values, two rounds.
pp_rounds() {
  for r in 1 2; do
    for v in $3 $4; do echo -n "r$r $1 $2=$v: "; env $2=$v $X bench -m $1 --device cuda -p 512 -n 0 -r 3 2>/dev/null | row; done
  done
}
{
$X --version; nvidia-smi --query-gpu=name --format=csv,noheader
M=/tmp/9b-q4_0.gguf
$X synth --arch qwen35 --shape 9b --type q4_0 -o $M >/dev/null 2>&1 || echo "synth failed"
same_logits $M MEMRA_X_WIDE_DOWN=16
pp_rounds $M MEMRA_X_WIDE_DOWN 0 16
for d in 0 16; do
  MEMRA_X_WIDE_DOWN=$d MEMRA_CUDA_PROFILE=1 $X bench -m $M --device cuda -p 512 -n 0 -r 1 2>&1 | grep -E "ffn_down|swiglu"
done
rm -f $M; M=/tmp/9b-q8_0.gguf
$X synth --arch qwen35 --shape 9b --type q8_0 -o $M >/dev/null 2>&1 || echo "q8 synth failed"
same_logits $M MEMRA_X_Q8_WARPS=9
pp_rounds $M MEMRA_X_Q8_WARPS 8 9
} 2>&1 | tee $OUT/q8-warps-down16.log
