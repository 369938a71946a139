"""Autograd's own cost: a chain of tiny ops, with and without requires_grad.

For eagervm and PyTorch (same ops, same 16-element float32 tensors), the
time per op of:
  forward, no grad    the chain on tensors that do not require grad
  forward, recording  the same chain with the input requiring grad
  forward + backward  recording, then backward through the chain (per forward op)
The recording overhead is the second minus the first (target: <= 150 ns per op
for eagervm); with PyTorch there, the ratio of the two overheads too. Rounds alternate between the libraries; medians are printed, of
the wall time and of the issuing thread's CPU time (which counts what
recording costs the thread that issues, and which other processes on the
machine disturb less). Both include dropping the chain (freeing its graph).
--evict-mb N writes N MB between rounds, so that each round starts with the
caches holding other work, as on a shared machine (32 or more evicts this
machine's last-level cache; the default 0 leaves them as the rounds left them).

    PYTHONPATH=python /usr/bin/python3 bench/autograd_overhead.py [--ops 2000] [--rounds 15] [--evict-mb 0]
"""
import argparse
import statistics
import time

import eagervm as ev

try:
    import torch
except ImportError:  # the comparison is printed only when PyTorch is there
    torch = None


def chain(x, w, n):
    # Three kinds of op: a binary op with a tensor, a unary op, a scalar op.
    y = x
    for _ in range(n // 3):
        y = y * w
        y = y.tanh()
        y = y + 1.0
    return y


def measure(lib, n, mode):
    if lib == "ev":
        x = ev.rand(16, requires_grad=(mode != "plain"))
        w = ev.rand(16)
        sync = ev.synchronize
    else:
        x = torch.rand(16, requires_grad=(mode != "plain"))
        w = torch.rand(16)
        sync = lambda: None  # noqa: E731  PyTorch's CPU ops are synchronous
    sync()
    t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
    y = chain(x, w, n)
    if mode == "backward":
        y.sum().backward()
    del y
    sync()
    ops = n // 3 * 3
    return (time.perf_counter_ns() - t0) / ops, (time.thread_time_ns() - c0) / ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--evict-mb", type=int, default=0)
    args = ap.parse_args()
    if args.ops < 3 or args.rounds < 1 or args.evict_mb < 0:
        ap.error("--ops must be at least 3, --rounds at least 1, --evict-mb at least 0")
    # Written through a memoryview: `junk[:] = fill` on the bytearray
    # itself made a temporary copy, faulting in (and unmapping) a fresh
    # buffer every round, 12,289 page faults for 48 MB.
    junk = memoryview(bytearray(args.evict_mb << 20))
    fill = bytes(len(junk))
    libs = ["ev"] + (["torch"] if torch is not None else [])
    if torch is not None:
        torch.set_num_threads(1)
    modes = ["plain", "record", "backward"]
    times = {(lib, m): [] for lib in libs for m in modes}
    cpu = {(lib, m): [] for lib in libs for m in modes}
    for lib in libs:  # warm up
        for m in modes:
            measure(lib, args.ops, m)
    for _ in range(args.rounds):
        for m in modes:
            for lib in libs:
                junk[:] = fill  # a memcpy into the buffer (nothing when 0)
                wall, thread = measure(lib, args.ops, m)
                times[(lib, m)].append(wall)
                cpu[(lib, m)].append(thread)
    for label, table in (("wall time", times), ("issuing thread's CPU time", cpu)):
        report(label, table, libs, modes, args)


def report(label, table, libs, modes, args):
    med = {k: statistics.median(v) for k, v in table.items()}
    evicted = f", {args.evict_mb} MB written between rounds" if args.evict_mb else ""
    print(f"chain of {args.ops} tiny ops (16 float32 elements), {args.rounds} rounds{evicted}, "
          f"medians of the {label}, ns per op")
    header = f"{'':24}" + "".join(f"{lib:>12}" for lib in libs)
    print(header)
    names = {"plain": "forward, no grad", "record": "forward, recording",
             "backward": "forward + backward"}
    for m in modes:
        print(f"{names[m]:24}" + "".join(f"{med[(lib, m)]:12.0f}" for lib in libs))
    print(f"{'recording overhead':24}" +
          "".join(f"{med[(lib, 'record')] - med[(lib, 'plain')]:12.0f}" for lib in libs))
    if torch is not None:
        for m in modes:
            print(f"eagervm / PyTorch time, {names[m]}: "
                  f"{med[('ev', m)] / med[('torch', m)]:.2f}x")
        # This host's load moves both overheads together (a busy phase
        # doubled PyTorch's as well as ours): the ratio reads the phase less.
        over = {lib: med[(lib, 'record')] - med[(lib, 'plain')] for lib in libs}
        if over["torch"] > 0:
            print(f"eagervm / PyTorch recording overhead: {over['ev'] / over['torch']:.2f}x")
    print(f"eagervm recording overhead ({label}): "
          f"{med[('ev', 'record')] - med[('ev', 'plain')]:.0f} ns per op (target <= 150)\n")


if __name__ == "__main__":
    main()
