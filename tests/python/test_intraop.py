"""Intra-op parallelism and stream-ordered reuse seen from Python: large
elementwise ops are exact whether split over helper threads or not
(EAGERVM_INTRAOP_THREADS), a bad value of the variable is reported and
ignored, a forked child gets working helpers, and a chain of large ops
reuses its memory instead of holding a block per op."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import eagervm as ev

N = 1_000_003  # not a multiple of any chunk size


def run_script(code, env_extra, timeout=120):
    e = dict(os.environ)
    e.update(env_extra)
    e["PYTHONPATH"] = os.path.dirname(os.path.dirname(ev.__file__)) + os.pathsep + \
        e.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e,
                          capture_output=True, text=True, timeout=timeout)


CHAIN = """
    import numpy as np
    import eagervm as ev
    a = np.arange({n}, dtype=np.float32) % 1000
    b = np.arange({n}, dtype=np.float32) % 7
    x, y = ev.tensor(a), ev.tensor(b)
    for _ in range(20):
        y = (y + x) * 0.5
    want = b.copy()
    for _ in range(20):
        want = (want + a) * np.float32(0.5)
    print("exact", bool(np.array_equal(y.numpy(), want)))
"""


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_large_chain_exact_for_any_helper_count(threads):
    r = run_script(CHAIN.format(n=N), {"EAGERVM_INTRAOP_THREADS": threads})
    assert r.returncode == 0, r.stderr
    assert "exact True" in r.stdout, r.stdout + r.stderr


def test_bad_intraop_threads_value_is_reported_and_ignored():
    r = run_script(CHAIN.format(n=N), {"EAGERVM_INTRAOP_THREADS": "lots"})
    assert r.returncode == 0, r.stderr
    assert "exact True" in r.stdout
    assert "EAGERVM_INTRAOP_THREADS=lots is not a positive integer" in r.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_splits_loops_again():
    r = run_script("""
        import os
        import numpy as np
        import eagervm as ev
        x = ev.ones({n})
        y = (x + x).numpy()             # the parent's helpers are running
        pid = os.fork()
        if pid == 0:
            z = (x * 3 + x).numpy()     # helpers start again in the child
            os._exit(0 if np.all(z == 4) else 1)
        _, status = os.waitpid(pid, 0)
        print("child", status, "parent", bool(np.all(y == 2)))
    """.format(n=N), {}, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "child 0 parent True" in r.stdout, r.stdout + r.stderr


def test_large_chain_reuses_memory_while_queued():
    """200 results of 4 MB issued ahead of the worker: with stream-ordered
    reuse most results take the block of the one dropped before, even though
    the ops that read it have not run yet."""
    x = ev.ones(N)
    y = ev.zeros(N)
    ev.synchronize()
    m = ev.ones(2048, 2048)
    busy = m @ m                        # keeps the worker busy meanwhile
    s0 = ev._C._stats()
    for _ in range(200):
        y = y + x
    s1 = ev._C._stats()
    assert s1["alloc_stream_reuses"] - s0["alloc_stream_reuses"] >= 100
    del busy
    assert np.all(y.numpy() == 200)
