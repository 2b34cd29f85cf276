#!/usr/bin/env python3
"""Decode goldens of tests/quant_golden_test.cpp from an independent decoder (gguf-py's
gguf.quants.dequantize: `pip install gguf==0.19.0 numpy`), for the types named on the command
line, in the test's kDecodeGolden order and with its input rule (that file's header):

    python3 scripts/quant_goldens.py q4_0:8 iq4_nl:8 iq4_xs:8 --first-index 2

prints one C++ table row per type. --first-index is the kDecodeGolden index of the first type
named (it seeds the generator); the following ones take the next indices. Rows already in the
table must come out unchanged: that is how the generator here is checked against the test's."""
import argparse
import math
import struct

import numpy as np
import gguf
from gguf.quants import dequantize

MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


# Byte offsets of the f16 scale fields in one block (the test's f16_fields).
F16_FIELDS = {
    "q4_0": [0], "q5_0": [0], "q8_0": [0], "q4_1": [0, 2], "q5_1": [0, 2], "q4_k": [0, 2], "q5_k": [0, 2],
    "q2_k": [80, 82], "q3_k": [108], "q6_k": [208], "iq4_nl": [0], "iq4_xs": [0],
}
CPP_NAME = {"iq4_nl": "IQ4_NL", "iq4_xs": "IQ4_XS"}


def fnv1a(data):
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & MASK
    return h


def golden(name, n_blocks, index):
    qtype = gguf.GGMLQuantizationType[name.upper()]
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    rng = SplitMix64(1000 + index)
    raw = bytearray()
    n_bytes = n_blocks * block_bytes
    while len(raw) < n_bytes:
        raw += struct.pack("<Q", rng.next())
    del raw[n_bytes:]
    for b in range(n_blocks):
        for off in F16_FIELDS.get(name, []):
            r = rng.next()
            h = (r & 0x8000) | (0x2C00 + (r >> 16) % 0x1000)
            raw[b * block_bytes + off:b * block_bytes + off + 2] = struct.pack("<H", h)
    y = dequantize(np.frombuffer(bytes(raw), dtype=np.uint8), qtype).astype(np.float32).reshape(-1)
    assert y.size == n_blocks * block_elems
    s = 0.0
    for v in y:  # sequential float64 sum, as the test does
        s += float(v)
    return fnv1a(y.tobytes()), s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("types", nargs="+", help="TYPE:N_BLOCKS")
    ap.add_argument("--first-index", type=int, required=True)
    args = ap.parse_args()
    for i, spec in enumerate(args.types):
        name, n = spec.split(":")
        h, s = golden(name, int(n), args.first_index + i)
        cpp = CPP_NAME.get(name, name.upper())
        sum_text = "NAN" if math.isnan(s) else repr(s)
        print(f"    {{GgmlType::{cpp}, {n}, 0x{h:016x}ull, {sum_text}}},")


if __name__ == "__main__":
    main()
