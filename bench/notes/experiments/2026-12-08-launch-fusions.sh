#!/usr/bin/env bash
# Ran (part 1) on the H200 in session 27: bench/results/2026-12-05-0155-h200-s27-launch-fusions-1.log.
# The conv inside the core measured slower at every B and was deleted (its patch:
# 2026-12-05-gdn-conv-in-core.patch), so N0 below now means N (the knob is gone).
# Device-call script for session 27's launch fusions (all the same bits by construction):
#   db15c15 the Gated DeltaNet decode core runs the short conv itself (MEMRA_CUDA_GDN_CONV, default 1;
#           0 = the separate conv launch, so one binary measures both),
#   ff86d37 + the next commit: Backend::attention_block, the norm + rope launch appending k / v to
#           the cache, the attention merge applying the output gate (no knob: against s26).
# Binaries: N = main (.gpu/bundle.tar.xz), S = session 26's main f7f3d77 (.gpu/s26.xz), O = c5f4d6a,
# the last main measured on the H200 (.gpu/old.xz). Carry all three (~33 MB).
# Part 1 (~5 min): 9B Q4_0 logits N vs S vs N with the conv apart (identical expected), then
# tg32 @ d512 at B = 1 / 16 / 64 and pp512 for O, S, N, N0 (= N, MEMRA_CUDA_GDN_CONV=0), two rounds,
# then N's --verify-exact at B = 4 / 16 / 64, N's per-op profile at B = 1, and the launch-chain
# probe (bench/probes/launch_chain.cu: us a kernel boundary by grid size and PDL mode).
# Part 2 (~5 min): the GPU tests of the fused pieces, 2B Q4_0 tg128 S / N / N0, 35B-A3B Q4_0 (30 GDN
# and 10 attention layers) tg32 B = 1 / 16 S / N, N's --verify-exact there.
set -u
PART=${1:-1}
mkdir -p /tmp/g /tmp/o /tmp/gt && tar xJf .gpu/bundle.tar.xz -C /tmp/g
xz -dc .gpu/s26.xz > /tmp/o/s26 && xz -dc .gpu/old.xz > /tmp/o/old && chmod +x /tmp/o/s26 /tmp/o/old
export LD_LIBRARY_PATH=/tmp/g/lib MEMRA_GPU_TEST_DIR=/tmp/gt
N=/tmp/g/bin/memra S=/tmp/o/s26 O=/tmp/o/old
run() {  # NAME ARGS...: one of the binaries (N0: main with the conv as its own launch)
  local b=$1
  shift
  case $b in
    N) $N "$@" ;; S) $S "$@" ;; O) $O "$@" ;; N0) MEMRA_CUDA_GDN_CONV=0 $N "$@" ;;
  esac
}
row() { grep -E 'tg32|tg128|pp512' | cut -d'|' -f5,6,7 | tr '\n' ' '; echo; }
{
$N --version; $S --version; $O --version
IDS=$(seq -s, 100 140)
if [ "$PART" = 1 ]; then
  $N synth --arch qwen35 --shape 9b --type q4_0 -o /tmp/9b.gguf >/dev/null 2>&1
  for m in decode prefill; do
    for b in N S N0; do run $b logits -m /tmp/9b.gguf --device cuda --ids $IDS --mode $m -o /tmp/l-$m-$b.bin 2>/dev/null; done
    echo -n "logits 9b q4_0 $m N vs S: "; cmp /tmp/l-$m-N.bin /tmp/l-$m-S.bin && echo identical
    echo -n "logits 9b q4_0 $m N vs N0: "; cmp /tmp/l-$m-N.bin /tmp/l-$m-N0.bin && echo identical
  done
  for r in 1 2; do for b in O S N N0; do
    echo -n "r$r 9b q4_0 $b: "; run $b bench -m /tmp/9b.gguf --device cuda -p 512 -n 32 -b 1,16,64 -d 512 -r 2 --ctx 8192 2>/dev/null | row
  done; done
  $N bench -m /tmp/9b.gguf --device cuda -p 0 -n 32 -b 4,16,64 -d 512 -r 1 --ctx 8192 --verify-exact 2>&1 | grep -E 'differ|tg32' | cut -c1-170
  MEMRA_CUDA_PROFILE=1 $N bench -m /tmp/9b.gguf --device cuda -p 0 -n 32 -b 1 -d 512 -r 1 --ctx 8192 2>&1 | grep -A40 cuda-profile > $OUT/profile-b1-s27.txt
  head -30 $OUT/profile-b1-s27.txt
  # What one kernel boundary costs in a replayed graph (bench/probes/launch_chain.cu), ~20 s.
  nvcc -O3 -arch=sm_90 -std=c++17 bench/probes/launch_chain.cu -o /tmp/launch_chain && /tmp/launch_chain | tee $OUT/launch-chain.txt
else
  $N synth --arch qwen35 --shape 2b --type q4_0 -o /tmp/2b.gguf >/dev/null 2>&1
  for b in S N S N; do echo -n "2b q4_0 $b: "; run $b bench -m /tmp/2b.gguf --device cuda -p 512 -n 128 -r 2 2>/dev/null | row; done
  $N synth --arch qwen35moe --shape 35b-a3b --type q4_0 -o /tmp/35b.gguf >/dev/null 2>&1
  for b in S N S N; do echo -n "35b-a3b q4_0 $b: "; run $b bench -m /tmp/35b.gguf --device cuda -p 0 -n 32 -b 1,16 -d 512 -r 2 --ctx 8192 2>/dev/null | row; done
  $N bench -m /tmp/35b.gguf --device cuda -p 0 -n 32 -b 16 -d 512 -r 1 --ctx 8192 --verify-exact 2>&1 | grep -E 'differ|tg32' | cut -c1-170
fi
} 2>&1 | tee $OUT/launch-fusions-$PART.log
