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
        self._op_rank = None  # op names by total time, for op_colours()
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

    def op_colours(self, max_legend=12):
        """{op name: (r, g, b)} (0..255): the colours of the timeline. They
        are fixed for the profile: the op ranked i-th by total time over the
        whole profile gets palette colour i, whichever window is drawn; the
        ops below the first max_legend (at most 18, the palette's size) are
        not in the map and are drawn in TIMELINE_OTHER."""
        if self._op_rank is None:
            totals = {}
            for e in self.events:
                totals[e.name] = totals.get(e.name, 0) + e.duration_ns
            self._op_rank = [n for n, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))]
        n = max(0, min(int(max_legend), len(TIMELINE_PALETTE)))
        return {name: TIMELINE_PALETTE[i] for i, name in enumerate(self._op_rank[:n])}

    def plot_timeline(self, path, title=None, window=None, max_legend=12, width=14.0):
        """Draws the timeline as an image (PNG, SVG, ... by the file's suffix):
        one lane per stream, time left to right. window=(start_ms, end_ms), in
        ms since the profile started, draws only that span. max_legend: how
        many ops get a colour of their own (at most 18). width: the picture's
        width in inches at 100 dpi. Needs matplotlib (Debian:
        python3-matplotlib). Returns path.

        Each pixel column of a lane is one time span of (end - start) / width
        pixels, drawn as a stacked bar: its painted height is the share of the
        span the stream was busy (the union of its instructions), split among
        the ops in proportion to their time in the span, bottom-up in the order
        of the legend; the rest of the column is idle (TIMELINE_IDLE). So the
        share of a lane's painted pixels in an op's colour is that op's share
        of the lane's busy time, up to rounding, however short the
        instructions. (One bar per instruction instead makes thousands of
        sub-pixel bars overdraw each other, and the lane shows the colour of
        whatever was drawn last.) The lanes are pasted in unresampled, so
        every pixel in a lane is exactly a legend colour or the idle colour.

        Colours come from op_colours(max_legend): the same op has the same
        colour in every picture of this profile; the rest share "other". The
        legend lists the ops painted in this picture.

        A PNG carries where the lanes are, in a tEXt chunk "eagervm.timeline"
        (JSON): {"window_ms": [lo, hi], "size": [w, h], "plot": box,
        "lanes": [{"name", "box"}], "legend": {label: [r, g, b]},
        "idle": [r, g, b]}, a box being [x0, y0, x1, y1] in image pixels from
        the top left, ends exclusive (read it with PIL: Image.open(p).text)."""
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
        import numpy as np
        evs = self.events
        keys = self.streams()
        t0 = self._t0
        lo_ms, hi_ms = window if window else (0.0, self.wall_ns / 1e6)
        if not hi_ms > lo_ms:
            raise ValueError(f"window must be (start_ms, end_ms) with end > start, not {window}")
        if window:
            lo_ns, hi_ns = t0 + lo_ms * 1e6, t0 + hi_ms * 1e6
            evs = [e for e in evs if e.end_ns >= lo_ns and e.start_ns <= hi_ns]
        colours = self.op_colours(max_legend)
        named = list(colours)
        code = {n: i for i, n in enumerate(named)}
        other = len(named)  # the code of "other"; idle is other + 1
        pal = np.array([colours[n] for n in named] + [TIMELINE_OTHER, TIMELINE_IDLE], np.uint8)

        # Layout, in whole pixels: the text is set first and measured, then
        # the plot area is placed so that its columns are the raster's.
        dpi = 100
        fig_w = max(200, int(round(width * dpi)))
        fig = plt.figure(figsize=(fig_w / dpi, 6), dpi=dpi)
        try:
            ax = fig.add_axes([0.3, 0.2, 0.3, 0.6])
            ax.set_xlim(lo_ms, hi_ms)
            ax.set_yticks(range(len(keys)))
            ax.set_yticklabels([self.stream_name(k) for k in keys])
            ax.set_xlabel("time since the profile started (ms)")
            ax.set_title(title or f"eagervm timeline: {len(evs)} instructions, "
                                  f"{hi_ms - lo_ms:.1f} ms")
            # The legend's entries are known only after painting; measure the
            # tallest and widest it can be (all named ops, other, idle).
            def legend(labels):
                hs = [Patch(facecolor=np.array(c) / 255, edgecolor="none", label=n)
                      for n, c in labels]
                hs.append(Patch(facecolor=np.array(TIMELINE_IDLE) / 255, edgecolor="0.6",
                                linewidth=0.5, label="idle"))
                return ax.legend(handles=hs, loc="upper left", bbox_to_anchor=(1.0, 1.0),
                                 fontsize="small", title="op")
            leg = legend([(n, colours[n]) for n in named] + [("other", TIMELINE_OTHER)])
            renderer = fig.canvas.get_renderer()
            axbox = ax.get_window_extent(renderer)
            # for_layout_only: a title wider than this provisional axes does not
            # count sideways (only its height does).
            tight = ax.get_tightbbox(renderer, for_layout_only=True)
            legbox = leg.get_window_extent(renderer)
            pad = 10
            left = int(np.ceil(axbox.x0 - tight.x0)) + pad
            right = int(np.ceil(tight.x1 - axbox.x1)) + pad
            top = int(np.ceil(tight.y1 - axbox.y1)) + pad
            bottom = int(np.ceil(axbox.y0 - tight.y0)) + pad
            nlanes = len(keys)
            gap, lane_min = 16, 80
            lane_h = max(lane_min, int((legbox.height - (nlanes + 1) * gap) // max(1, nlanes)))
            # At least as tall as the legend (which hangs from its top), so the
            # legend is never cut off, even with no lane.
            plot_h = max(nlanes * lane_h + (nlanes + 1) * gap, int(np.ceil(legbox.height)))
            plot_w = max(100, fig_w - left - right)
            fig_w = left + plot_w + right
            fig_h = top + plot_h + bottom
            # Agg makes a canvas of int(inches * dpi) pixels, and 2.03 * 100 is
            # 202.99...: a quarter pixel more keeps the sizes whole.
            fw, fh = fig_w + 0.25, fig_h + 0.25
            fig.set_size_inches(fw / dpi, fh / dpi)
            ax.set_position([left / fw, bottom / fh, plot_w / fw, plot_h / fh])
            ax.set_ylim(plot_h, 0)  # y in pixels from the top of the plot area
            ax.set_yticks([gap + i * (lane_h + gap) + lane_h / 2 for i in range(nlanes)])
            ax.set_yticklabels([self.stream_name(k) for k in keys])
            ax.tick_params(axis="y", length=0)

            # Paint each lane.
            lo_rel, hi_rel = lo_ms * 1e6, hi_ms * 1e6
            per = {k: ([], [], []) for k in keys}
            for e in evs:
                s, t, c = per[e.stream]
                s.append(e.start_ns - t0)
                t.append(e.end_ns - t0)
                c.append(code.get(e.name, other))
            used = np.zeros(len(pal), bool)
            lanes = []
            for i, key in enumerate(keys):
                s, t, c = per[key]
                idx = _lane_raster(np.array(s, np.float64), np.array(t, np.float64),
                                   np.array(c, np.int64), other + 1, lo_rel, hi_rel,
                                   plot_w, lane_h)
                used[np.unique(idx)] = True
                y0 = top + gap + i * (lane_h + gap)
                # origin="upper": row 0 of the array is the lane's top row; yo
                # counts from the bottom of the figure. zorder: above the frame.
                fig.figimage(pal[idx], xo=left, yo=fig_h - y0 - lane_h, origin="upper", zorder=5)
                lanes.append({"name": self.stream_name(key), "box": [left, y0, left + plot_w,
                                                                     y0 + lane_h]})
            leg.remove()
            shown = [(n, colours[n]) for n in named if used[code[n]]]
            if used[other]:
                shown.append(("other", TIMELINE_OTHER))
            legend(shown)
            meta = {"window_ms": [lo_ms, hi_ms], "size": [fig_w, fig_h],
                    "plot": [left, top, left + plot_w, top + plot_h], "lanes": lanes,
                    "legend": {n: list(c) for n, c in shown}, "idle": list(TIMELINE_IDLE)}
            png = str(path).lower().endswith(".png")
            fig.savefig(path, dpi=dpi,
                        metadata={"eagervm.timeline": json.dumps(meta)} if png else None)
        finally:
            plt.close(fig)
        return path


# The timeline's colours (0..255). tab20 without its two greys, its nine
# strong colours first so that the ops with the most time differ most; other
# is tab20's grey, idle a light grey: neither is in the palette.
TIMELINE_PALETTE = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40),
                    (148, 103, 189), (140, 86, 75), (227, 119, 194), (188, 189, 34),
                    (23, 190, 207), (174, 199, 232), (255, 187, 120), (152, 223, 138),
                    (255, 152, 150), (197, 176, 213), (196, 156, 148), (247, 182, 210),
                    (219, 219, 141), (158, 218, 229)]
