"""One optimizer step of eagervm.optim (one fused instruction for all the
parameters) against the same formulas as a chain of eagervm's in-place
elementwise ops (what one writes without eagervm.optim), torch.optim (its
single-tensor path, the default on CPU) and NumPy's in-place ufuncs (the best
NumPy does without fusing): the same parameters, gradients and
hyperparameters.

    PYTHONPATH=python /usr/bin/python3 bench/optim_step.py [--repeats N] [--only NAME,...]

Each repeat runs a batch of steps in eagervm (ending in synchronize(), so it
measures the work, not only its issue), torch and NumPy, one after the other.
One line per case: the median time per step of each, in microseconds, and the
ratios of the others to eagervm.optim (above 1: eagervm.optim is faster). Every
side does the same work: read the gradient, update the state, write the
parameter. Timings are printed, never asserted.
"""
import argparse
import statistics
import time

import numpy as np

import eagervm as ev
import eagervm.optim as evoptim

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

CASES = {
    "1x4M": [(4 << 20,)],
    "64x16K": [(16 << 10,)] * 64,
    "mlp": [(784, 256), (256,), (256, 10), (10,)],
}
OPTS = {
    "sgd": dict(lr=0.01, momentum=0.9, weight_decay=1e-4),
    "adam": dict(lr=1e-3),
    "adamw": dict(lr=1e-3, weight_decay=1e-2),
}


def np_sgd(ps, gs, bufs, lr, momentum, weight_decay):
    f = np.float32
    for p, g, b in zip(ps, gs, bufs):
        d = g + f(weight_decay) * p
        b *= f(momentum)
        b += f(1.0) * d  # 1 - dampening
        p -= f(lr) * b


def np_adam(ps, gs, ms, vs, t, lr, weight_decay=0.0, decoupled=False, b1=0.9, b2=0.999,
            eps=1e-8):
    f = np.float32
    bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
    for p, g, m, v in zip(ps, gs, ms, vs):
        if decoupled:
            p *= f(1 - lr * weight_decay)
        m += f(1 - b1) * (g - m)
        v *= f(b2)
        v += f(1 - b2) * g * g
        denom = np.sqrt(v)
        denom /= f(bc2 ** 0.5)
        denom += f(eps)
        p += f(-lr / bc1) * m / denom


def ev_chain_sgd(ps, gs, bufs, lr, momentum, weight_decay):
    for p, g, b in zip(ps, gs, bufs):
        d = g + p * weight_decay
        b.mul_(momentum)
        b.add_(d)
        p.sub_(b * lr)


def ev_chain_adam(ps, gs, ms, vs, t, lr, weight_decay=0.0, decoupled=False, b1=0.9, b2=0.999,
                  eps=1e-8):
    bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
    for p, g, m, v in zip(ps, gs, ms, vs):
        if decoupled:
            p.mul_(1 - lr * weight_decay)
        m.mul_(b1)
        m.add_(g * (1 - b1))
        v.mul_(b2)
        v.add_(g * g * (1 - b2))
        denom = v.sqrt()
        denom.div_(bc2 ** 0.5)
        denom.add_(eps)
        p.sub_(m * (lr / bc1) / denom)


def make_case(shapes, seed=0):
    rng = np.random.default_rng(seed)
    ps = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    gs = [rng.standard_normal(s).astype(np.float32) * 1e-2 for s in shapes]
    return ps, gs


def bench_case(opt_name, case, repeats, batch):
    ps, gs = make_case(CASES[case])
    kw = OPTS[opt_name]
    cls = {"sgd": evoptim.SGD, "adam": evoptim.Adam, "adamw": evoptim.AdamW}[opt_name]
    eps_ = [ev.tensor(p) for p in ps]
    for p, g in zip(eps_, gs):
        p.grad = ev.tensor(g)
    eopt = cls(eps_, **kw)
    eopt.step()
    ev.synchronize()

    if torch is not None:
        tcls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam,
                "adamw": torch.optim.AdamW}[opt_name]
        tps = [torch.tensor(p, requires_grad=True) for p in ps]
        for p, g in zip(tps, gs):
            p.grad = torch.tensor(g)
        topt = tcls(tps, foreach=False, **kw)
        topt.step()

    nps = [p.copy() for p in ps]
    nstate = [[np.zeros_like(p) for p in ps], [np.zeros_like(p) for p in ps]]
    nstep = [0]

    def run_np():
        if opt_name == "sgd":
            np_sgd(nps, gs, nstate[0], kw["lr"], kw["momentum"], kw["weight_decay"])
        else:
            nstep[0] += 1
            np_adam(nps, gs, nstate[0], nstate[1], nstep[0], kw["lr"],
                    kw.get("weight_decay", 0.0), opt_name == "adamw")

    cps = [ev.tensor(p) for p in ps]
    cgs = [ev.tensor(g) for g in gs]
    cstate = [[ev.zeros(*p.shape) for p in ps], [ev.zeros(*p.shape) for p in ps]]
    cstep = [0]

    def run_chain():
        if opt_name == "sgd":
            ev_chain_sgd(cps, cgs, cstate[0], kw["lr"], kw["momentum"], kw["weight_decay"])
        else:
            cstep[0] += 1
            ev_chain_adam(cps, cgs, cstate[0], cstate[1], cstep[0], kw["lr"],
                          kw.get("weight_decay", 0.0), opt_name == "adamw")

    times = {"eagervm": [], "ev ops": [], "torch": [], "numpy": []}
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(batch):
            eopt.step()
        ev.synchronize()
        times["eagervm"].append((time.perf_counter() - t0) / batch)
        t0 = time.perf_counter()
        for _ in range(batch):
            run_chain()
        ev.synchronize()
        times["ev ops"].append((time.perf_counter() - t0) / batch)
        if torch is not None:
            t0 = time.perf_counter()
            with torch.no_grad():
                for _ in range(batch):
                    topt.step()
            times["torch"].append((time.perf_counter() - t0) / batch)
        t0 = time.perf_counter()
        for _ in range(batch):
            run_np()
        times["numpy"].append((time.perf_counter() - t0) / batch)
    med = {k: statistics.median(v) * 1e6 if v else float("nan") for k, v in times.items()}
    return med


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--only", default="", help="comma-separated names like adam-1x4M")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    print(f"{'case':<16}{'optim us':>10}{'ev ops us':>11}{'torch us':>10}{'numpy us':>10}"
          f"{'ops/optim':>11}{'torch/optim':>12}{'numpy/optim':>12}")
    for opt_name in OPTS:
        for case in CASES:
            name = f"{opt_name}-{case}"
            if only and name not in only:
                continue
            numel = sum(int(np.prod(s)) for s in CASES[case])
            batch = max(2, min(200, (20 << 20) // (numel * 16)))
            m = bench_case(opt_name, case, args.repeats, batch)
            e = m["eagervm"]
            print(f"{name:<16}{e:>10.1f}{m['ev ops']:>11.1f}{m['torch']:>10.1f}"
                  f"{m['numpy']:>10.1f}{m['ev ops'] / e:>11.2f}{m['torch'] / e:>12.2f}"
                  f"{m['numpy'] / e:>12.2f}", flush=True)


if __name__ == "__main__":
    main()
