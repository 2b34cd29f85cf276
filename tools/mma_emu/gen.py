# Turns k_matmul_mma.cu into host code for the fiber emulator (emu.cpp): PTX wrappers become
# emu:: calls, the launchers are dropped. SRC overrides the kernel source (mutation checks).
import re, sys
import os
here = os.path.dirname(os.path.abspath(__file__))
src = open(os.environ.get('SRC', os.path.join(here, '../../src/backend/cuda/k_matmul_mma.cu'))).read()
src = src.replace('#include <cooperative_groups.h>\n', '')
src = src.replace('namespace cg = cooperative_groups;\n', '')
cut = src.index('int sm_count() {')
src = src[:cut] + '}  // namespace\n}  // namespace memra::cuda\n'
def replace_fn(name, body):
    global src
    m = re.search(r'(__device__ __forceinline__[^\n]*\b' + name + r'\([^{]*\{)', src)
    assert m, name
    start = m.end()
    # find matching closing brace
    depth = 1; i = start
    while depth:
        if src[i] == '{': depth += 1
        elif src[i] == '}': depth -= 1
        i += 1
    src = src[:start] + body + '}' + src[i:]
replace_fn('smem_addr', ' return emu::smem_addr(p); ')
replace_fn('cp_async16', ' emu::cp_async(dst, src, 16); ')
replace_fn('cp_async_ca', ' emu::cp_async(dst, src, N); ')
replace_fn('cp_async_commit', ' emu::cp_commit(); ')
replace_fn('cp_async_wait', ' emu::cp_wait(N); ')
replace_fn('ldsm_x4', ' emu::ldsm_x4(addr, r0, r1, r2, r3); ')
replace_fn('mma_k32', ' emu::mma(d, a[0], a[1], a[2], a[3], b0, b1, 32); ')
replace_fn('mma_k16', ' emu::mma(d, a0, a1, 0, 0, b0, 0, 16); ')
src = src.replace('extern __shared__ __align__(128) uint8_t smem[];', 'uint8_t* smem = emu::smem();')
src = src.replace('__launch_bounds__(kThreads, 1)', '')
src = src.replace('__global__ ', '')
open(sys.argv[1], 'w').write(src)
