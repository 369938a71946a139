"""profile.plot_timeline read back as pixels: a lane's colours show how its
time was spent, every lane pixel is a legend colour or idle, and an op keeps
its colour across the pictures of one profile.

The pictures are PNGs read with PIL; where the lanes are comes from the
picture's own "eagervm.timeline" tEXt chunk (see plot_timeline)."""
import json
import os

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("matplotlib")
Image = pytest.importorskip("PIL.Image")

from eagervm import profiler  # noqa: E402
from eagervm.datasets import mnist  # noqa: E402
from test_mnist import load_example  # noqa: E402  (this folder is on sys.path under pytest)


# ------------------------------------------------------------------ helpers

def read(path):
    """(pixels as an int array (h, w, 3), the picture's layout dict)."""
    with Image.open(path) as im:
        meta = json.loads(im.text["eagervm.timeline"])
        rgb = np.asarray(im.convert("RGB")).astype(np.int64)
    assert list(rgb.shape[1::-1]) == meta["size"]
    return rgb, meta


def lane(rgb, meta, name):
    """The pixels (n, 3) of the lane whose name contains `name`."""
    boxes = [ln["box"] for ln in meta["lanes"] if name in ln["name"]]
    assert len(boxes) == 1, (name, meta["lanes"])
    x0, y0, x1, y1 = boxes[0]
    return rgb[y0:y1, x0:x1].reshape(-1, 3)


def share(px, colour):
    return float(np.all(px == colour, axis=1).mean())


def check_lane_colours(rgb, meta):
    """Every pixel of every lane is idle or a legend colour, and each legend
    colour is shown outside the lanes too (its swatch in the legend)."""
    allowed = np.array(list(meta["legend"].values()) + [meta["idle"]])
    outside = np.ones(rgb.shape[:2], bool)
    for ln in meta["lanes"]:
        x0, y0, x1, y1 = ln["box"]
        outside[y0:y1, x0:x1] = False
        px = rgb[y0:y1, x0:x1].reshape(-1, 3)
        known = (px[:, None, :] == allowed[None, :, :]).all(axis=2).any(axis=1)
        assert known.all(), (ln["name"], np.unique(px[~known], axis=0)[:5].tolist())
    rest = rgb[outside]
    for label, colour in meta["legend"].items():
        assert np.all(rest == colour, axis=1).sum() >= 20, f"no legend swatch for {label}"


def fake_profile(spans):
    """A finished profile of made-up instructions, spans = [(name, thread
    uid, start ns, end ns)] from the start of the profile."""
    p = profiler.profile()
    t0 = p._t0 = 10**12
    p._raw = [(name, "cpu", "compute", 0, uid, i, "x.py", 1, "f", t0 + s, t0 + s, t0 + e, 0)
              for i, (name, uid, s, e) in enumerate(spans)]
    p._t1 = t0 + max(e for _, _, _, e in spans)
    return p


# ------------------------------------------------------ the main job's profile

@pytest.fixture(scope="module")
def main_job(tmp_path_factory):
    """One profiled epoch of examples/fashion_mnist.py on 4096 real images,
    its full timeline and its zoomed one."""
    if not os.path.exists(os.path.join(mnist.FASHION_MNIST_ROOT, "t10k-labels-idx1-ubyte.gz")):
        pytest.skip("dataset-fashion-mnist is not installed")
    fm = load_example()
    x, y = mnist.load_fashion_mnist("test")  # the smaller file
    _, _, prof = fm.train(x[:4096], y[:4096], epochs=1, batch_size=128, profile_epoch=0,
                          progress=False)
    out = tmp_path_factory.mktemp("timeline")
    full = prof.plot_timeline(str(out / "timeline.png"), title="main job")
    zoom = fm.plot_zoom(prof, str(out / "timeline_zoom.png"))
    return prof, full, zoom


