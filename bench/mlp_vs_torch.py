#!/usr/bin/env python3
"""The main job's MLP (784-256-10, ReLU, softmax cross-entropy, SGD with
momentum 0.9 and a cosine learning rate) trained by eagervm and by PyTorch on
the CPU, both as users write them: nn.Sequential, CrossEntropyLoss, autograd
and the library's SGD (eagervm.nn / eagervm.optim: examples/fashion_mnist.py's
MLP; torch.nn / torch.optim). The same initial weights and the same prepared
batches on both sides; PyTorch on 1 and on all threads; rounds of --steps
steps alternate, the medians of steps/s are compared (target: eagervm >= 2x
the faster PyTorch setting), and each model's test accuracy after its steps
is printed (the same steps from the same weights: they should agree).

    python3 bench/mlp_vs_torch.py [--steps 200] [--rounds 5]

It runs under this interpreter (Debian's PyTorch) and again in the virtual
environment of scripts/bench_env.sh ($EAGERVM_BENCH_VENV or .venv-bench, the
newest PyTorch) when there is one; --here runs only this interpreter.

--same-math compares the training step with hand-written gradients (no
autograd, the same ops on both sides: forward, loss, the gradients, SGD),
PyTorch on 1 and on all threads, and the weights after ten steps.

    python3 bench/mlp_vs_torch.py --same-math [--steps 200] [--rounds 5]
"""
import argparse
import os
import subprocess
import sys
import time

# PyTorch's idle OpenMP threads would otherwise spin on the cores the next
# side's round needs (as in bench/ops.py); libgomp reads this when torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import eagervm as ev  # noqa: E402  (first: it tunes OpenBLAS before NumPy loads it)
import numpy as np  # noqa: E402
import fashion_mnist as fm  # noqa: E402
from eagervm.datasets import mnist  # noqa: E402


class HandMLP:
    """The step with hand-written gradients, in eagervm ops: forward, the
    loss value by eagervm.cross_entropy, the gradients of the softmax
    cross-entropy and of the two layers, SGD with momentum."""

    def __init__(self, init, lr, momentum):
        self.lr, self.momentum = lr, momentum
        self.params = [ev.from_numpy(a.astype(np.float32)) for a in init]
        self.velocity = [ev.zeros_like(p) for p in self.params]

    def step(self, x, y, target):
        w1, b1, w2, b2 = self.params
        inv_b = 1.0 / x.shape[0]
        h = ev.relu(x @ w1 + b1)
        logits = h @ w2 + b2
        loss = ev.cross_entropy(logits, target)
        logp = ev.log_softmax(logits, dim=1)
        dlogits = (ev.exp(logp) - y) * inv_b       # d loss / d logits
        grads = [None, None, h.T @ dlogits, dlogits.sum(0)]
        dh = (dlogits @ w2.T) * (h > 0)            # back through the ReLU
        grads[0] = x.T @ dh
        grads[1] = dh.sum(0)
        for p, g, v in zip(self.params, grads, self.velocity):
            v.mul_(self.momentum).add_(g)          # v = momentum * v + g
            p.sub_(v * self.lr)                    # p -= lr * v
        return loss


def initial_weights(seed):
    """The main job's initial weights for a seed."""
    return fm.initial_weights(np.random.default_rng(seed))


class TorchAutogradMLP:
    """The main job's MLP as a PyTorch user writes it: nn.Sequential,
    CrossEntropyLoss, autograd, optim.SGD and CosineAnnealingLR."""

    def __init__(self, init, lr, momentum, steps):
        import torch
        self.torch = torch
        self.net = torch.nn.Sequential(torch.nn.Linear(fm.PIXELS, 256), torch.nn.ReLU(),
                                       torch.nn.Linear(256, fm.CLASSES))
        with torch.no_grad():
            for p, a in zip(self.net.parameters(), (init[0].T, init[1], init[2].T, init[3])):
                p.copy_(torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)))
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.opt = torch.optim.SGD(self.net.parameters(), lr=lr, momentum=momentum)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=steps)

    def step(self, x, target):
        self.opt.zero_grad()
        loss = self.loss_fn(self.net(x), target)
        loss.backward()
        self.opt.step()
        self.sched.step()
        return loss.detach()

    def accuracy(self, images, labels):
        torch = self.torch
        with torch.no_grad():
            x = torch.from_numpy(images) * (1 / (255 * fm.STD)) - fm.MEAN / fm.STD
            return (self.net(x).argmax(1) == torch.from_numpy(labels)).float().mean().item()


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


def alternate(sides, models, ev_batches, t_batches, rates, args):
    """args.rounds rounds, each side in turn running its batches through
    model.step(*batch); appends each round's steps/s to rates[side].
    torch.set_num_threads does not reach OpenBLAS, which PyTorch's matmuls
    share with eagervm's: PyTorch's rounds run it on every core (its default
    in a PyTorch-only process), not on what eagervm's last matmul left, and
    eagervm's setting is put back after them (it skips setting a count it
    believes is already set)."""
    import torch
    blas = openblas()
    cores = os.cpu_count() or 1
    ev.synchronize()
    for _ in range(args.rounds):
        for name, threads in sides.items():
            model = models[name]
            if threads is None:
                t0 = time.perf_counter()
                for batch in ev_batches:
                    model.step(*batch)
                ev.synchronize()
                elapsed = time.perf_counter() - t0
            else:
                torch.set_num_threads(threads)
                prev = blas.openblas_get_num_threads() if blas else None
                if blas:
                    blas.openblas_set_num_threads(cores)
                t0 = time.perf_counter()
                for batch in t_batches:
                    model.step(*batch)
                elapsed = time.perf_counter() - t0
                if blas:
                    blas.openblas_set_num_threads(prev)
            rates[name].append(len(ev_batches) / elapsed)


