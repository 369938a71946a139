#!/usr/bin/env python3
"""The Fashion-MNIST MLP (784-256-10, ReLU, softmax cross-entropy, SGD with
momentum 0.9, cosine learning rate) trained with eagervm
(examples/fashion_mnist.py: hand-written gradients, input pipeline on its own
worker) and with PyTorch on the CPU (its autograd and torch.optim.SGD, the
same normalisation, shuffle and random flip done with torch ops, as a user
would write it): same initial weights, batch size and steps. Prints samples/s
for both, the ratio and both test accuracies.

    python3 bench/mlp_vs_torch.py [--epochs 1] [--batch-size 128]

That comparison is not the same work (PyTorch's side pays for autograd and
its optimizer, eagervm's uses hand-written gradients). --same-math is: the
main job's training step (MLP.step of examples/fashion_mnist.py: forward,
loss, the hand-written gradients, SGD with momentum) against the same ops
in PyTorch without autograd, on the same prepared batches and initial
weights, PyTorch on 1 and on all threads; rounds alternate, the medians of
steps/s are compared, and the weights after the run are compared.

    python3 bench/mlp_vs_torch.py --same-math [--steps 200] [--rounds 5]

PyTorch comes from Debian's python3-torch; without it only eagervm runs.
"""
import argparse
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import eagervm as ev  # noqa: E402  (first: it tunes OpenBLAS before NumPy loads it)
import numpy as np  # noqa: E402
import fashion_mnist as fm  # noqa: E402
from eagervm.datasets import mnist  # noqa: E402


def run_eagervm(train, test, args):
    t0 = time.perf_counter()
    model, hist, _ = fm.train(train[0], train[1], args.epochs, args.batch_size, args.lr,
                              args.momentum, args.seed, progress=False)
    secs = sum(h["seconds"] for h in hist)
    n = sum(h["samples_per_s"] * h["seconds"] for h in hist)
    acc = model.accuracy(*test)
    return n / secs, acc, model, time.perf_counter() - t0


def run_torch(train, test, init, args):
    import torch
    torch.manual_seed(args.seed)
    torch.set_num_threads(os.cpu_count() or 1)
    x_all = torch.from_numpy(train[0].numpy())
    y_all = torch.from_numpy(train[1].numpy())
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    with torch.no_grad():  # the same initial weights as eagervm's run
        model[0].weight.copy_(torch.from_numpy(init[0].T.astype(np.float32)))
        model[0].bias.copy_(torch.from_numpy(init[1].astype(np.float32)))
        model[2].weight.copy_(torch.from_numpy(init[2].T.astype(np.float32)))
        model[2].bias.copy_(torch.from_numpy(init[3].astype(np.float32)))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    n, b = x_all.shape[0], args.batch_size
    batches = n // b
    steps = args.epochs * batches
    loss_fn = torch.nn.CrossEntropyLoss()
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        order = torch.randperm(n)
        for k in range(batches):
            idx = order[k * b:(k + 1) * b]
            x = x_all[idx] * (1 / (255 * fm.STD)) - fm.MEAN / fm.STD
            flip = torch.rand(b) < 0.5
            x = x.view(b, 28, 28)
            x = torch.where(flip.view(b, 1, 1), x.flip(2), x).reshape(b, 784)
            for g in opt.param_groups:
                g["lr"] = args.lr * 0.5 * (1 + math.cos(math.pi * (epoch * batches + k) / steps))
            opt.zero_grad()
            loss = loss_fn(model(x), y_all[idx])
            loss.backward()
            opt.step()
    secs = time.perf_counter() - t0
    with torch.no_grad():
        xt = torch.from_numpy(test[0].numpy()) * (1 / (255 * fm.STD)) - fm.MEAN / fm.STD
        acc = (model(xt).argmax(1) == torch.from_numpy(test[1].numpy())).float().mean().item()
    return batches * b * args.epochs / secs, acc


class TorchMLP:
    """MLP.step's math in PyTorch ops, no autograd: the same forward, loss,
    gradients and update, op for op."""

    def __init__(self, init, lr, momentum):
        import torch
        self.torch = torch
        self.lr, self.momentum = lr, momentum
        self.params = [torch.from_numpy(a.astype(np.float32)) for a in init]
        self.velocity = [torch.zeros_like(p) for p in self.params]

    def step(self, x, y, target):
        torch = self.torch
        w1, b1, w2, b2 = self.params
        inv_b = 1.0 / x.shape[0]
        h = torch.relu(x @ w1 + b1)
        logits = h @ w2 + b2
        loss = torch.nn.functional.cross_entropy(logits, target)
        logp = torch.log_softmax(logits, dim=1)
        dlogits = (torch.exp(logp) - y) * inv_b
        grads = [None, None, h.T @ dlogits, dlogits.sum(0)]
        dh = (dlogits @ w2.T) * (h > 0)
        grads[0] = x.T @ dh
        grads[1] = dh.sum(0)
        for p, g, v in zip(self.params, grads, self.velocity):
            v.mul_(self.momentum).add_(g)
            p.sub_(v * self.lr)
        return loss


def openblas():
    """The process's OpenBLAS (PyTorch's matmuls and eagervm's run on the one
    library), or None where it cannot be found."""
    import ctypes
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_num_threads.restype = ctypes.c_int
        lib.openblas_set_num_threads.argtypes = [ctypes.c_int]
        return lib
    except (OSError, AttributeError):
        return None