def test_main_job_training_lane_shows_matmul_share(main_job):
    prof, full, _ = main_job
    rgb, meta = read(full)
    key = [k for k in prof.streams() if "(training)" in prof.stream_name(k)][0]
    busy = prof.stream_busy()[key][1]
    mm = sum(e.duration_ns for e in prof.events if e.stream == key and e.name == "matmul")
    time_share = mm / busy
    px = lane(rgb, meta, "(training)")
    painted = ~np.all(px == meta["idle"], axis=1)
    pixel_share = float(np.all(px[painted] == meta["legend"]["matmul"], axis=1).mean())
    print(f"\ntraining lane: matmul {pixel_share:.1%} of the painted pixels, "
          f"{time_share:.1%} of the busy time ({mm / 1e6:.1f} of {busy / 1e6:.1f} ms); "
          f"painted {painted.mean():.1%} of the lane, busy {busy / prof.wall_ns:.1%} "
          f"of the wall time")
    assert abs(pixel_share - time_share) < 0.10
    assert abs(painted.mean() - busy / prof.wall_ns) < 0.10


def test_main_job_lanes_hold_only_legend_colours(main_job):
    _, full, zoom = main_job
    for path in (full, zoom):
        rgb, meta = read(path)
        assert "matmul" in meta["legend"]
        check_lane_colours(rgb, meta)


def test_main_job_an_op_keeps_its_colour_when_zoomed(main_job):
    prof, full, zoom = main_job
    _, a = read(full)
    _, b = read(zoom)
    # The zoom shows under a quarter of the epoch: counted in batches (the
    # steps that start inside its window), not in ms, which a stall of the
    # machine during those batches would stretch.
    lo, hi = b["window_ms"]
    assert a["window_ms"][0] <= lo < hi <= a["window_ms"][1]
    steps = [(e.start_ns - prof.start_ns) / 1e6 for e in prof.events if e.name == "cross_entropy"]
    inside = [t for t in steps if lo - 1e-3 <= t <= hi + 1e-3]
    assert 0 < len(inside) < len(steps) / 4
    common = set(a["legend"]) & set(b["legend"])
    # matmul and other named ops (which ones besides matmul fill the last
    # places of the top 12 varies from run to run: index_select, gt, sum).
    assert "matmul" in common and len(common - {"matmul", "other"}) >= 2
    for op in common:
        assert a["legend"][op] == b["legend"][op], op
    colours = prof.op_colours()
    for op, c in list(a["legend"].items()) + list(b["legend"].items()):
        if op != "other":
            assert tuple(c) == colours[op]


# ---------------------------------------------------------------- synthetic

def test_many_tiny_instructions_count_by_their_time(tmp_path):
    """20000 instructions of 8 us (big) and 2 us (small) after each other,
    then 10 us idle: a pixel column spans ~10 of them. Drawn one bar each
    (at least a pixel wide), the lane read as `small`, drawn last."""
    spans, t = [], 0
    for _ in range(10000):
        spans += [("big", 0, t, t + 8000), ("small", 0, t + 8000, t + 10000)]
        t += 20000
    prof = fake_profile(spans)
    rgb, meta = read(prof.plot_timeline(str(tmp_path / "tiny.png")))
    check_lane_colours(rgb, meta)
    assert set(meta["legend"]) == {"big", "small"}
    px = lane(rgb, meta, "thread 0")
    painted = ~np.all(px == meta["idle"], axis=1)
    big = share(px[painted], meta["legend"]["big"])
    print(f"\nsynthetic: big {big:.1%} of the painted pixels (80% of the busy time), "
          f"painted {painted.mean():.1%} of the lane (50% busy)")
    assert abs(big - 0.8) < 0.02
    assert abs(painted.mean() - 0.5) < 0.02


def test_colours_are_fixed_per_profile_not_per_window(tmp_path):
    """`a` has most of the time overall, `b` most of the window: the window
    used to rank `b` first and give it `a`'s colour."""
    spans = [("a", 0, 0, 900_000), ("b", 0, 900_000, 1_000_000), ("c", 0, 1_000_000, 1_010_000),
             ("b", 0, 1_010_000, 1_060_000), ("a", 0, 1_060_000, 1_070_000)]
    prof = fake_profile(spans)
    _, whole = read(prof.plot_timeline(str(tmp_path / "whole.png")))
    rgb, part = read(prof.plot_timeline(str(tmp_path / "part.png"), window=(0.95, 1.07)))
    check_lane_colours(rgb, part)
    assert set(whole["legend"]) == {"a", "b", "c"} == set(part["legend"])
    for op in "abc":
        assert whole["legend"][op] == part["legend"][op]
    assert len({tuple(c) for c in whole["legend"].values()}) == 3
    # only what is painted is in the legend
    _, only_a = read(prof.plot_timeline(str(tmp_path / "a.png"), window=(0.1, 0.8)))
    assert set(only_a["legend"]) == {"a"}