def same_math(train, args):
    """The training step alone, eagervm against PyTorch (1 and all
    threads), alternating rounds of args.steps steps; prints steps/s."""
    import statistics
    import torch
    b, steps = args.batch_size, args.steps
    xs, ts = batches(train, args)
    ys = [np.eye(fm.CLASSES, dtype=np.float32)[t] for t in ts]
    ev_batches = [(ev.from_numpy(x), ev.from_numpy(y), ev.from_numpy(t))
                  for x, y, t in zip(xs, ys, ts)]
    t_batches = [(torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(t))
                 for x, y, t in zip(xs, ys, ts)]
    init = initial_weights(args.seed)
    ev_model = HandMLP(init, lr=args.lr, momentum=args.momentum)
    cores = os.cpu_count() or 1
    sides = {"eagervm": None, "torch 1 thread": 1, f"torch {cores} threads": cores}
    models = {name: ev_model if threads is None else
              TorchMLP(init, args.lr, args.momentum) for name, threads in sides.items()}
    rates = {name: [] for name in sides}
    blas = openblas()
    alternate(sides, models, ev_batches, t_batches, rates, args)
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
    check_ev = HandMLP(init, lr=args.lr, momentum=args.momentum)
    check_t = TorchMLP(init, args.lr, args.momentum)
    for (x, y, t), (tx, ty, tt) in list(zip(ev_batches, t_batches))[:10]:
        check_ev.step(x, y, t)
        check_t.step(tx, ty, tt)
    diff = max(float(np.max(np.abs(check_ev.params[k].numpy() - check_t.params[k].numpy())))
               for k in range(4))
    print(f"largest weight difference after 10 steps from the same weights: {diff:.1e}")


def batches(train, args):
    """args.steps prepared batches (normalised images and class indices) of
    a seeded shuffle: the same data for every side."""
    b, steps = args.batch_size, args.steps
    rng = np.random.default_rng(args.seed)
    images = train[0].numpy().astype(np.float32)
    labels = train[1].numpy().astype(np.int64)
    idx = rng.permutation(images.shape[0])[:steps * b].reshape(steps, b)
    xs = [(images[i] * (1 / (255 * fm.STD)) - fm.MEAN / fm.STD).astype(np.float32)
          for i in idx]
    return xs, [labels[i] for i in idx]


def with_autograd(train, test, args):
    """Both sides as users write them (autograd and the library's optimizer);
    prints steps/s, the ratio and the test accuracies."""
    import statistics
    import torch
    xs, ts = batches(train, args)
    ev_batches = [(ev.from_numpy(x), ev.from_numpy(t)) for x, t in zip(xs, ts)]
    t_batches = [(torch.from_numpy(x), torch.from_numpy(t)) for x, t in zip(xs, ts)]
    total = args.rounds * args.steps
    cores = os.cpu_count() or 1
    sides = {"eagervm": None, "torch 1 thread": 1, f"torch {cores} threads": cores}
    init = initial_weights(args.seed)
    models = {}
    for name, threads in sides.items():
        if threads is None:
            m = fm.MLP(np.random.default_rng(args.seed), lr=args.lr, momentum=args.momentum,
                       steps=total)
            models[name] = m
        else:
            models[name] = TorchAutogradMLP(init, args.lr, args.momentum, total)
    rates = {name: [] for name in sides}
    alternate(sides, models, ev_batches, t_batches, rates, args)
    b = args.batch_size
    print(f"the training step with autograd and the optimizer (batch {b}, {args.steps} steps "
          f"per round, {args.rounds} rounds alternating; PyTorch {torch.__version__})")
    med = {name: statistics.median(r) for name, r in rates.items()}
    timg, tlab = test[0].numpy().astype(np.float32), test[1].numpy().astype(np.int64)
    for name, m in med.items():
        model = models[name]
        acc = model.accuracy(test[0], test[1]) if sides[name] is None else \
            model.accuracy(timg, tlab)
        print(f"  {name:<16} {m:>9,.0f} steps/s  {m * b:>11,.0f} samples/s   test accuracy "
              f"{acc:.4f} after {total} steps")
    best_torch = max(m for name, m in med.items() if name != "eagervm")
    print(f"eagervm / faster PyTorch setting: {med['eagervm'] / best_torch:.2f}x (target 2x)")


def bench_venv():
    """The newest PyTorch's Python (scripts/bench_env.sh), or None."""
    venv = os.environ.get("EAGERVM_BENCH_VENV", os.path.join(ROOT, ".venv-bench"))
    py = os.path.join(venv, "bin", "python")
    # A venv's python links to the system one: tell them apart by prefix.
    return py if os.path.exists(py) and os.path.realpath(venv) != os.path.realpath(
        sys.prefix) else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--same-math", action="store_true",
                    help="the step with hand-written gradients, the same ops on both sides")
    ap.add_argument("--steps", type=int, default=200, help="steps per round")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    ap.add_argument("--here", action="store_true",
                    help="only this interpreter (not also the newest PyTorch's venv)")
    args = ap.parse_args()
    if args.steps < 1 or args.rounds < 1 or args.batch_size < 1:
        ap.error("--steps, --rounds and --batch-size must be positive")
    train = mnist.load_fashion_mnist("train")
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch not installed (apt-get install python3-torch): nothing to compare")
    else:
        if args.same_math:
            same_math(train, args)
        else:
            with_autograd(train, mnist.load_fashion_mnist("test"), args)
    venv = None if args.here else bench_venv()
    if venv:
        print(f"\n-- again with {venv} (the newest PyTorch)", flush=True)
        subprocess.run([venv, os.path.abspath(__file__), "--here"] + sys.argv[1:], check=False)


if __name__ == "__main__":
    main()
