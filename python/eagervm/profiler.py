"""The eagervm profiler: when each instruction was issued, started and ended,
on which stream, and which Python line issued it.

    import eagervm as ev
    with ev.profiler.profile() as prof:
        ...                                   # every instruction issued here is recorded
    prof.export_chrome_trace("trace.json")    # open in https://ui.perfetto.dev or chrome://tracing
    prof.plot_timeline("timeline.png")        # one lane per stream (needs matplotlib)
    print(prof.summary())                     # per op: count, total, mean, share; per stream: busy

`EAGERVM_PROFILE=path.json python3 prog.py` profiles the whole process and
writes the Chrome trace to path.json at exit.

Recording is switched on for the whole runtime while at least one profile is
open, so instructions issued by other Python threads in that window are
recorded too. Profiles may nest; each keeps the instructions issued while it
was open. Leaving a profile waits for the work issued so far (to read its end
times) but is not a sync point: kernel failures are still reported by the next
sync point, not here.
"""
import atexit
import json
import os
import threading
import time

from . import _C

__all__ = ["profile", "Event"]


class Event:
    """One recorded instruction. Times are CLOCK_MONOTONIC nanoseconds (the
    clock of time.monotonic_ns())."""

    __slots__ = ("name", "device", "stream_type", "stream_index", "thread_uid", "seq",
                 "file", "line", "function", "issue_ns", "start_ns", "end_ns", "failed")

    def __init__(self, rec):
        (self.name, self.device, self.stream_type, self.stream_index, self.thread_uid,
         self.seq, self.file, self.line, self.function, self.issue_ns, self.start_ns,
         self.end_ns, self.failed) = rec

    @property
    def stream(self):
        """The stream's key: (device, stream type, thread uid, index)."""
        return (self.device, self.stream_type, self.thread_uid, self.stream_index)

    @property
    def duration_ns(self):
        return self.end_ns - self.start_ns

    @property
    def site(self):
        """'file:line' of the Python line that issued it ('?' if unknown)."""
        return f"{self.file}:{self.line}" if self.file else "?"

    def __repr__(self):
        return (f"<Event {self.name} on {stream_name(self.stream)} seq={self.seq} "
                f"{self.duration_ns / 1e3:.1f}us at {self.site}>")


def stream_name(key, labels=None):
    """A lane's name, e.g. 'cpu compute thread 1 (loader)'."""
    device, stype, uid, index = key
    name = f"{device} {stype} thread {uid}"
    if index:
        name += f" #{index}"
    label = (labels or {}).get(uid)
    if label is None and uid == 0:
        label = "default"
    return f"{name} ({label})" if label else name


# ------------------------------------------------------------ the recorder
#
# The runtime keeps one buffer of records. Every open profile is in _open;
# when one closes, the buffer is drained and each open profile keeps the
# records issued since it opened.

_lock = threading.Lock()
_open = []


def _drain_locked():
    recs = _C._profile_records()
    if not recs:
        return
    for p in _open:
        t0 = p._t0
        # Records come sorted by issue time: skip the ones before t0.
        lo, hi = 0, len(recs)
        while lo < hi:
            mid = (lo + hi) // 2
            if recs[mid][9] < t0:
                lo = mid + 1
            else:
                hi = mid
        p._raw.extend(recs[lo:])


