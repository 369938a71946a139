"""eagervm.profiler: the records, the Chrome trace, the summary, the timeline
and EAGERVM_PROFILE."""
import json
import os
import subprocess
import sys
import time

import pytest

import eagervm as ev
from eagervm import profiler

HERE = os.path.abspath(__file__)


def _work(t, n=10):
    a = ev.ones(64, 64)
    for _ in range(n):
        with ev.asyncs.thread(t):
            b = a @ a            # on the loader's worker
        c = (b + 1).sum()        # on the default worker, waits for b by itself
    return c


def test_records_every_instruction_with_site_and_stream():
    t = ev.asyncs.Thread()
    ev.synchronize()
    before = ev._C._stats()["submitted"]
    with profiler.profile() as prof:
        c = _work(t)
    after = ev._C._stats()["submitted"]
    evs = prof.events
    # The ops issued, one event each (plus the runtime's own "release"
    # instructions that free storage, when it issues them).
    ops = sorted(e.name for e in evs if e.name != "release")
    assert ops == sorted(["fill_"] + ["matmul", "add", "sum"] * 10)
    assert len(evs) <= after - before
    assert len({(e.stream, e.seq) for e in evs}) == len(evs)  # no duplicates
    names = [e.name for e in evs]
    mm = [e for e in evs if e.name == "matmul"]
    assert {e.thread_uid for e in mm} == {t.uid}
    assert {e.thread_uid for e in evs if e.name == "sum"} == {0}
    assert all(e.file == HERE for e in mm)
    assert all(e.function == "_work" for e in mm)
    for e in evs:
        assert e.issue_ns <= e.start_ns <= e.end_ns
        assert prof.start_ns <= e.issue_ns
    assert c.item() == 64 * 64 * 65


def test_nothing_recorded_outside():
    ev.synchronize()
    x = ev.ones(8) + 1
    with profiler.profile() as prof:
        y = x * 2
    z = y + 1
    assert [e.name for e in prof.events if e.name != "release"] == ["mul"]
    with profiler.profile() as empty:
        pass
    z.numpy()
    assert empty.events == []
    assert "0 instructions" in empty.summary()


def test_nested_profiles_each_keep_their_window():
    ev.synchronize()
    with profiler.profile() as outer:
        a = ev.ones(4) + 1
        with profiler.profile() as inner:
            b = a * 3
        c = b - 1
    assert [e.name for e in inner.events if e.name != "release"] == ["mul"]
    assert [e.name for e in outer.events if e.name not in ("fill_", "release")] == \
        ["add", "mul", "sub"]
    assert c.tolist() == [5.0] * 4


