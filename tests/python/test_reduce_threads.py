"""Reductions, softmax and cross_entropy split over the intra-op threads
give the same bits whatever their number (EAGERVM_INTRAOP_THREADS): each
large case is run in a child with 1, 2 and 3 threads and the digests of the
results compared."""
import os
import subprocess
import sys
import textwrap

import eagervm as ev

SCRIPT = """
    import hashlib
    import numpy as np
    import eagervm as ev
    rng = np.random.default_rng(0)
    h = hashlib.sha256()
    def add(t):
        h.update(np.ascontiguousarray(t.numpy()).tobytes())
    for shape, dt in (((1000003,), np.float32), ((1000003,), np.float64),
                      ((1024, 1024), np.float32), ((3000, 301), np.float32),
                      ((5, 70001), np.float64)):
        a = rng.standard_normal(shape).astype(dt) * 3
        a.flat[a.size // 3] = np.nan if len(shape) == 2 and shape[0] == 3000 else 1.0
        x = ev.tensor(a)
        dims = [None] + list(range(len(shape)))
        for dim in dims:
            args = (x,) if dim is None else (x, dim)
            for name in ("sum", "mean", "prod", "max", "min", "logsumexp", "any", "all",
                         "argmax", "argmin", "var", "std"):
                add(getattr(ev, name)(*args))
            if dim is not None:
                add(ev.softmax(x, dim))
                add(ev.log_softmax(x, dim))
        if len(shape) == 2:
            t = ev.tensor(rng.integers(0, shape[1], shape[0]))
            for red in ("none", "sum", "mean"):
                add(ev.cross_entropy(x, t, reduction=red))
    print("digest", h.hexdigest())
"""


def run_with_threads(threads):
    env = dict(os.environ)
    env["EAGERVM_INTRAOP_THREADS"] = threads
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(ev.__file__)) + os.pathsep + \
        env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("digest ")]
    assert lines, r.stdout + r.stderr
    return lines[0]


def test_reductions_same_bits_for_any_thread_count():
    digests = {t: run_with_threads(t) for t in ("1", "2", "3")}
    assert len(set(digests.values())) == 1, digests
