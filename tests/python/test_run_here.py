"""Cheap ops issued while their worker is parked run on the issuing thread
(EV_SUBMIT_MAY_RUN_HERE): the same results, the same errors at the same
lines; large ops, and every op with the setting off, go to the worker."""
import time

import numpy as np
import pytest

import eagervm as ev
from eagervm import _C


def ran_here():
    return _C._stats()["ran_here"]


def after_idle(fn, tries=20, want=1):
    """Runs fn once the default worker has parked; returns (its result, how
    many ops ran on this thread). Retries while a spurious wake kept the
    worker up, or woke it before `want` ops had run here (a wake asked for
    earlier can arrive late: 10-250 us on a VM)."""
    ev.synchronize()
    for attempt in range(tries):
        if attempt:
            try:
                ev.synchronize()
            except ValueError:
                pass  # the failure of an attempt that did not run here
        time.sleep(0.03)  # the worker polls for 20 us before it parks
        before = ran_here()
        out = fn()
        n = ran_here() - before
        if n >= want:
            return out, n
    return out, n


@pytest.fixture
def run_here_on():
    was = _C._set_run_here(True)
    yield
    _C._set_run_here(was)


def test_tiny_op_after_idle_runs_here_with_the_same_result(run_here_on):
    a_np = np.arange(1024, dtype=np.float32)
    a, b = ev.tensor(a_np), ev.tensor(a_np * 2)
    y, n = after_idle(lambda: a + b)
    assert n == 1
    np.testing.assert_array_equal(y.numpy(), a_np * 3)


def test_a_chain_of_tiny_ops_keeps_its_order(run_here_on):
    x = ev.tensor(np.ones(256, dtype=np.float32))

    def chain():
        y = x
        for k in range(40):  # past the burst length that wakes the worker
            y = y * 2 if k % 2 else y + 1
        return y

    y, n = after_idle(chain, want=16)
    assert n >= 16
    ref = np.ones(256, dtype=np.float32)
    for k in range(40):
        ref = ref * 2 if k % 2 else ref + 1
    np.testing.assert_array_equal(y.numpy(), ref)


def test_large_op_goes_to_the_worker(run_here_on):
    a = ev.ones(1 << 20)
    y, n = after_idle(lambda: a + 1, tries=3)
    assert n == 0
    assert y.sum().item() == 2.0 * (1 << 20)


def test_off_sends_every_op_to_the_worker():
    a_np = np.arange(1024, dtype=np.float32)
    a = ev.tensor(a_np)
    was = _C._set_run_here(False)
    try:
        assert _C._set_run_here(False) is False
        y, n = after_idle(lambda: a * a, tries=3)
        assert n == 0
        np.testing.assert_array_equal(y.numpy(), a_np * a_np)
    finally:
        _C._set_run_here(was)


def bad_pow():
    return ev.tensor([1, 2]) ** -1  # MARK-RUN-HERE-POW


def test_failure_of_an_op_run_here_points_at_its_line(run_here_on):
    x, n = after_idle(bad_pow)
    assert n >= 1
    with open(__file__) as f:
        line = next(i for i, t in enumerate(f, 1) if "MARK-RUN-HERE-POW" in t)
    with pytest.raises(ValueError) as e:
        x.numpy()
    assert f"{__file__}:{line} in bad_pow" in str(e.value)
    # The runtime goes on, running here again, while x, poisoned, lives:
    # its readers are skipped and raise, others run.
    y, n = after_idle(lambda: ev.ones(3) * 2)
    assert n >= 1 and y.tolist() == [2.0, 2.0, 2.0]
    z, n = after_idle(lambda: x + 1)
    assert n >= 1
    with pytest.raises(ValueError, match="pow"):
        z.numpy()


def test_on_a_thread_of_its_own(run_here_on):
    t = ev.asyncs.Thread()
    with ev.asyncs.thread(t):
        big = ev.ones(1 << 20) * 3  # keeps the worker busy for a while
        small = ev.ones(64)

        def use():
            # Its queue is not empty at first: this goes behind the big op.
            return (big[:64] + small, small * 5)

        (first, second), _ = after_idle(use, tries=1)
    np.testing.assert_array_equal(first.numpy(), np.full(64, 4, np.float32))
    np.testing.assert_array_equal(second.numpy(), np.full(64, 5, np.float32))
    with ev.asyncs.thread(t):
        z, n = after_idle(lambda: small + 1)
    assert n == 1 and z.tolist() == [2.0] * 64


def test_set_run_here_returns_the_previous_setting():
    was = _C._set_run_here(True)
    try:
        assert _C._set_run_here(False) is True
        assert _C._set_run_here(True) is False
    finally:
        _C._set_run_here(was)
