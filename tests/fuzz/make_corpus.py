#!/usr/bin/python3
"""Writes the seed corpus of tests/fuzz/fuzz_api.c into tests/fuzz/corpus/.

Deterministic (fixed seeds), so running it again rewrites the same files.
Each seed starts by creating a few tensors in well-formed steps (so the
fuzzer begins from programs that have data to work on), then a run of steps
whose opcodes walk the whole table (creation, views, ops, index ops, waits,
thread uids, submits, fault injection) with small argument bytes, which the
harness decodes into mostly valid calls. Usage: make_corpus.py [OUTDIR]
"""
import os
import random
import sys

N_SEEDS = 48
N_OPCODES = 16  # step() in fuzz_api.c switches on op % 16
# Seeds from 40 on create tensors of the narrow integer dtypes (uint8, int8,
# int16: dtype bytes 5, 6 and 7, the harness taking them modulo
# EV_DTYPE_COUNT); seeds 0-39 are as they were before those dtypes existed.
FIRST_NARROW = 40


def create(rng, slot, narrow):
    """One create step: opcode 0, dtype, ndim, sizes, kind 0/1 (zeros/ones), slot."""
    nd = rng.randrange(0, 4)
    dt = rng.randrange(5)
    if narrow:
        dt = 5 + dt % 3
    return bytes([0, dt, nd] + [rng.randrange(1, 5) for _ in range(nd)]
                 + [rng.randrange(2), slot])


def seed(i):
    rng = random.Random(1000 + i)
    out = bytearray([i & 0xFF])  # generator seed
    for slot in range(rng.randrange(2, 6)):
        out += create(rng, slot, i >= FIRST_NARROW)
    focus = i % N_OPCODES
    for _ in range(rng.randrange(8, 40)):
        op = focus if rng.random() < 0.5 else rng.randrange(N_OPCODES)
        if op == 15 and i % 4 == 0:
            op |= 0x30  # fault injection (depth 0)
        elif op == 14 and rng.random() < 0.5:
            op |= 0x10  # object create/release instead of submit
        elif op in (8, 10) and rng.random() < 0.5:
            op |= 0x10  # any/all/logsumexp/scans; sorts/flip/roll/tril/nonzero/unique
        out.append(op)
        out += bytes(rng.randrange(0, 8) for _ in range(rng.randrange(4, 12)))
    # Waits at the end so that kernel failures surface at a sync point.
    out += bytes([12, 3, 12, 0, 0])
    return bytes(out)


def negative_steps():
    """A hand-written seed: slices with negative steps (x[::-1], x[..., 1::-1],
    x[:, 3:0:-2]) read back, an in-place add whose input overlaps its
    reversed output, and ops (mul, sum, matmul) on the reversed views."""
    ext_max, ext_min = 0xF1, 0xF0  # slice_arg's INT64_MAX and INT64_MIN
    steps = [
        [0, 3, 3, 3, 4, 2, 6, 1, 0],                   # slot 0: rand float32 [3, 4, 2]
        [0, 4, 2, 4, 4, 6, 1, 1],                      # slot 1: rand float64 [4, 4]
        [4, 0, 0, 0, ext_max, ext_min, 2, 1, 3],       # slot 3 = slot 0[::-1], read
        [4, 3, 0, 0xFF, 1, ext_min, 2, 1, 4],          # slot 4 = slot 3[..., 1::-1]
        [4, 1, 0, 1, 3, 0, 1, 0, 5],                   # slot 5 = slot 1[:, 3:0:-2]
        [4, 1, 0, 0, ext_max, ext_min, 2, 1, 6],       # slot 6 = slot 1[::-1]
        [6, 6, 1, 0, 0],                               # slot 6 += slot 1 (overlapping)
        [6, 3, 0, 2, 1, 7],                            # slot 7 = slot 3 * slot 0
        [8, 4, 0, 0, 1, 1, 1, 0, 8],                   # slot 8 = sum(slot 4, 1)
        [9, 6, 5, 9],                                  # slot 9 = slot 6 @ slot 5
        [12, 0, 6],                                    # to_host(slot 6)
    ]
    return bytes([7] + [b for s in steps for b in s] + [12, 3, 12, 0, 0])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus")
    os.makedirs(outdir, exist_ok=True)
    for i in range(N_SEEDS):
        with open(os.path.join(outdir, "seed-%02d" % i), "wb") as f:
            f.write(seed(i))
    with open(os.path.join(outdir, "seed-negative-steps"), "wb") as f:
        f.write(negative_steps())
    print("wrote %d seeds to %s" % (N_SEEDS + 1, outdir))


if __name__ == "__main__":
    main()
