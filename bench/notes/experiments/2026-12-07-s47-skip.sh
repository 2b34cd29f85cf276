#!/usr/bin/env bash
# Session 47: each op's marginal cost in the graph-mode decode step. The experiment build
# (2026-12-07-s47-experiment-build.patch, on ab90339: MEMRA_EXP_SKIP=op,... leaves those launches out; wrong results, the
# step's time without them) against itself with nothing skipped. Carry .gpu/X.xz + .gpu/lib.tar.xz.
set -u
mkdir -p /tmp/g/bin && tar xJf .gpu/lib.tar.xz -C /tmp/g && xz -dc .gpu/X.xz > /tmp/g/bin/X && chmod +x /tmp/g/bin/X
export LD_LIBRARY_PATH=/tmp/g/lib
X=/tmp/g/bin/X
rows() { grep -E '^\| [^-]' | grep -v '| model |' | cut -d'|' -f5-8; }
{
nvidia-smi --query-gpu=name --format=csv,noheader
f9=/tmp/9b.gguf; f35=/tmp/memra-gpu/qwen35moe-35b-a3b-q4_0.gguf
[ -f $f9 ] || $X synth --arch qwen35 --shape 9b --type q4_0 -o $f9 > /dev/null 2>&1
case "${1:-a}" in
b) ;;
a)
for skip in "" act act4096 actffn norm conv gdn rope attn ""; do
  echo "9B skip=[$skip]"
  MEMRA_EXP_SKIP=$skip timeout 60 $X bench -m $f9 --device cuda -p 0 -n 64 -b 1,16 -d 512 -r 3 --ctx 2048 2>/dev/null | rows
done
[ -f $f35 ] || $X synth --arch qwen35moe --shape 35b-a3b --type q4_0 -o $f35 > /dev/null 2>&1
for skip in "" act act4096 actffn norm combine router conv gdn rope attn ""; do
  echo "35B skip=[$skip]"
  MEMRA_EXP_SKIP=$skip timeout 60 $X bench -m $f35 --device cuda -p 0 -n 64 -b 1,64 -d 512 -r 3 --ctx 2048 2>/dev/null | rows
done
;;
esac
} 2>&1 | tee $OUT/s47-skip-${1:-a}.log
# Phase b (the matmuls too; the patch's second half): bash ...-s47-skip.sh b
if [ "${1:-a}" = b ]; then
{
f9=/tmp/9b.gguf; f35=/tmp/memra-gpu/qwen35moe-35b-a3b-q4_0.gguf
mkdir -p /tmp/memra-gpu
[ -f $f9 ] || $X synth --arch qwen35 --shape 9b --type q4_0 -o $f9 > /dev/null 2>&1
for skip in "" ssm_out attn_output ffn_down swiglu attn_qkv attn_q. head gdn norm ""; do
  echo "9B skip=[$skip]"
  MEMRA_EXP_SKIP=$skip timeout 60 $X bench -m $f9 --device cuda -p 0 -n 64 -b 1,16 -d 512 -r 3 --ctx 2048 2>/dev/null | rows
done
[ -f $f35 ] || $X synth --arch qwen35moe --shape 35b-a3b --type q4_0 -o $f35 > /dev/null 2>&1
for skip in "" moe_gate_up moe_down ssm_out attn_qkv head ""; do
  echo "35B skip=[$skip]"
  MEMRA_EXP_SKIP=$skip timeout 60 $X bench -m $f35 --device cuda -p 0 -n 64 -b 1 -d 512 -r 3 --ctx 2048 2>/dev/null | rows
done
} 2>&1 | tee $OUT/s47-skip-b.log
fi
