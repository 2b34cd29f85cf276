#!/usr/bin/env python3
# Usage: python3 2026-12-05-offset-truncation-model.py [GUARD_BITS]   (numpy; ~1 min)
# Pessimistic model of the tensor core's float accumulation (products exact, aligned to the largest
# term's exponent and truncated toward zero to 24+g bits, exact sum, result truncated to float32):
# accumulation error of the old (q - 8) order and the new offset order, relative to the op tests'
# bound 2^-10 * sum |w x'|.
import numpy as np, math, sys
rng = np.random.default_rng(1)
G = int(sys.argv[1]) if len(sys.argv) > 1 else 0

def trunc_to(v, q):  # toward zero to a multiple of q
    return math.trunc(v / q) * q
def f32_rz(v):
    if v == 0: return 0.0
    m, e = math.frexp(v)
    return math.trunc(m * 2**24) / 2**24 * 2.0**e
def f32_rn(v): return float(np.float32(v))
def mma(c, a, b):
    terms = [c] + [float(x) * float(y) for x, y in zip(a, b)]
    nz = [abs(t) for t in terms if t != 0]
    if not nz: return 0.0
    emax = max(math.frexp(t)[1] for t in nz)
    q = 2.0 ** (emax - 24 - G)
    return f32_rz(sum(trunc_to(t, q) for t in terms))
def fma(a, b, c): return f32_rn(a * b + c)
def f16(v): return np.float16(v).astype(np.float64)

def row(q, d, x, order):
    acc = 0.0
    n_kt = len(x) // 256
    for kt in range(n_kt):
        vs = []
        for b in range(8):
            k0 = kt * 256 + 32 * b
            qq = q[k0:k0 + 32]; xx = x[k0:k0 + 32]
            if order == 'old':
                c = qq - 8.0
            else:
                off = np.array([1024.0 if (l % 16) < 8 else 64.0 for l in range(32)])
                c = qq + off
            D = mma(mma(0.0, c[:16], xx[:16]), c[16:], xx[16:])
            acc = fma(d[kt * 8 + b], D, acc)
            if order == 'new':
                E = sum(xx[l] for l in range(32) if l % 16 < 8); O = sum(xx[l] for l in range(32) if l % 16 >= 8)
                v = f32_rn(1032.0 * E + f32_rn(72.0 * O))
                hi = f16(v * 2**-14); lo = f16(v * 2**-14 - hi)
                vs.append((hi, lo))
        if order == 'new':
            A = []; Bv = []
            for b in range(8): A += [d[kt * 8 + b]]; Bv += [vs[b][0]]
            for b in range(8): A += [d[kt * 8 + b]]; Bv += [vs[b][1]]
            M = mma(0.0, A, Bv)
            acc = fma(-16384.0, M, acc)
    return acc

K = 2048
for name, gen in [('N(0,1)', lambda: rng.standard_normal(K)),
                  ('|N| same sign', lambda: np.abs(rng.standard_normal(K))),
                  ('outliers', lambda: rng.standard_normal(K) * np.where(rng.random(K) < 0.01, 50, 1)),
                  ('same sign + outliers', lambda: np.abs(rng.standard_normal(K)) * np.where(rng.random(K) < 0.01, 50, 1))]:
    worst = {'old': 0, 'new': 0}
    for trial in range(6):
        x = gen(); x = x / np.abs(x).max() * 2**14.5
        x = f16(x)
        q = rng.integers(0, 16, K).astype(np.float64)
        d = f16(rng.uniform(0.005, 0.02, K // 32))
        exact = sum(d[i // 32] * (q[i] - 8) * x[i] for i in range(K))
        bound = 2**-10 * sum(abs(d[i // 32] * (q[i] - 8) * x[i]) for i in range(K))
        for o in ('old', 'new'):
            worst[o] = max(worst[o], abs(row(q, d, x, o) - exact) / bound)
    print(f"G={G} {name:22s} accumulation error / bound: old {worst['old']:.2e}  new {worst['new']:.2e}")