class profile:
    """Records every instruction issued while the block is open.

    labels: optional {Thread or uid: "name"} to name lanes (also
    prof.label(thread, name) later)."""

    def __init__(self, labels=None):
        self._raw = []
        self._events = None
        self._labels = {}
        self._t0 = self._t1 = None
        for t, name in (labels or {}).items():
            self.label(t, name)

    def label(self, thread, name):
        """Names the lane of an asyncs.Thread (or uid) in exports and plots."""
        uid = thread if isinstance(thread, int) else thread.uid
        self._labels[uid] = str(name)
        return self

    # -- recording

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        if self._t0 is not None:
            raise RuntimeError("this profile was already started; make a new one")
        with _lock:
            if not _open:
                _C._profile_records()  # discard records left from earlier use of the buffer
                _C._profile_enable(True)
            self._t0 = time.monotonic_ns()
            _open.append(self)

    def stop(self):
        with _lock:
            if self not in _open:
                return
            self._t1 = time.monotonic_ns()
            _drain_locked()
            _open.remove(self)
            if not _open:
                _C._profile_enable(False)
            # Keep only what was issued before stop (a later record belongs to
            # the profiles still open).
            t1 = self._t1
            self._raw = [r for r in self._raw if r[9] <= t1]

    # -- results

    @property
    def events(self):
        """The recorded instructions (Event objects) sorted by start time."""
        if self._t1 is None:
            raise RuntimeError("the profile is still open: read it after the with block")
        if self._events is None:
            self._events = sorted((Event(r) for r in self._raw),
                                  key=lambda e: (e.start_ns, e.end_ns))
        return self._events

    @property
    def start_ns(self):
        """When the profile started (time.monotonic_ns() clock); trace and
        timeline times count from here."""
        return self._t0

    @property
    def wall_ns(self):
        """From entering the block to the end of the last recorded instruction."""
        evs = self.events
        end = max([self._t1] + [e.end_ns for e in evs])
        return max(1, end - self._t0)

    def streams(self):
        """The stream keys seen, in lane order (by thread uid, then type)."""
        return sorted({e.stream for e in self.events}, key=lambda k: (k[2], k[0], k[1], k[3]))

    def stream_name(self, key):
        return stream_name(key, self._labels)

    def _tids(self):
        # tid = the thread uid for index-0 compute streams; other stream types
        # of the same uid get their own lane above 1000.
        tids = {}
        for key in self.streams():
            device, stype, uid, index = key
            tid = uid
            if stype != "compute" or index or device != "cpu":
                tid = 1000 * (1 + len(tids)) + uid
            tids[key] = tid
        return tids

    def export_chrome_trace(self, path):
        """Writes Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing):
        one complete ("X") event per instruction, ts/dur in microseconds from
        the start of the profile, tid = the stream's lane (its thread uid), and
        thread_name metadata naming each lane. Returns path."""
        evs = self.events
        pid = os.getpid()
        t0 = self._t0
        tids = self._tids()
        out = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                "args": {"name": f"eagervm (pid {pid})"}}]
        for key, tid in tids.items():
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                        "args": {"name": self.stream_name(key)}})
            out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                        "args": {"sort_index": tid}})
        for e in evs:
            args = {"site": e.site, "function": e.function, "seq": e.seq,
                    "queued_us": round((e.start_ns - e.issue_ns) / 1e3, 3)}
            if e.failed:
                args["failed"] = "failed" if e.failed == 1 else "skipped (poisoned input)"
            out.append({"ph": "X", "name": e.name, "cat": e.stream_type, "pid": pid,
                        "tid": tids[e.stream], "ts": round((e.start_ns - t0) / 1e3, 3),
                        "dur": round(e.duration_ns / 1e3, 3), "args": args})
        with open(path, "w") as f:
            json.dump({"traceEvents": out, "displayTimeUnit": "ms",
                       "otherData": {"producer": "eagervm.profiler",
                                     "instructions": len(evs)}}, f)
        return path

    def summary(self, limit=None):
        """A text table: per op name its count, total and mean time and share
        of the wall time (sorted by total); then per stream its instruction
        count, busy time and busy fraction of the wall time."""
        evs = self.events
        wall = self.wall_ns
        ops = {}
        for e in evs:
            s = ops.setdefault(e.name, [0, 0])
            s[0] += 1
            s[1] += e.duration_ns
        rows = sorted(ops.items(), key=lambda kv: -kv[1][1])
        if limit:
            rows = rows[:limit]
        w = max([len("op")] + [len(n) for n, _ in rows])
        lines = [f"eagervm profile: {len(evs)} instructions, wall {wall / 1e6:.3f} ms",
                 f"{'op':<{w}} {'count':>8} {'total ms':>10} {'mean us':>10} {'% wall':>7}"]
        for name, (n, tot) in rows:
            lines.append(f"{name:<{w}} {n:>8} {tot / 1e6:>10.3f} {tot / n / 1e3:>10.2f} "
                         f"{100.0 * tot / wall:>6.1f}%")
        lines.append("")
        busy = self.stream_busy()
        sw = max([len("stream")] + [len(self.stream_name(k)) for k in busy])
        lines.append(f"{'stream':<{sw}} {'count':>8} {'busy ms':>10} {'busy %':>7}")
        for key, (n, b) in busy.items():
            lines.append(f"{self.stream_name(key):<{sw}} {n:>8} {b / 1e6:>10.3f} "
                         f"{100.0 * b / wall:>6.1f}%")
        return "\n".join(lines)

    def stream_busy(self):
        """{stream key: (instruction count, busy ns)}, the busy time being the
        union of the stream's instruction intervals."""
        per = {}
        for e in self.events:
            per.setdefault(e.stream, []).append((e.start_ns, e.end_ns))
        out = {}
        for key in self.streams():
            iv = per[key]  # already sorted by start
            busy, cur_s, cur_e = 0, None, None
            for s, t in iv:
                if cur_e is None or s > cur_e:
                    if cur_e is not None:
                        busy += cur_e - cur_s
                    cur_s, cur_e = s, t
                elif t > cur_e:
                    cur_e = t
            if cur_e is not None:
                busy += cur_e - cur_s
            out[key] = (len(iv), busy)
        return out

    def plot_timeline(self, path, title=None, window=None, max_legend=12, width=14.0):
        """Draws the timeline as an image (PNG, SVG, ... by the file's suffix):
        one lane per stream, one bar per instruction coloured by op name, and a
        legend of the ops with the most time. window=(start_ms, end_ms), in ms
        since the profile started, draws only that span. Bars too narrow to
        see are drawn one pixel wide. Needs matplotlib (Debian:
        python3-matplotlib). Returns path."""
        try:
            import matplotlib
            matplotlib.use("Agg", force=False)
            import matplotlib.pyplot as plt
            from matplotlib.patches import Patch
        except ImportError as exc:
            raise ImportError(
                "eagervm.profiler.plot_timeline needs matplotlib: install it with "
                "'apt-get install python3-matplotlib' (or export_chrome_trace() and open "
                "the JSON in https://ui.perfetto.dev)") from exc
        evs = self.events
        keys = self.streams()
        t0 = self._t0
        lo_ms, hi_ms = window if window else (0.0, self.wall_ns / 1e6)
        if not hi_ms > lo_ms:
            raise ValueError(f"window must be (start_ms, end_ms) with end > start, not {window}")
        if window:
            lo_ns, hi_ns = t0 + lo_ms * 1e6, t0 + hi_ms * 1e6
            evs = [e for e in evs if e.end_ns >= lo_ns and e.start_ns <= hi_ns]
        dpi = 100
        min_w = (hi_ms - lo_ms) / (width * dpi)  # one pixel, in ms
        totals = {}
        for e in evs:
            totals[e.name] = totals.get(e.name, 0) + e.duration_ns
        named = [n for n, _ in sorted(totals.items(), key=lambda kv: -kv[1])][:max_legend]
        cmap = plt.get_cmap("tab20" if len(named) > 10 else "tab10")
        colours = {n: cmap(i % cmap.N) for i, n in enumerate(named)}
        other = (0.6, 0.6, 0.6, 1.0)
        lane = {k: i for i, k in enumerate(keys)}
        bars = {}
        for e in evs:
            s = (e.start_ns - t0) / 1e6
            d = max(e.duration_ns / 1e6, min_w)
            bars.setdefault((lane[e.stream], e.name if e.name in colours else None),
                            []).append((s, d))
        height = max(1.2 + 0.8 * max(1, len(keys)), 0.9 + 0.22 * (len(named) + 2))
        fig, ax = plt.subplots(figsize=(width, height), dpi=dpi)
        for (li, name), spans in bars.items():
            ax.broken_barh(spans, (li - 0.4, 0.8), facecolors=colours.get(name, other),
                           linewidth=0)
        ax.set_yticks(range(len(keys)))
        ax.set_yticklabels([self.stream_name(k) for k in keys])
        ax.set_ylim(-0.6, len(keys) - 0.4)
        ax.invert_yaxis()
        ax.set_xlim(lo_ms, hi_ms)
        ax.set_xlabel("time since the profile started (ms)")
        ax.set_title(title or f"eagervm timeline: {len(evs)} instructions, "
                              f"{hi_ms - lo_ms:.1f} ms")
        handles = [Patch(color=colours[n], label=n) for n in named]
        if len(totals) > len(named):
            handles.append(Patch(color=other, label="other"))
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0),
                  fontsize="small", title="op")
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        return path


# ------------------------------------------------- whole-process profiling

_env_profile = None


def _write_env_profile(path):
    global _env_profile
    p, _env_profile = _env_profile, None
    if p is None:
        return
    try:
        p.stop()
        p.export_chrome_trace(path)
        import sys
        print(f"eagervm: wrote the profile of this process to {path} "
              f"({len(p.events)} instructions)", file=sys.stderr)
    except Exception as exc:  # at exit: report, never crash
        import sys
        print(f"eagervm: could not write the profile to {path}: {exc}", file=sys.stderr)


def _start_from_env():
    """EAGERVM_PROFILE=path.json: profile the whole process, write at exit."""
    global _env_profile
    path = os.environ.get("EAGERVM_PROFILE")
    if not path or _env_profile is not None:
        return
    _env_profile = profile()
    _env_profile.start()
    # Registered after eagervm._C's own exit handler, so it runs before it.
    atexit.register(_write_env_profile, path)