def test_ops_beyond_the_palette_are_other(tmp_path):
    spans = [(f"op{i:02d}", i % 2, 1000 * i, 1000 * i + 900 - 10 * i) for i in range(30)]
    prof = fake_profile(spans)
    rgb, meta = read(prof.plot_timeline(str(tmp_path / "many.png"), max_legend=5))
    check_lane_colours(rgb, meta)
    assert list(meta["legend"]) == ["op00", "op01", "op02", "op03", "op04", "other"]
    rgb, meta = read(prof.plot_timeline(str(tmp_path / "most.png"), max_legend=99))
    check_lane_colours(rgb, meta)
    assert len(meta["legend"]) == len(profiler.TIMELINE_PALETTE) + 1
    colours = {tuple(c) for c in meta["legend"].values()}
    assert len(colours) == len(meta["legend"])  # all distinct, other included
    assert tuple(meta["idle"]) not in colours


def test_overlapping_instructions_count_once(tmp_path):
    """On one stream, instructions that overlap paint their union."""
    spans = []
    for k in range(2000):
        t = 10_000 * k
        spans += [("x", 0, t, t + 4000), ("y", 0, t + 1000, t + 5000)]  # union 5 of 10 us
    prof = fake_profile(spans)
    rgb, meta = read(prof.plot_timeline(str(tmp_path / "overlap.png")))
    px = lane(rgb, meta, "thread 0")
    painted = ~np.all(px == meta["idle"], axis=1)
    assert abs(painted.mean() - 0.5) < 0.02
    assert abs(share(px[painted], meta["legend"]["x"]) - 0.8) < 0.02  # overlap goes to x


def test_lane_raster_columns():
    """Four columns of 10 ns, 10 pixels high: full op 0; half op 1; op 0
    for 3 ns and op 1 for 7 ns; idle."""
    s = np.array([0.0, 10.0, 20.0, 23.0])
    e = np.array([10.0, 15.0, 23.0, 30.0])
    c = np.array([0, 1, 0, 1])
    idx = profiler._lane_raster(s, e, c, 2, 0.0, 40.0, 4, 10)
    assert idx.shape == (10, 4)
    col = [list(idx[::-1, j]) for j in range(4)]  # bottom-up
    assert col[0] == [0] * 10
    assert col[1] == [1] * 5 + [2] * 5
    assert col[2] == [0] * 3 + [1] * 7
    assert col[3] == [2] * 10


@pytest.mark.parametrize("width,lanes", [(6.0, 1), (9.87, 2), (14.0, 3), (23.45, 2)])
def test_lane_boxes_are_exact(tmp_path, width, lanes):
    """The boxes the picture reports are where its lanes are, to the pixel,
    whatever the size: fully busy lanes fill their boxes and nothing more."""
    spans = [(f"op{u}", u, 0, 1_000_000) for u in range(lanes)]
    prof = fake_profile(spans)
    rgb, meta = read(prof.plot_timeline(str(tmp_path / "busy.png"), width=width))
    check_lane_colours(rgb, meta)
    assert len(meta["lanes"]) == lanes
    for u, ln in enumerate(meta["lanes"]):
        x0, y0, x1, y1 = ln["box"]
        colour = meta["legend"][f"op{u}"]
        assert np.all(rgb[y0:y1, x0:x1] == colour)
        for edge in (rgb[y0 - 1, x0:x1], rgb[y1, x0:x1], rgb[y0:y1, x0 - 1], rgb[y0:y1, x1]):
            assert not np.all(edge == colour, axis=1).any()
