"""The asyncs rules (DESIGN rule 8), one test each, observing which worker
ran each op: a probe op reports the uid of the worker that ran it, and the
runtime's profile records name the thread each instruction ran on."""
import gc
import threading

import numpy as np
import pytest

import eagervm as ev
from eagervm import asyncs

probe = ev._C._probe_uid


def where():
    return probe().item()


def _records():
    # (name, thread_uid, file, line, function, issue_ns, start_ns, end_ns, failed)
    return [(r[0], r[4], r[6], r[7], r[8], r[9], r[10], r[11], r[12])
            for r in ev._C._profile_records() if r[0] != "release"]


@pytest.fixture
def profile():
    ev.synchronize()
    ev._C._profile_records()
    ev._C._profile_enable(True)
    yield _records
    ev._C._profile_enable(False)


def test_thread_and_context_basics():
    t = asyncs.Thread()
    assert t.uid >= 1 and repr(t) == f"<eagervm.asyncs.Thread uid={t.uid}>"
    assert where() == 0
    with asyncs.thread(t) as got:
        assert got is t
        assert where() == t.uid
    assert where() == 0
    assert not hasattr(ev, "Thread") and not hasattr(ev, "thread")


def test_type_error_for_non_thread():
    with pytest.raises(TypeError, match="Thread"):
        asyncs.thread(3)
    with pytest.raises(TypeError):
        asyncs.thread()


def test_nesting_and_reentering_the_same_context():
    t1, t2 = asyncs.Thread(), asyncs.Thread()
    c1 = asyncs.thread(t1)
    with c1:
        with asyncs.thread(t2):
            assert where() == t2.uid
            with c1:  # the same object, entered again while active
                assert where() == t1.uid
            assert where() == t2.uid
        assert where() == t1.uid
    assert where() == 0


def test_restore_on_exception():
    t = asyncs.Thread()
    with pytest.raises(ZeroDivisionError):
        with asyncs.thread(t):
            assert where() == t.uid
            1 / 0
    assert where() == 0


def test_decorator():
    t = asyncs.Thread()

    @asyncs.thread(t)
    def f(x, k=1):
        """doc"""
        return where(), x + k

    uid, y = f(ev.ones(2), k=2)
    assert uid == t.uid and y.tolist() == [3.0, 3.0]
    assert f.__name__ == "f" and f.__doc__ == "doc" and f.__wrapped__ is not None
    assert where() == 0

    class C:
        @asyncs.thread(t)
        def m(self):
            return where()

    assert C().m() == t.uid

    @asyncs.thread(t)
    def boom():
        raise KeyError("x")

    with pytest.raises(KeyError):
        boom()
    assert where() == 0


def test_thread_locality_with_two_python_threads():
    t = asyncs.Thread()
    inside, done = threading.Event(), threading.Event()
    seen = {}

    def worker():
        with asyncs.thread(t):
            inside.set()
            seen["a"] = where()
            done.wait(10)
            seen["a2"] = where()
        seen["a3"] = where()

    th = threading.Thread(target=worker)
    th.start()
    assert inside.wait(10)
    seen["main"] = where()  # the other Python thread is inside its block
    other = threading.Thread(target=lambda: seen.__setitem__("b", where()))
    other.start()
    other.join()
    done.set()
    th.join()
    assert seen == {"a": t.uid, "a2": t.uid, "a3": 0, "main": 0, "b": 0}


def test_limit_error_names_the_variable():
    held = []
    with pytest.raises(RuntimeError, match="EAGERVM_WORKER_THREAD_LIMIT"):
        for _ in range(5000):
            held.append(asyncs.Thread())
    assert 0 < len(held) <= ev._C._stats()["thread_limit"]
    assert len({t.uid for t in held}) == len(held)
    del held
    gc.collect()
    asyncs.Thread()  # uids came back


def test_uid_reuse_after_gc():
    t = asyncs.Thread()
    uid = t.uid
    with asyncs.thread(t):
        x = ev.ones(1000) * 3  # work still queued when the handle goes
    del t
    gc.collect()
    got = []
    try:
        while True:
            got.append(asyncs.Thread())
            if got[-1].uid == uid:
                break
    except RuntimeError:
        pass
    assert got and got[-1].uid == uid
    assert x.sum().item() == 3000.0


def test_tensor_written_on_one_thread_read_on_another(profile):
    t1, t2 = asyncs.Thread(), asyncs.Thread()
    a = np.arange(100000, dtype=np.float32)
    with asyncs.thread(t1):
        x = ev.tensor(a) * 2
    with asyncs.thread(t2):
        y = x + 1
    z = y - x  # on the default thread
    assert np.array_equal(y.numpy(), a * 2 + 1)
    assert np.array_equal(z.numpy(), np.ones_like(a))
    ran = {r[0]: r[1] for r in profile()}
    assert ran["mul"] == t1.uid and ran["add"] == t2.uid and ran["sub"] == 0


def test_chain_bouncing_between_three_threads(profile):
    ts = [asyncs.Thread() for _ in range(3)]
    x = ev.zeros(1000, dtype=ev.int64)
    for i in range(60):
        with asyncs.thread(ts[i % 3]):
            x = x + i
    assert x.numpy().tolist() == [sum(range(60))] * 1000
    uids = [r[1] for r in profile() if r[0] == "add"]
    assert uids == [ts[i % 3].uid for i in range(60)]


def test_inplace_writes_from_two_threads_apply_in_issue_order():
    t1, t2 = asyncs.Thread(), asyncs.Thread()
    x = ev.zeros(50000)
    for i in range(20):
        with asyncs.thread(t1 if i % 2 else t2):
            x *= 2
            x += 1
    assert np.all(x.numpy() == float(2**20 - 1))


def test_dropping_last_reference_while_an_op_reads_it():
    t = asyncs.Thread()
    a = ev.ones(4_000_000)
    with asyncs.thread(t):
        s = (a * 2).sum()
        b = a + 1
    del a  # the ops above still read it
    gc.collect()
    assert s.item() == 8_000_000.0
    assert b[123].item() == 2.0


def test_many_python_threads_issue_at_once():
    errors = []

    def run(k):
        try:
            t = asyncs.Thread() if k % 2 else None
            x = ev.zeros(100)
            for _ in range(200):
                if t is None:
                    x = x + k
                else:
                    with asyncs.thread(t):
                        x = x + k
            assert x.numpy().tolist() == [200.0 * k] * 100
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ths = [threading.Thread(target=run, args=(k,)) for k in range(6)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert not errors
