"""Intra-op parallelism and stream-ordered reuse seen from Python: large
elementwise ops are exact whether split over helper threads or not
(EAGERVM_INTRAOP_THREADS), a bad value of the variable is reported and
ignored, a forked child gets working helpers, a chain of large ops
reuses its memory instead of holding a block per op, and the cores are
shared: a large op alone gets every thread, large ops on two busy Threads
at most half each."""
import os
import subprocess
import sys
import textwrap
import threading

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
            st = ev._C._intraop_stats()
            ok = np.all(z == 4) and st["helpers"] == st["threads"] - 1
            os._exit(0 if ok else 1)
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


@pytest.mark.parametrize("op", ["clone", "cast", "cat", "ones_like", "fill_"])
def test_dropped_copies_reuse_memory_while_queued(op):
    """Copies and fills of contiguous tensors (clone, a cast, cat, the
    *_like creations, fill_) whose results are dropped at once leave their
    blocks to the next op of the stream, as elementwise results do, and
    the values are right."""
    x = ev.ones(N)
    ev.synchronize()
    m = ev.ones(2048, 2048)
    busy = m @ m                        # keeps the worker busy meanwhile
    make = {"clone": lambda: ev.clone(x), "cast": lambda: ev.cast(x, ev.float64),
            "cat": lambda: ev.cat([x, x]), "ones_like": lambda: ev.ones_like(x),
            "fill_": lambda: ev.empty(N).fill_(1.0)}[op]
    s0 = ev._C._stats()
    for _ in range(50):
        r = make()
    s1 = ev._C._stats()
    assert s1["alloc_stream_reuses"] - s0["alloc_stream_reuses"] >= 25
    del busy
    assert np.all(r.numpy() == 1)


def test_large_ops_alone_use_every_thread():
    x, y = ev.ones(N), ev.ones(N)
    m = ev.ones(1024, 1024)
    ev.synchronize()
    ev._C._intraop_stats(reset=True)
    z = x + y
    ev.synchronize()
    st = ev._C._intraop_stats()
    assert st["last_grant"] == st["threads"]
    p = m @ m
    assert float(p[0, 0].item()) == 1024.0
    if ev._C._config()["blas"]:         # the built-in kernel takes no threads
        st = ev._C._intraop_stats()
        assert st["last_grant"] == st["threads"]
    assert np.all(z.numpy() == 2)


def test_two_busy_threads_share_the_cores():
    """Two Threads, each issuing large adds and matmuls from its own Python
    thread: exact results, and every op that found the other worker busy
    got at most half the threads (at least 1)."""
    ts = [ev.asyncs.Thread(), ev.asyncs.Thread()]
    out = [None, None]
    ev.synchronize()
    st0 = ev._C._intraop_stats(reset=True)

    def work(i):
        with ev.asyncs.thread(ts[i]):
            x = ev.ones(N)
            y = ev.zeros(N)
            m = ev.ones(512, 512)
            acc = ev.zeros(512, 512)
            for _ in range(10):
                y = y + x
                acc = acc + m @ m
            out[i] = (y.numpy(), acc.numpy())

    th = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    for y, acc in out:
        assert np.all(y == 10)
        assert np.all(acc == 5120)
    st = ev._C._intraop_stats()
    half = max(1, st["threads"] // 2)
    assert st["large_ops"] - st0["large_ops"] >= 20
    assert st["max_shared_grant"] <= half
    # Held at once: at most the total, but for the one thread of an op that
    # started while the other held everything.
    assert st["peak_granted"] <= st["threads"] + 1
    assert st["running"] == 0 and st["granted"] == 0


def test_exit_with_large_ops_queued_on_two_threads():
    """The default runtime lives until the process ends (its pool with it):
    an exit with large split loops and matmuls still queued on two Threads
    finishes them and leaves at once, whatever the helpers were doing."""
    r = run_script("""
        import eagervm as ev
        ts = [ev.asyncs.Thread(), ev.asyncs.Thread()]
        x = ev.ones({n})
        m = ev.ones(512, 512)
        for t in ts:
            with ev.asyncs.thread(t):
                for _ in range(20):
                    x = x + 1
                    p = m @ m
        print("queued")
    """.format(n=N), {}, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "queued" in r.stdout