TIMELINE_OTHER = (127, 127, 127)
TIMELINE_IDLE = (240, 240, 240)


def _lane_raster(starts, ends, codes, ncodes, lo, hi, width, height):
    """The picture of one lane as op codes, an int array (height, width):
    codes[i] is the code (0..ncodes-1) of the instruction running from
    starts[i] to ends[i] (sorted by start); ncodes stands for idle. Column j
    covers [lo + j * dt, lo + (j + 1) * dt), dt = (hi - lo) / width."""
    import numpy as np
    # Count overlapping instructions by their union: each one starts no
    # earlier than the latest end before it (the overlap goes to the earlier
    # one), which leaves disjoint intervals, still sorted.
    if len(starts):
        prev_end = np.concatenate(([-np.inf], np.maximum.accumulate(ends)[:-1]))
        starts = np.maximum(starts, prev_end)
    starts, ends = np.clip(starts, lo, hi), np.clip(ends, lo, hi)
    keep = ends > starts
    starts, ends, codes = starts[keep], ends[keep], codes[keep]
    # time[c, j]: op c's time in column j, from F_c(t) = op c's time before t.
    edges = np.linspace(lo, hi, width + 1)
    time = np.zeros((ncodes, width))
    for c in np.unique(codes):
        m = codes == c
        s, e = starts[m], ends[m]
        before = np.concatenate(([0.0], np.cumsum(e - s)))
        i = np.searchsorted(s, edges, side="right") - 1
        ic = np.maximum(i, 0)
        f = np.where(i >= 0, before[ic] + np.clip(edges - s[ic], 0.0, e[ic] - s[ic]), 0.0)
        time[c] = np.maximum(np.diff(f), 0.0)
    busy = time.sum(axis=0)
    dt = (hi - lo) / width
    painted = np.floor(np.minimum(busy / dt, 1.0) * height + 0.5).astype(np.int64)
    # Split each column's painted pixels by largest remainder.
    quota = time * np.where(busy > 0, painted / np.where(busy > 0, busy, 1.0), 0.0)
    px = np.floor(quota).astype(np.int64)
    short = painted - px.sum(axis=0)
    order = np.argsort(-(quota - px), axis=0, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(ncodes)[:, None], axis=0)
    px += rank < short[None, :]
    # Stack bottom-up in code order: row y (from the bottom) shows the first
    # code whose running top is above y.
    tops = np.cumsum(px, axis=0)
    rows = np.arange(height)[:, None, None]
    idx = (tops[None, :, :] <= rows).sum(axis=1)
    return idx[::-1]


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