def test_chrome_trace(tmp_path):
    t = ev.asyncs.Thread()
    ev.synchronize()
    with profiler.profile(labels={t: "loader"}) as prof:
        _work(t, n=5)
    path = prof.export_chrome_trace(str(tmp_path / "trace.json"))
    with open(path) as f:
        doc = json.load(f)  # valid JSON
    events = doc["traceEvents"]
    xs = [e for e in events if e["ph"] == "X"]
    assert len(xs) == len(prof.events)
    for e in xs:
        assert {"name", "ts", "dur", "pid", "tid", "args"} <= e.keys()
        assert e["dur"] >= 0 and e["ts"] >= 0
        # (a release the engine queued for a tensor dropped while two
        # workers still used it has no line of its own)
        assert ":" in e["args"]["site"] or e["name"] == "release"

    ts = [e["ts"] for e in xs]
    assert ts == sorted(ts)
    # every lane is named, and the loader's lane says so
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {e["tid"] for e in xs} <= names.keys()
    assert names[t.uid] == f"cpu compute thread {t.uid} (loader)"
    assert names[0] == "cpu compute thread 0 (default)"
    mm = [e for e in xs if e["name"] == "matmul"]
    assert {e["tid"] for e in mm} == {t.uid}
    # on one stream, instructions run one after another
    for tid in names:
        lane = [e for e in xs if e["tid"] == tid]
        for a, b in zip(lane, lane[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + 0.002


def test_summary_numbers_are_consistent():
    t = ev.asyncs.Thread()
    ev.synchronize()
    with profiler.profile() as prof:
        _work(t, n=8)
    text = prof.summary()
    evs = prof.events
    wall = prof.wall_ns
    rows = {}
    for line in text.splitlines()[2:]:
        if not line.strip():
            break
        name, count, total, mean, share = line.split()
        rows[name] = (int(count), float(total), float(mean), float(share.rstrip("%")))
    assert sum(r[0] for r in rows.values()) == len(evs)
    for name, (count, total_ms, mean_us, share) in rows.items():
        mine = [e.duration_ns for e in evs if e.name == name]
        assert count == len(mine)
        assert total_ms == pytest.approx(sum(mine) / 1e6, abs=1e-3)
        assert mean_us == pytest.approx(sum(mine) / len(mine) / 1e3, abs=0.01)
        assert share == pytest.approx(100 * sum(mine) / wall, abs=0.1)
    busy = prof.stream_busy()
    assert sum(n for n, _ in busy.values()) == len(evs)
    for key, (n, b) in busy.items():
        spans = [e.duration_ns for e in evs if e.stream == key]
        assert b == sum(spans)  # one in-order stream: no overlap
        assert 0 <= b <= wall
        assert prof.stream_name(key) in text
    assert f"{len(evs)} instructions" in text


def test_profile_is_read_after_the_block_only():
    p = profiler.profile()
    with p:
        with pytest.raises(RuntimeError, match="still open"):
            p.events
    with pytest.raises(RuntimeError, match="already started"):
        p.start()


def test_plot_timeline(tmp_path):
    pytest.importorskip("matplotlib")
    t = ev.asyncs.Thread()
    with profiler.profile() as prof:
        _work(t, n=3)
    path = prof.plot_timeline(str(tmp_path / "timeline.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    prof.plot_timeline(str(tmp_path / "zoom.png"), window=(0.0, prof.wall_ns / 2e6))
    with pytest.raises(ValueError, match="window"):
        prof.plot_timeline(str(tmp_path / "bad.png"), window=(5.0, 1.0))


def test_plot_timeline_without_matplotlib(tmp_path, monkeypatch):
    import builtins
    real = builtins.__import__

    def no_mpl(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real(name, *args, **kwargs)

    with profiler.profile() as prof:
        (ev.ones(3) + 1).numpy()
    monkeypatch.setattr(builtins, "__import__", no_mpl)
    with pytest.raises(ImportError, match="python3-matplotlib"):
        prof.plot_timeline(str(tmp_path / "x.png"))


def test_env_profile_writes_trace_at_exit(tmp_path):
    out = tmp_path / "proc.json"
    code = ("import eagervm as ev\n"
            "t = ev.asyncs.Thread()\n"
            "with ev.asyncs.thread(t):\n"
            "    a = ev.ones(16) * 2\n"
            "b = (a + 1).sum()\n"
            "print(b.item())\n")
    env = dict(os.environ, EAGERVM_PROFILE=str(out),
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "48.0"
    assert str(out) in r.stderr
    doc = json.loads(out.read_text())
    names = [e["name"] for e in doc["traceEvents"] if e["ph"] == "X"]
    assert {"fill_", "mul", "add", "sum"} <= set(names)
    lanes = [e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"]
    assert "cpu compute thread 0 (default)" in lanes and "cpu compute thread 1" in lanes


def test_overhead_is_small():
    """Recording costs well under a microsecond per instruction (a loose
    bound for a loaded test machine; bench/profile_overhead.py measures it)."""
    x = ev.ones(16)
    y = ev.zeros(16)
    n = 20000

    def run():
        nonlocal y
        ev.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            y = y + x
        ev.synchronize()
        return (time.perf_counter_ns() - t0) / n

    off = min(run() for _ in range(3))
    with profiler.profile() as prof:
        on = min(run() for _ in range(3))
    assert len(prof.events) >= 3 * n
    assert on - off < 2000, (off, on)