def same_math(train, args):
    """The training step alone, eagervm against PyTorch (1 and all
    threads), alternating rounds of args.steps steps; prints steps/s."""
    import statistics
    import torch
    b, steps = args.batch_size, args.steps
    rng = np.random.default_rng(args.seed)
    images = train[0].numpy().astype(np.float32)
    labels = train[1].numpy().astype(np.int64)
    idx = rng.permutation(images.shape[0])[:steps * b].reshape(steps, b)
    xs = [(images[i] * (1 / (255 * fm.STD)) - fm.MEAN / fm.STD).astype(np.float32)
          for i in idx]
    ts = [labels[i] for i in idx]
    ys = [np.eye(fm.CLASSES, dtype=np.float32)[t] for t in ts]
    ev_batches = [(ev.from_numpy(x), ev.from_numpy(y), ev.from_numpy(t))
                  for x, y, t in zip(xs, ys, ts)]
    t_batches = [(torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(t))
                 for x, y, t in zip(xs, ys, ts)]
    init_rng = np.random.default_rng(args.seed)
    ev_model = fm.MLP(init_rng, lr=args.lr, momentum=args.momentum)
    cores = os.cpu_count() or 1
    sides = {"eagervm": None, "torch 1 thread": 1, f"torch {cores} threads": cores}
    models = {name: ev_model if threads is None else
              TorchMLP(ev_model.init, args.lr, args.momentum) for name, threads in sides.items()}
    rates = {name: [] for name in sides}
    # torch.set_num_threads does not reach OpenBLAS, which PyTorch's matmuls
    # share with eagervm's: PyTorch's rounds run it on every core (its
    # default in a PyTorch-only process), not on what eagervm's last matmul
    # left; eagervm's setting is put back after them (it skips setting a
    # count it believes is already set).
    blas = openblas()
    ev.synchronize()
    for _ in range(args.rounds):
        for name, threads in sides.items():
            model = models[name]
            if threads is None:
                t0 = time.perf_counter()
                for x, y, t in ev_batches:
                    model.step(x, y, t)
                ev.synchronize()
                elapsed = time.perf_counter() - t0
            else:
                torch.set_num_threads(threads)
                prev = blas.openblas_get_num_threads() if blas else None
                if blas:
                    blas.openblas_set_num_threads(cores)
                t0 = time.perf_counter()
                for x, y, t in t_batches:
                    model.step(x, y, t)
                elapsed = time.perf_counter() - t0
                if blas:
                    blas.openblas_set_num_threads(prev)
            rates[name].append(steps / elapsed)
    print(f"the training step alone (batch {b}, {steps} steps per round, {args.rounds} "
          f"rounds alternating; PyTorch {torch.__version__} without autograd, its matmuls on "
          f"{'OpenBLAS with ' + str(cores) + ' threads' if blas else 'its BLAS'})")
    med = {name: statistics.median(r) for name, r in rates.items()}
    for name, m in med.items():
        print(f"  {name:<16} {m:>9,.0f} steps/s  {m * b:>11,.0f} samples/s")
    best_torch = max(m for name, m in med.items() if name != "eagervm")
    print(f"eagervm / faster PyTorch setting: {med['eagervm'] / best_torch:.2f}x")
    # The same math: from the same weights, ten steps on both sides agree
    # to rounding (longer runs drift apart: training amplifies rounding).
    check_ev = fm.MLP(np.random.default_rng(args.seed), lr=args.lr, momentum=args.momentum)
    check_t = TorchMLP(check_ev.init, args.lr, args.momentum)
    for (x, y, t), (tx, ty, tt) in list(zip(ev_batches, t_batches))[:10]:
        check_ev.step(x, y, t)
        check_t.step(tx, ty, tt)
    diff = max(float(np.max(np.abs(check_ev.params[k].numpy() - check_t.params[k].numpy())))
               for k in range(4))
    print(f"largest weight difference after 10 steps from the same weights: {diff:.1e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--same-math", action="store_true",
                    help="the training step alone, the same ops on both sides")
    ap.add_argument("--steps", type=int, default=200, help="--same-math: steps per round")
    ap.add_argument("--rounds", type=int, default=5, help="--same-math: alternating rounds")
    args = ap.parse_args()
    if args.steps < 1 or args.rounds < 1 or args.batch_size < 1:
        ap.error("--steps, --rounds and --batch-size must be positive")
    train = mnist.load_fashion_mnist("train")
    if args.same_math:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("torch not installed (apt-get install python3-torch): nothing to compare")
            return
        same_math(train, args)
        return
    test = mnist.load_fashion_mnist("test")
    steps = args.epochs * (train[0].shape[0] // args.batch_size)
    print(f"784-256-10 MLP, batch {args.batch_size}, {args.epochs} epoch(s) = {steps} steps, "
          f"{os.cpu_count()} cores")
    ev_rate, ev_acc, model, _ = run_eagervm(train, test, args)
    print(f"{'eagervm':<8} {ev_rate:>10,.0f} samples/s   test accuracy {ev_acc:.4f}")
    try:
        import torch
    except ImportError:
        print("torch    not installed (apt-get install python3-torch): skipped")
        return
    th_rate, th_acc = run_torch(train, test, model.init, args)
    print(f"{'torch':<8} {th_rate:>10,.0f} samples/s   test accuracy {th_acc:.4f}   "
          f"(PyTorch {torch.__version__}, {torch.get_num_threads()} threads)")
    print(f"eagervm / torch: {ev_rate / th_rate:.2f}x samples/s")


if __name__ == "__main__":
    main()
