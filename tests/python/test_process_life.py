"""Process life (issue 6, part 6), each case with work really queued (seconds
of matmuls on several asyncs.Threads) when the event happens. Complements
tests/python/test_runtime.py and test_asyncs.py, which cover the simple cases:
- fork after ops have run, child using eagervm: test_runtime.py::
  test_fork_child_gets_a_working_runtime (here: fork with thousands of ops
  still queued on two Threads);
- exit with 100,000 ops queued on the default Thread: test_runtime.py::
  test_exit_with_100000_ops_queued_exits_cleanly (here: seconds of work queued
  on three Threads, and the exit must be quick);
- KeyboardInterrupt during a long wait: test_runtime.py::
  test_ctrl_c_at_a_sync_point_raises_promptly (here: the runtime is still
  usable and the interrupted values are right afterwards);
- restore on exception: test_asyncs.py::test_restore_on_exception (here:
  nested blocks, an eagervm error raised inside, a kernel failure issued
  inside, and the Thread used again afterwards);
- uid reuse after garbage collection: test_asyncs.py::test_uid_reuse_after_gc
  (here: the collected Thread still has seconds of work queued)."""
import gc
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import eagervm as ev
from eagervm import asyncs

probe = ev._C._probe_uid


def run_script(code, timeout=120):
    e = dict(os.environ)
    e["PYTHONPATH"] = os.path.dirname(os.path.dirname(ev.__file__)) + os.pathsep + \
        e.get("PYTHONPATH", "")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e,
                       capture_output=True, text=True, timeout=timeout)
    return r, time.monotonic() - t0


# Seconds of queued work with small outputs (big outputs would make issuing
# itself wait: the runtime bounds the memory in flight).
QUEUE = """
    import os, time
    import numpy as np
    import eagervm as ev
    ts = [ev.asyncs.Thread() for _ in range({n})]
    a = ev.ones(1000, 1000)
    b = ev.ones(1000, 1)
    xs = []
    for k, t in enumerate(ts):
        with ev.asyncs.thread(t):
            x = ev.full((1000, 1), float(k))
            for i in range({ops}):
                x = x + (a @ b) * 0.0 + 1.0
            xs.append(x)
    pending = ev._C._stats()["pending"]
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_with_work_queued_on_several_threads():
    r, _ = run_script(QUEUE.format(n=2, ops=1500) + """
    y = xs[0] + xs[1]                   # on the default Thread, reads both
    pid = os.fork()
    if pid == 0:
        ok = True
        try:
            v = y.numpy()               # the parent's queued work, adopted
            ok &= bool(np.all(v == 3001.0))
            ok &= float(xs[1][5, 0].item()) == 1501.0
            u = ev.asyncs.Thread()      # a fresh pool in the child
            with ev.asyncs.thread(u):
                z = ev.arange(10) * 2 + y[:10, 0].to(ev.int64)
            ok &= z.tolist() == [3001 + 2 * i for i in range(10)]
            ok &= ev._C._probe_uid().item() == 0
            ev.synchronize()
        except Exception as e:
            print("child failed:", repr(e), flush=True)
            ok = False
        os._exit(0 if ok else 1)
    # the parent goes on issuing on its Threads while the child runs
    with ev.asyncs.thread(ts[0]):
        w = xs[0] * 2
    _, status = os.waitpid(pid, 0)
    print("pending at fork", pending > 1000, "child status", status,
          "parent", y[0, 0].item(), w[0, 0].item())
    """)
    assert r.returncode == 0, r.stderr
    assert "pending at fork True child status 0 parent 3001.0 3000.0" in r.stdout, \
        r.stdout + r.stderr


def test_exit_with_work_queued_on_several_threads_is_quick():
    # ~3 x 3000 matmul-vector products still queued: seconds of work, dropped
    r, secs = run_script(QUEUE.format(n=3, ops=3000) + """
    print("pending", pending > 3000, flush=True)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "pending True" and r.stderr == "", r.stdout + r.stderr
    assert secs < 10.0, f"exit took {secs:.1f} s"


def test_runtime_usable_after_keyboard_interrupt_at_a_wait():
    """The interrupt itself: test_runtime.py::test_ctrl_c_at_a_sync_point_raises_promptly.
    Here: after it, the values the wait was for are still right, the Threads
    still run, and synchronize() raises nothing."""
    r, _ = run_script(QUEUE.format(n=2, ops=2000) + """
    import signal, threading
    threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    try:
        xs[0].numpy()
        print("finished first")
        time.sleep(30)  # the work was quicker than the timer: the interrupt lands here
    except KeyboardInterrupt:
        print("interrupted")
    ev.synchronize()
    assert float(xs[0][0, 0].item()) == 2000.0
    assert float(xs[1][999, 0].item()) == 2001.0
    with ev.asyncs.thread(ts[1]):
        assert ev._C._probe_uid().item() == ts[1].uid
        z = xs[0] + xs[1]
    print("after", z[0, 0].item(), flush=True)
    """)
    assert r.returncode == 0, r.stderr
    assert "after 4001.0" in r.stdout, r.stdout + r.stderr
    assert "interrupted" in r.stdout or "finished first" in r.stdout


def test_exceptions_inside_thread_blocks_restore_and_leave_the_runtime_usable():
    t1, t2 = asyncs.Thread(), asyncs.Thread()
    x = ev.arange(100000, dtype=ev.float64)
    with asyncs.thread(t1):
        with pytest.raises(ValueError, match="broadcast"):
            with asyncs.thread(t2):
                y = x * 2  # queued on t2 before the error
                assert probe().item() == t2.uid
                ev.ones(3) + ev.ones(4)  # an error raised by eagervm at the call
        assert probe().item() == t1.uid  # the outer block is back
        with pytest.raises(KeyError):
            with asyncs.thread(t2):
                bad = ev.tensor([1, 2]) ** -1  # fails later, in the kernel
                raise KeyError("user code")
        assert probe().item() == t1.uid
    assert probe().item() == 0
    with pytest.raises(ValueError, match="pow"):
        bad.numpy()  # the kernel failure from inside the block, attributed
    ev.synchronize()  # and not raised again
    with asyncs.thread(t2):  # the same Threads work on
        z = y + 1
    with asyncs.thread(t1):
        w = z.sum()
    assert w.item() == float(2 * np.arange(100000).sum() + 100000)


def test_gc_of_a_thread_with_work_still_queued():
    a = ev.ones(1000, 1000)
    b = ev.ones(1000, 1)
    t = asyncs.Thread()
    uid = t.uid
    with asyncs.thread(t):
        x = ev.zeros(1000, 1)
        for _ in range(600):
            x = x + (a @ b) * 0.001
        s = x.sum()
    assert ev._C._stats()["pending"] > 100  # still queued when the handle goes
    del t
    gc.collect()
    others = [asyncs.Thread() for _ in range(2)]  # made while the work runs
    with asyncs.thread(others[0]):
        y = x * 2  # reads the collected Thread's result
    np.testing.assert_allclose(y.numpy(), np.full((1000, 1), 1200.0, np.float32), rtol=1e-4)
    np.testing.assert_allclose(s.item(), 600000.0, rtol=1e-4)
    del others
    gc.collect()
    ev.synchronize()
    got = []
    try:
        while not got or got[-1].uid != uid:
            got.append(asyncs.Thread())
    except RuntimeError:
        pass
    assert got and got[-1].uid == uid, "the collected Thread's uid never came back"
    with asyncs.thread(got[-1]):
        assert probe().item() == uid
