"""Autograd's own cost: a chain of tiny ops, with and without requires_grad.

For eagervm and PyTorch (same ops, same 16-element float32 tensors), the
time per op of:
  forward, no grad    the chain on tensors that do not require grad
  forward, recording  the same chain with the input requiring grad
  forward + backward  recording, then backward through the chain (per forward op)
The recording overhead is the second minus the first (target: <= 150 ns per op
for eagervm). Rounds alternate between the libraries; medians are printed.

    PYTHONPATH=python /usr/bin/python3 bench/autograd_overhead.py [--ops 2000] [--rounds 15]
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
    t0 = time.perf_counter_ns()
    y = chain(x, w, n)
    if mode == "backward":
        y.sum().backward()
    sync()
    return (time.perf_counter_ns() - t0) / (n // 3 * 3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    libs = ["ev"] + (["torch"] if torch is not None else [])
    if torch is not None:
        torch.set_num_threads(1)
    modes = ["plain", "record", "backward"]
    times = {(lib, m): [] for lib in libs for m in modes}
    for lib in libs:  # warm up
        for m in modes:
            measure(lib, args.ops, m)
    for _ in range(args.rounds):
        for m in modes:
            for lib in libs:
                times[(lib, m)].append(measure(lib, args.ops, m))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"chain of {args.ops} tiny ops (16 float32 elements), {args.rounds} rounds, medians, "
          f"ns per op")
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
    print(f"eagervm recording overhead: {med[('ev', 'record')] - med[('ev', 'plain')]:.0f} ns "
          f"per op (target <= 150)")


if __name__ == "__main__":
    main()
