"""Stress (issue 6, part 4): 16 Python threads issue random ops at once, each
on random asyncs.Threads of a shared pool (or on its default worker), each on
its own tensors plus shared read-only inputs; every thread's results, at its
sync points in the middle and at the end, must equal a sequential NumPy
replay of the same program (same per-thread seed, so the program is known).

Integers only (int64, wrapping like NumPy), so the comparison is exact.

Short run (normal suite): 16 threads x 1,500 ops. Long run:
    EAGERVM_STRESS_OPS=50000 bash scripts/test_python.sh -k stress
(EAGERVM_STRESS_THREADS changes the thread count; EAGERVM_STRESS_SEED the
seed of the whole run.)
"""
import os
import random
import threading

import numpy as np

import eagervm as ev
from eagervm import asyncs

N_THREADS = int(os.environ.get("EAGERVM_STRESS_THREADS", "16"))
N_OPS = int(os.environ.get("EAGERVM_STRESS_OPS", "1500"))
SEED = int(os.environ.get("EAGERVM_STRESS_SEED", "20260"))
N = 8  # tensors are (N, N) int64
POOL = 6  # shared asyncs.Threads (the limit is EAGERVM_WORKER_THREAD_LIMIT, 16 here)


class EVB:
    """The eagervm side of the ops the programs use."""
    @staticmethod
    def sum(x, d):
        return ev.sum(x, dim=d, keepdim=True)

    @staticmethod
    def where(c, x, y):
        return ev.where(c, x, y)

    @staticmethod
    def cat(xs, d):
        return ev.cat(xs, d)

    @staticmethod
    def take_rows(x, idx):
        return ev.index_select(x, 0, idx)

    @staticmethod
    def max(x, d):
        return ev.max(x, dim=d, keepdim=True)

    @staticmethod
    def value(x):
        return x.numpy()


class NPB:
    """The NumPy side (the sequential replay)."""
    @staticmethod
    def sum(x, d):
        return np.sum(x, axis=d, keepdims=True)

    @staticmethod
    def where(c, x, y):
        return np.where(c, x, y)

    @staticmethod
    def cat(xs, d):
        return np.concatenate(xs, d)

    @staticmethod
    def take_rows(x, idx):
        return np.take(x, idx, axis=0)

    @staticmethod
    def max(x, d):
        return np.max(x, axis=d, keepdims=True)

    @staticmethod
    def value(x):
        return np.array(x, copy=True)


def program(seed, n_ops, B, shared, on_thread):
    """Runs thread `seed`'s program with backend B; returns the snapshots of
    its sync points and of its tensors at the end. on_thread(k) returns a
    context manager choosing worker k (or the default) -- a no-op for NumPy."""
    rng = random.Random(seed)
    vec, mat, idx = shared["vec"], shared["mat"], shared["idx"]
    xs = [shared["init"] * (i + 1) + seed for i in range(3)]
    snaps = []
    for step in range(n_ops):
        k = rng.randrange(POOL + 1)
        i, j = rng.randrange(3), rng.randrange(3)
        op = rng.randrange(12)
        c = rng.randrange(-5, 6)
        with on_thread(k):
            x, y = xs[i], xs[j]
            if op == 0:
                xs[i] = x + y
            elif op == 1:
                xs[i] = x * c + vec
            elif op == 2:
                xs[i] = (x @ mat) % 1000003
            elif op == 3:
                v = xs[i][1:5:2]  # a write through a strided view
                v += y[0:2]
            elif op == 4:
                xs[i] = B.where(x > vec, x, y - c)
            elif op == 5:
                xs[i] = x.T + B.sum(y, 0)
            elif op == 6:
                h = rng.randrange(1, N)
                xs[i] = B.cat([y[h:], x[:h]], 0)
            elif op == 7:
                xs[i] = B.take_rows(x, idx) ^ y
            elif op == 8:
                xs[i][rng.randrange(N)] = c  # setitem of a row
            elif op == 9:
                xs[i] = x - B.max(y, 1) // 3
            elif op == 10:
                xs[i] = (x >> 2) | (y & 0xFF)
            else:
                xs[i] = -x.T
        if rng.randrange(40) == 0:  # a sync point in the middle
            snaps.append(B.value(xs[rng.randrange(3)]))
        if rng.randrange(25) == 0:  # drop a tensor, start it again
            xs[rng.randrange(3)] = shared["init"] + step
    snaps.extend(B.value(x) for x in xs)
    return snaps


class _NoCtx:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def run_stress(n_threads, n_ops, seed):
    rng = np.random.default_rng(seed)
    np_shared = {
        "vec": rng.integers(-50, 50, N).astype(np.int64),
        "mat": rng.integers(-3, 4, (N, N)).astype(np.int64),
        "idx": rng.integers(0, N, N).astype(np.int64),
        "init": rng.integers(-100, 100, (N, N)).astype(np.int64),
    }
    ev_shared = {k: ev.tensor(v) for k, v in np_shared.items()}
    pool = [asyncs.Thread() for _ in range(POOL)]
    nothing = _NoCtx()

    def ev_thread(k):
        return asyncs.thread(pool[k - 1]) if k else nothing

    results, errors = {}, []
    start = threading.Barrier(n_threads)

    def body(t):
        try:
            start.wait()
            results[t] = program(seed * 1000 + t, n_ops, EVB, ev_shared, ev_thread)
        except BaseException as e:  # reported below
            errors.append((t, e))

    ths = [threading.Thread(target=body, args=(t,)) for t in range(n_threads)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert not errors, errors
    # the shared inputs were only read
    for k, v in np_shared.items():
        np.testing.assert_array_equal(ev_shared[k].numpy(), v, err_msg=f"shared {k} changed")
    for t in range(n_threads):
        want = program(seed * 1000 + t, n_ops, NPB, np_shared, lambda k: nothing)
        got = results[t]
        assert len(got) == len(want)
        for s, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_array_equal(g, w, err_msg=f"thread {t} snapshot {s}")


def test_sixteen_python_threads_against_sequential_replay():
    run_stress(N_THREADS, N_OPS, SEED)
