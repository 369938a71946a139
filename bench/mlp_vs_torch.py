#!/usr/bin/env python3
"""The Fashion-MNIST MLP (784-256-10, ReLU, softmax cross-entropy, SGD with
momentum 0.9, cosine learning rate) trained with eagervm
(examples/fashion_mnist.py: hand-written gradients, input pipeline on its own
worker) and with PyTorch on the CPU (its autograd and torch.optim.SGD, the
same normalisation, shuffle and random flip done with torch ops, as a user
would write it): same initial weights, batch size and steps. Prints samples/s
for both, the ratio and both test accuracies.

    python3 bench/mlp_vs_torch.py [--epochs 1] [--batch-size 128]

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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    train = mnist.load_fashion_mnist("train")
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
