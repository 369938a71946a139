"""eagervm.save / eagervm.load (python/eagervm/serialization.py): round trips
of every dtype and layout, nested state dicts, files written by hand per the
safetensors spec, every kind of corrupt file, argument errors, the atomic
write, and (where the safetensors package is found) round trips both ways
with safetensors.numpy and safetensors.torch."""
import functools
import json
import math
import os
import pathlib
import re
import struct
import subprocess
import sys
import textwrap

import pytest

import eagervm as ev

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYPATH = os.path.dirname(os.path.dirname(os.path.abspath(ev.__file__)))

# One value list per dtype, with its extremes (and float specials).
VALUES = {
    ev.bool: [True, False, True],
    ev.uint8: [0, 1, 255],
    ev.int8: [-128, 0, 127],
    ev.int16: [-32768, 1, 32767],
    ev.int32: [-2**31, 5, 2**31 - 1],
    ev.int64: [-2**63, 7, 2**63 - 1],
    ev.float32: [1.5, -0.0, math.inf, -math.inf, math.nan, 2.0**-149, 3.4028234663852886e38],
    ev.float64: [1.5, -0.0, math.inf, -math.inf, math.nan, 5e-324, 1.7976931348623157e308],
}
# safetensors name, struct format of one element.
ST = {ev.bool: ("BOOL", "?"), ev.uint8: ("U8", "B"), ev.int8: ("I8", "b"),
      ev.int16: ("I16", "h"), ev.int32: ("I32", "i"), ev.int64: ("I64", "q"),
      ev.float32: ("F32", "f"), ev.float64: ("F64", "d")}


def raw(t):
    """t's bytes in C order (exact: NaN and -0.0 compare as they are)."""
    return bytes(memoryview(t))


def same(a, b):
    assert isinstance(b, ev.Tensor)
    assert a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape)
    assert raw(a) == raw(b)


def read_header(path):
    data = pathlib.Path(path).read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    return n, json.loads(data[8:8 + n]), data[8 + n:]


def write_file(path, header, data=b"", pad=True, header_bytes=None, length=None):
    """A safetensors file written by hand, per the spec."""
    hb = header_bytes if header_bytes is not None else json.dumps(header).encode()
    if pad:
        hb += b" " * (-len(hb) % 8)
    pathlib.Path(path).write_bytes(struct.pack("<Q", len(hb) if length is None else length) +
                                   hb + data)
    return path


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


# ------------------------------------------------------------ round trips

@pytest.mark.parametrize("dtype", list(VALUES), ids=lambda d: d.name)
def test_every_dtype_round_trips(tmp_path, dtype):
    t = ev.tensor(VALUES[dtype], dtype=dtype)
    p = tmp_path / "t.safetensors"
    ev.save({"x": t, "m": t.reshape(1, -1)}, p)
    out = ev.load(p)
    assert list(out) == ["x", "m"]
    same(t, out["x"])
    same(t.reshape(1, -1), out["m"])
    n, header, data = read_header(p)
    assert header["x"]["dtype"] == ST[dtype][0]
    fmt = "<%d%s" % (len(VALUES[dtype]), ST[dtype][1])
    begin, end = header["x"]["data_offsets"]
    assert data[begin:end] == struct.pack(fmt, *VALUES[dtype])  # little-endian, as the spec


@pytest.mark.parametrize("dtype", list(VALUES), ids=lambda d: d.name)
def test_zero_d_and_empty_round_trip(tmp_path, dtype):
    v = VALUES[dtype][0]
    cases = {"scalar": ev.tensor(v, dtype=dtype), "e0": ev.empty(0, dtype=dtype),
             "e03": ev.zeros(0, 3, dtype=dtype), "e302": ev.zeros(3, 0, 2, dtype=dtype),
             "one": ev.tensor([v], dtype=dtype)}
    ev.save(cases, tmp_path / "z.safetensors")
    out = ev.load(tmp_path / "z.safetensors")
    for k, t in cases.items():
        same(t, out[k])
    assert out["scalar"].shape == () and out["scalar"].item() == cases["scalar"].item()


def test_a_lone_tensor_and_a_large_one(tmp_path):
    big = ev.arange(3_000_017, dtype=ev.float64) * 0.5 - 7  # not a multiple of any width
    ev.save(big, tmp_path / "big.safetensors")
    out = ev.load(tmp_path / "big.safetensors")
    same(big, out)
    assert out[-1].item() == (3_000_016 * 0.5 - 7)
    ev.save(ev.tensor(2.5), tmp_path / "s.safetensors")
    same(ev.tensor(2.5), ev.load(tmp_path / "s.safetensors"))


def test_views_are_written_in_c_order(tmp_path):
    x = ev.arange(120, dtype=ev.int32).reshape(2, 3, 4, 5)
    views = {
        "row": x[1, 2], "cols": x[:, :, 1], "step": x[..., ::2], "flip": x[::-1],
        "neg": x[:, ::-1, :, ::-2], "perm": x.permute(3, 1, 0, 2), "T": x[0, 0].T,
        "bcast": ev.tensor([1.0, 2.0]).expand(3, 2), "elem": x[1, 2, 3, 4],
        "same0": x[0], "same1": x[0],  # two names of one storage: written twice
    }
    ev.save(views, tmp_path / "v.safetensors")
    out = ev.load(tmp_path / "v.safetensors")
    for k, v in views.items():
        assert out[k].tolist() == v.tolist(), k
        assert out[k].is_contiguous()
        same(v.contiguous(), out[k])
    _, header, data = read_header(tmp_path / "v.safetensors")
    assert header["same0"]["data_offsets"] != header["same1"]["data_offsets"]
    assert len(data) == sum(t.numel() * t.dtype.itemsize for t in views.values())
    # The loaded tensors are independent of each other.
    out["same0"].add_(1)
    assert out["same1"].tolist() == x[0].tolist()


def test_save_waits_for_pending_work(tmp_path):
    a = ev.ones(512, 512)
    for _ in range(20):
        a = a * 1.5 + 1  # queued; save must read the finished values
    expect = a.tolist()
    ev.save({"a": a}, tmp_path / "p.safetensors")
    assert ev.load(tmp_path / "p.safetensors")["a"].tolist() == expect


def test_loaded_tensors_take_part_in_ops(tmp_path):
    ev.save({"w": ev.ones(3, 4), "b": ev.arange(4.0)}, tmp_path / "m.safetensors")
    m = ev.load(tmp_path / "m.safetensors")
    y = ev.ones(2, 3) @ m["w"] + m["b"]
    assert y.tolist() == [[3.0, 4.0, 5.0, 6.0]] * 2
    m["w"].mul_(2)  # a loaded tensor owns its memory: writable
    assert m["w"].sum().item() == 24.0


# ------------------------------------------------------------ structures

def optimizer_state(w):
    return {"state": {0: {"step": 3, "momentum_buffer": w * 0.5},
                      1: {"step": 3, "momentum_buffer": None}},
            "param_groups": [{"lr": 0.1, "momentum": 0.9, "nesterov": False,
                              "weight_decay": 0.0, "params": [0, 1], "name": None}]}


def deep_equal(a, b):
    assert type(a) is type(b), (a, b)
    if isinstance(a, ev.Tensor):
        same(a, b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        assert [type(k) for k in a] == [type(k) for k in b]
        for k in a:
            deep_equal(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            deep_equal(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b
        if isinstance(a, float):
            assert math.copysign(1, a) == math.copysign(1, b)


def test_optimizer_state_dict_round_trips(tmp_path):
    sd = optimizer_state(ev.ones(2, 3))
    ev.save(sd, tmp_path / "o.safetensors")
    deep_equal(sd, ev.load(tmp_path / "o.safetensors"))
    _, header, _ = read_header(tmp_path / "o.safetensors")
    # The tensors are entries under dotted names, readable by any reader.
    assert set(header) == {"__metadata__", "state.0.momentum_buffer"}


def test_checkpoint_of_model_and_optimizer(tmp_path):
    model = {"0.weight": ev.ones(4, 3), "0.bias": ev.zeros(4), "2.weight": ev.ones(1, 4)}
    ckpt = {"model": model, "optim": optimizer_state(model["0.weight"]), "epoch": 7,
            "loss": 0.125, "tag": "run-ü", "history": [(1, 0.5), (2, 0.25)]}
    ev.save(ckpt, tmp_path / "c.safetensors")
    deep_equal(ckpt, ev.load(tmp_path / "c.safetensors"))
    _, header, _ = read_header(tmp_path / "c.safetensors")
    assert {"model.0.weight", "model.0.bias", "model.2.weight",
            "optim.state.0.momentum_buffer"} <= set(header)


def test_scalar_leaves_and_containers_round_trip(tmp_path):
    obj = [None, True, False, 0, -1, 2**100, -(2**70), 0.1, -0.0, math.inf, -math.inf,
           math.nan, 1e-310, "", "a.b", "ü ∑ 😀", {}, [], (),
           {5: [ev.tensor(1)], -2: (ev.ones(0),)}, ({"x": ({"y": [ev.tensor([True])]},)},)]
    ev.save(obj, tmp_path / "s.safetensors")
    deep_equal(obj, ev.load(tmp_path / "s.safetensors"))
    for root in ({}, [], (), {"a": {}}, {"k": 1}):
        ev.save(root, tmp_path / "r.safetensors")
        deep_equal(root, ev.load(tmp_path / "r.safetensors"))


def test_flat_dict_has_exactly_its_keys(tmp_path):
    sd = {"b.weight": ev.ones(2), "a": ev.zeros(3, dtype=ev.int8), "": ev.tensor(1.0),
          "with space/and:colon": ev.tensor([1], dtype=ev.int64)}
    ev.save(sd, tmp_path / "f.safetensors")
    n, header, data = read_header(tmp_path / "f.safetensors")
    assert list(header) == list(sd)  # no metadata, no renaming, in the dict's order
    assert n % 8 == 0
    deep_equal(sd, ev.load(tmp_path / "f.safetensors"))
    # Wider dtypes first in the data, so each tensor is aligned to its element size.
    for name, info in header.items():
        assert (8 + n + info["data_offsets"][0]) % sd[name].dtype.itemsize == 0


def test_file_layout_matches_the_spec(tmp_path):
    ev.save({"a": ev.tensor([1.0, 2.0]), "b": ev.tensor([3], dtype=ev.int8)},
            tmp_path / "l.safetensors")
    data = (tmp_path / "l.safetensors").read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    assert n % 8 == 0 and data[8:9] == b"{"
    assert data[8:8 + n].rstrip(b" ") == json.dumps(
        {"a": entry("F32", [2], 0, 8), "b": entry("I8", [1], 8, 9)},
        separators=(",", ":")).encode()
    assert data[8 + n:] == struct.pack("<2fb", 1.0, 2.0, 3)


def test_ordered_dict_and_subclasses_are_saved_as_their_base(tmp_path):
    import collections
    Point = collections.namedtuple("Point", "x y")
    obj = collections.OrderedDict([("p", Point(1, ev.ones(1))), ("l", [1])])
    ev.save(obj, tmp_path / "o.safetensors")
    out = ev.load(tmp_path / "o.safetensors")
    assert type(out) is dict and type(out["p"]) is tuple and out["p"][0] == 1
    same(ev.ones(1), out["p"][1])


def test_paths_of_every_kind(tmp_path):
    t = ev.ones(2)
    ev.save(t, str(tmp_path / "s.safetensors"))
    same(t, ev.load(str(tmp_path / "s.safetensors")))
    ev.save(t, os.fsencode(tmp_path / "b.safetensors"))
    same(t, ev.load(os.fsencode(tmp_path / "b.safetensors")))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        ev.save(t, "rel.safetensors")  # a bare name: the temporary file goes in "."
        same(t, ev.load("rel.safetensors"))
    finally:
        os.chdir(cwd)


# ------------------------------------------------------------ the write

def listing(d):
    return sorted(os.listdir(d))


def test_save_replaces_a_file_whole(tmp_path):
    p = tmp_path / "c.safetensors"
    ev.save({"a": ev.ones(3)}, p)
    ev.save({"b": ev.zeros(2)}, p)
    assert list(ev.load(p)) == ["b"]
    assert listing(tmp_path) == ["c.safetensors"]
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(p).st_mode & 0o777 == 0o666 & ~umask  # as open() would make it


def test_save_keeps_the_mode_of_the_file_it_replaces_and_writes_through_links(tmp_path):
    p = tmp_path / "c.safetensors"
    ev.save({"a": ev.ones(3)}, p)
    os.chmod(p, 0o640)
    ev.save({"a": ev.ones(4)}, p)
    assert os.stat(p).st_mode & 0o777 == 0o640 and ev.load(p)["a"].shape == (4,)
    link = tmp_path / "latest.safetensors"
    link.symlink_to(p.name)
    ev.save({"b": ev.ones(1)}, link)
    assert link.is_symlink() and list(ev.load(p)) == ["b"]
    assert listing(tmp_path) == ["c.safetensors", "latest.safetensors"]


def issue_failing_op():
    return ev.tensor([1, 2]) ** -1  # fails in its kernel: integers to a negative power


def test_a_failed_write_leaves_no_file(tmp_path):
    p = tmp_path / "c.safetensors"
    good = ev.arange(100_000)  # int64, written before the failing tensor
    with pytest.raises(ValueError, match="pow"):
        ev.save({"good": good, "bad": issue_failing_op()}, p)
    assert listing(tmp_path) == []
    # An existing checkpoint stays as it was.
    ev.save({"old": ev.ones(2)}, p)
    before = p.read_bytes()
    with pytest.raises(ValueError, match="pow"):
        ev.save({"good": good, "bad": issue_failing_op()}, p)
    assert p.read_bytes() == before and listing(tmp_path) == ["c.safetensors"]
    ev.synchronize()


def test_a_write_interrupted_midway_leaves_no_file(tmp_path, monkeypatch):
    from eagervm import serialization
    calls = []
    real = serialization._write_tensor

    def write_then_fail(f, t, nbytes):
        if calls:
            raise KeyboardInterrupt  # e.g. Ctrl-C in the middle of the data
        calls.append(1)
        real(f, t, nbytes)

    monkeypatch.setattr(serialization, "_write_tensor", write_then_fail)
    with pytest.raises(KeyboardInterrupt):
        ev.save({"a": ev.ones(1000), "b": ev.ones(1000)}, tmp_path / "c.safetensors")
    assert calls and listing(tmp_path) == []


def test_save_errors_name_the_problem_and_write_nothing(tmp_path):
    p = tmp_path / "c.safetensors"
    t = ev.ones(2)
    cycle = [t]
    cycle.append(cycle)
    deep = [t]
    for _ in range(100_000):
        deep = [deep]
    cases = [
        (TypeError, r"path must be a str or os.PathLike, not int", t, 3),
        (TypeError, r"path must be a str or os.PathLike, not NoneType", t, None),
        (TypeError, r"obj\['state'\]\[0\]\['step'\] is a builtins.object",
         {"state": {0: {"step": object()}}}, p),
        (TypeError, r"obj\[1\] is a builtins.bytes", [t, b"x"], p),
        (TypeError, r"obj\['a'\] is a builtins.set", {"a": {1}}, p),
        (TypeError, r"obj\['a'\] has the key 1.5 of type float", {"a": {1.5: t}}, p),
        (TypeError, r"obj has the key True of type bool", {True: t}, p),
        (TypeError, r"obj has the key \(1, 2\) of type tuple", {(1, 2): t}, p),
        (TypeError, r"obj has the key None", {None: 1}, p),
        (ValueError, r"obj\['a.b'\] and obj\['a'\]\['b'\] would both be stored as 'a.b'",
         {"a.b": t, "a": {"b": t}}, p),
        (ValueError, r"obj\[0\] and obj\['0'\] would both be stored as '0'", {0: t, "0": t}, p),
        (ValueError, r"obj\['__metadata__'\] would be stored as '__metadata__'",
         {"__metadata__": t}, p),
        (ValueError, r"obj\['__metadata__'\] would be stored as '__metadata__'",
         {"__metadata__": t, "n": 1}, p),
        (ValueError, r"obj\[1\] contains itself", cycle, p),
        (ValueError, r"obj is nested too deeply", deep, p),
        (ValueError, r"not valid UTF-8", {"\udc80": t}, p),
        (ValueError, r"obj\['s'\] is not valid UTF-8", {"s": "\udc80"}, p),
    ]
    for exc, match, obj, path in cases:
        with pytest.raises(exc, match=match):
            ev.save(obj, path)
    assert listing(tmp_path) == []
    with pytest.raises(IsADirectoryError):
        ev.save(t, tmp_path)
    with pytest.raises(FileNotFoundError) as e:
        ev.save(t, tmp_path / "no" / "such.safetensors")
    assert str(tmp_path / "no" / "such.safetensors") in str(e.value)  # not the temporary name
    assert listing(tmp_path) == []


# ------------------------------------------------------------ files by hand

def test_reads_a_file_written_by_hand(tmp_path):
    # Every dtype, the header in another order than the data, an empty
    # tensor between two others, foreign metadata and no padding.
    parts, header, at = [], {}, 0
    for dtype in reversed(list(VALUES)):
        name, fmt = ST[dtype]
        blob = struct.pack("<%d%s" % (len(VALUES[dtype]), fmt), *VALUES[dtype])
        header[name.lower()] = entry(name, [len(VALUES[dtype])], at, at + len(blob))
        parts.append(blob)
        at += len(blob)
        if dtype is ev.int64:
            header["empty"] = entry("F32", [2, 0], at, at)
    header = dict(reversed(list(header.items())))
    header["__metadata__"] = {"format": "pt"}
    p = write_file(tmp_path / "h.safetensors", header, b"".join(parts), pad=False)
    out = ev.load(p)
    assert list(out) == [k for k in header if k != "__metadata__"]
    for dtype in VALUES:
        same(ev.tensor(VALUES[dtype], dtype=dtype), out[ST[dtype][0].lower()])
    assert out["empty"].shape == (2, 0) and out["empty"].dtype is ev.float32


def test_reads_padding_zero_d_and_an_empty_file(tmp_path):
    hb = json.dumps({"s": entry("F64", [], 0, 8), "__metadata__": None}).encode() + b"   \n\t "
    p = write_file(tmp_path / "p.safetensors", None, struct.pack("<d", 2.5), pad=False,
                   header_bytes=hb)
    out = ev.load(p)
    assert out["s"].shape == () and out["s"].item() == 2.5
    assert ev.load(write_file(tmp_path / "e.safetensors", {})) == {}
    assert ev.load(write_file(tmp_path / "e2.safetensors", {}, pad=False)) == {}


# ------------------------------------------------------------ corrupt files

def good_file(path):
    """A valid file of two tensors (24 + 2 bytes of data)."""
    return write_file(path, {"a": entry("F32", [2, 3], 0, 24), "m": entry("BOOL", [2], 24, 26)},
                      struct.pack("<6f", *range(6)) + b"\x01\x00")


def test_good_file_loads(tmp_path):
    out = ev.load(good_file(tmp_path / "g.safetensors"))
    assert out["a"].tolist() == [[0, 1, 2], [3, 4, 5]] and out["m"].tolist() == [True, False]


def corrupt(tmp_path, name, header=None, data=b"", **kw):
    return write_file(tmp_path / name, header, data, **kw)


F6 = struct.pack("<6f", *range(6))
CORRUPT = [
    # (name, match, how to write it)
    ("empty", r"has 0 bytes, fewer than the 8", lambda p: p.write_bytes(b"")),
    ("short", r"has 5 bytes, fewer than the 8", lambda p: p.write_bytes(b"\x10\0\0\0\0")),
    ("hdr-past-end", r"header's length is 4,000 bytes, but the file has 16 after it \(truncated",
     lambda p: p.write_bytes(struct.pack("<Q", 4000) + b'{"a":1}' + b" " * 9)),
    ("hdr-huge", r"header's length is 18,446,744,073,709,551,615 bytes, over the format's limit",
     lambda p: p.write_bytes(b"\xff" * 8 + b"{}")),
    ("hdr-100mb", r"over the format's limit of 100,000,000",
     lambda p: p.write_bytes(struct.pack("<Q", 100_000_001) + b"{}")),
    ("not-json", r"header is not valid JSON",
     lambda p: write_file(p, None, header_bytes=b'{"a": {"dtype": "F32",')),
    ("trailing-json", r"header is not valid JSON",
     lambda p: write_file(p, None, header_bytes=b'{} {}')),
    ("nan", r"header is not valid JSON",
     lambda p: write_file(p, None, header_bytes=b'{"a": NaN}')),
    ("not-utf8", r"header is not valid UTF-8",
     lambda p: write_file(p, None, header_bytes=b'{"\xff": 1}')),
    ("not-brace", r"header does not start with '\{'",
     lambda p: write_file(p, None, header_bytes=b' {}')),
    ("list", r"header does not start with '\{'",
     lambda p: write_file(p, None, header_bytes=b'[]')),
    ("zero-header", r"header does not start with '\{'", lambda p: p.write_bytes(bytes(8))),
    ("dup-key", r"header has the key 'a' twice",
     lambda p: write_file(p, None, b"\0" * 8, header_bytes=(
         b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},'
         b' "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}'))),
    ("entry-not-obj", r"the entry of tensor 'a' is a list, not an object",
     lambda p: write_file(p, {"a": [1, 2]})),
    ("no-dtype", r"the entry of tensor 'a' has no 'dtype'",
     lambda p: write_file(p, {"a": {"shape": [], "data_offsets": [0, 4]}}, b"\0" * 4)),
    ("no-offsets", r"the entry of tensor 'a' has no 'data_offsets'",
     lambda p: write_file(p, {"a": {"shape": [], "dtype": "F32"}}, b"\0" * 4)),
    ("unknown-dtype", r"tensor 'a' has the unknown dtype 'F128'",
     lambda p: write_file(p, {"a": entry("F128", [1], 0, 16)}, b"\0" * 16)),
    ("dtype-int", r"tensor 'a' has the dtype 4, not a string",
     lambda p: write_file(p, {"a": entry(4, [1], 0, 4)}, b"\0" * 4)),
    ("f16", r"tensor 'h' has dtype F16, which is not supported by eagervm",
     lambda p: write_file(p, {"h": entry("F16", [2], 0, 4)}, b"\0" * 4)),
    ("bf16", r"tensor 'h' has dtype BF16, which is not supported by eagervm",
     lambda p: write_file(p, {"h": entry("BF16", [2], 0, 4)}, b"\0" * 4)),
    ("u64", r"tensor 'h' has dtype U64, which is not supported by eagervm",
     lambda p: write_file(p, {"h": entry("U64", [1], 0, 8)}, b"\0" * 8)),
    ("shape-neg", r"tensor 'a' has the shape \[-1, 2\], not a list of non-negative",
     lambda p: write_file(p, {"a": entry("F32", [-1, 2], 0, 0)})),
    ("shape-float", r"tensor 'a' has the shape \[2.0\], not a list",
     lambda p: write_file(p, {"a": entry("F32", [2.0], 0, 8)}, b"\0" * 8)),
    ("shape-bool", r"tensor 'a' has the shape \[True\], not a list",
     lambda p: write_file(p, {"a": entry("F32", [True], 0, 4)}, b"\0" * 4)),
    ("shape-int", r"tensor 'a' has the shape 4, not a list",
     lambda p: write_file(p, {"a": entry("F32", 4, 0, 16)}, b"\0" * 16)),
    ("dims", r"tensor 'a' has 9 dimensions; eagervm supports at most 8",
     lambda p: write_file(p, {"a": entry("U8", [1] * 9, 0, 1)}, b"\0")),
    ("too-large", r"tensor 'a' has the shape \[0, 4611686018427387904, 8\], too large for "
                  r"eagervm",
     lambda p: write_file(p, {"a": entry("F32", [0, 2**62, 8], 0, 0)})),
    ("offsets-3", r"tensor 'a' has the data_offsets \[0, 4, 8\], not \[begin, end\]",
     lambda p: write_file(p, {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}},
                          b"\0" * 4)),
    ("offsets-rev", r"tensor 'a' has the data_offsets \[4, 0\]",
     lambda p: write_file(p, {"a": entry("F32", [1], 4, 0)}, b"\0" * 4)),
    ("offsets-neg", r"tensor 'a' has the data_offsets \[-4, 0\]",
     lambda p: write_file(p, {"a": entry("F32", [1], -4, 0)}, b"\0" * 4)),
    ("mismatch", r"tensor 'a' of shape \[2, 3\] and dtype F32 needs 24 bytes, but its "
                 r"data_offsets \[0, 20\] give 20",
     lambda p: write_file(p, {"a": entry("F32", [2, 3], 0, 20)}, b"\0" * 20)),
    ("overlap", r"tensors 'a' \(bytes 0 to 16\) and 'b' \(bytes 8 to 24\) overlap",
     lambda p: write_file(p, {"b": entry("F32", [4], 8, 24), "a": entry("F32", [4], 0, 16)},
                          b"\0" * 24)),
    ("same-offsets", r"tensors 'a' \(bytes 0 to 8\) and 'b' \(bytes 0 to 8\) overlap",
     lambda p: write_file(p, {"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 0, 8)},
                          b"\0" * 8)),
    ("hole", r"bytes 16 to 20 of the data belong to no tensor",
     lambda p: write_file(p, {"a": entry("F32", [4], 0, 16), "b": entry("F32", [1], 20, 24)},
                          b"\0" * 24)),
    ("hole-at-start", r"bytes 0 to 4 of the data belong to no tensor",
     lambda p: write_file(p, {"a": entry("F32", [1], 4, 8)}, b"\0" * 8)),
    ("trunc-data", r"header says 24 bytes of data but the file has 20 after the header "
                   r"\(truncated\?\)",
     lambda p: write_file(p, {"a": entry("F32", [2, 3], 0, 24)}, F6[:20])),
    ("trailing", r"file has 30 bytes after the header but its tensors cover 24 \(trailing",
     lambda p: write_file(p, {"a": entry("F32", [2, 3], 0, 24)}, F6 + b"garbag")),
    ("meta-not-str", r"'__metadata__' is not an object of str -> str",
     lambda p: write_file(p, {"__metadata__": {"format": 1}})),
    ("meta-list", r"'__metadata__' is not an object of str -> str",
     lambda p: write_file(p, {"__metadata__": ["x"]})),
    ("bool-bytes", r"tensor 'm' has dtype BOOL but bytes other than 0 and 1",
     lambda p: write_file(p, {"m": entry("BOOL", [3], 0, 3)}, b"\x01\x00\x02")),
    ("structure-json", r"the structure in the metadata is not valid JSON",
     lambda p: write_file(p, {"__metadata__": {"eagervm.structure": "{"}})),
    ("structure-shape", r"the structure in the metadata is not an object with 'version'",
     lambda p: write_file(p, {"__metadata__": {"eagervm.structure": "[1]"}})),
    ("structure-version", r"has version 99; this eagervm reads version 1",
     lambda p: write_file(p, {"__metadata__": {
         "eagervm.structure": '{"version": 99, "root": null}'}})),
    ("structure-node", r"the structure in the metadata has a node it cannot read",
     lambda p: write_file(p, {"__metadata__": {
         "eagervm.structure": '{"version": 1, "root": {"set": [1]}}'}})),
    ("structure-float", r"the structure in the metadata has the float 'x'",
     lambda p: write_file(p, {"__metadata__": {
         "eagervm.structure": '{"version": 1, "root": {"float": "x"}}'}})),
    ("structure-item", r"the structure in the metadata has the dict item \[1.5, 2\]",
     lambda p: write_file(p, {"__metadata__": {
         "eagervm.structure": '{"version": 1, "root": {"dict": [[1.5, 2]]}}'}})),
    ("structure-missing", r"names the tensor 'b', which the file does not have",
     lambda p: write_file(p, {"a": entry("U8", [1], 0, 1), "__metadata__": {
         "eagervm.structure": '{"version": 1, "root": {"list": [{"tensor": "b"}]}}'}}, b"\0")),
    ("structure-twice", r"names the tensor 'a' twice",
     lambda p: write_file(p, {"a": entry("U8", [1], 0, 1), "__metadata__": {
         "eagervm.structure": '{"version": 1, "root": {"list": [{"tensor": "a"}, '
                              '{"tensor": "a"}]}}'}}, b"\0")),
    ("structure-unplaced", r"does not place the tensors \['b'\]",
     lambda p: write_file(p, {"a": entry("U8", [1], 0, 1), "b": entry("U8", [1], 1, 2),
                              "__metadata__": {"eagervm.structure":
                                               '{"version": 1, "root": {"tensor": "a"}}'}},
                          b"\0\0")),
    ("hdr-deep", r"the header is nested too deeply",
     lambda p: write_file(p, None, header_bytes=b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 +
                          b"}")),
    ("structure-deep", r"the structure in the metadata is nested too deeply",
     lambda p: write_file(p, {"__metadata__": {"eagervm.structure": (
         '{"version": 1, "root": ' + '{"list": [' * 100_000 + ']}' * 100_000 + '}')}})),
]


@pytest.mark.parametrize("name,match,make", CORRUPT, ids=[c[0] for c in CORRUPT])
def test_corrupt_file_raises_naming_file_and_problem(tmp_path, name, match, make):
    p = tmp_path / f"{name}.safetensors"
    make(p)
    with pytest.raises(ValueError, match=match) as e:
        ev.load(p)
    assert str(e.value).startswith(f"{p}: ")


def test_truncated_anywhere_raises(tmp_path):
    p = tmp_path / "ckpt.safetensors"
    ev.save(optimizer_state(ev.ones(2, 3)), p)
    whole = p.read_bytes()
    message = "^" + re.escape(str(p)) + ": .*(truncated|fewer than)"
    for cut in range(len(whole)):
        p.write_bytes(whole[:cut])
        with pytest.raises(ValueError, match=message):
            ev.load(p)
    p.write_bytes(whole + b"\0")
    with pytest.raises(ValueError, match="trailing bytes"):
        ev.load(p)


def test_every_flipped_header_byte_loads_or_raises_value_error(tmp_path):
    p = tmp_path / "ckpt.safetensors"
    ev.save({"model": {"w": ev.ones(2, 3), "m": ev.tensor([True])}, "step": 3}, p)
    whole = p.read_bytes()
    n = struct.unpack("<Q", whole[:8])[0]
    for i in range(8 + n):
        for flip in (0x01, 0x20, 0x80):
            b = bytearray(whole)
            b[i] ^= flip
            p.write_bytes(b)
            try:
                ev.load(p)
            except ValueError as e:
                assert str(e).startswith(f"{p}: ")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        ev.load(tmp_path / "none.safetensors")
    with pytest.raises(IsADirectoryError):
        ev.load(tmp_path)
    with pytest.raises(TypeError, match="path must be a str or os.PathLike, not list"):
        ev.load([1])


# ------------------------------------------------------------ other writers

# Run by a Python that has safetensors (and maybe torch): reads what eagervm
# wrote and writes files of its own, from the same recipe as expected().
PEER = r"""
import json, sys
import numpy as np
from safetensors.numpy import load_file, save_file
try:
    import torch
    from safetensors.torch import load_file as torch_load, save_file as torch_save
except ImportError:
    torch = None
d = sys.argv[1]
out = {}
def describe(arrays):
    return {k: [str(np.asarray(v).dtype), list(np.asarray(v).shape),
                np.asarray(v).reshape(-1).view(np.uint8).tolist()] for k, v in arrays.items()}
out["numpy"] = describe(load_file(d + "/ours.safetensors"))
out["numpy_nested"] = sorted(load_file(d + "/nested.safetensors"))
arrays = {}
for name, dt in [("bool", "bool"), ("uint8", "uint8"), ("int8", "int8"), ("int16", "int16"),
                 ("int32", "int32"), ("int64", "int64"), ("float32", "float32"),
                 ("float64", "float64")]:
    a = (np.arange(24) * 37 % 11 - 5).astype(dt).reshape(2, 3, 4)
    arrays[name] = a
    arrays[name + "_0d"] = a.reshape(-1)[3:4].reshape(())
    arrays[name + "_empty"] = a.reshape(-1)[:0].reshape(0, 3)
save_file(arrays, d + "/numpy.safetensors", metadata={"writer": "numpy"})
if torch is not None:
    out["torch"] = {k: [str(v.dtype), list(v.shape), v.reshape(-1).tolist()]
                    for k, v in torch_load(d + "/ours.safetensors").items()}
    ckpt = {"w": torch.arange(12, dtype=torch.float32).reshape(3, 4).T.contiguous(),
            "b": torch.arange(4, dtype=torch.int64), "m": torch.tensor([True, False])}
    torch_save(ckpt, d + "/torch.safetensors", metadata={"format": "pt"})
print(json.dumps(out))
"""


@functools.lru_cache(maxsize=None)
def peer_python():
    """A Python with the safetensors package: this one, the bench venv
    ($EAGERVM_BENCH_VENV or .venv-bench), or None."""
    candidates = [sys.executable]
    venv = os.environ.get("EAGERVM_BENCH_VENV", os.path.join(ROOT, ".venv-bench"))
    candidates.append(os.path.join(venv, "bin", "python"))
    for py in candidates:
        if os.path.exists(py) and subprocess.run(
                [py, "-c", "import safetensors.numpy"], capture_output=True).returncode == 0:
            return py
    return None


def expected(dt):
    """The recipe of PEER: (arange(24) * 37 % 11 - 5) in dt, shape (2, 3, 4)."""
    return ev.tensor([(i * 37 % 11 - 5) for i in range(24)]).to(dt).reshape(2, 3, 4)


@pytest.mark.skipif(peer_python() is None, reason="no Python with the safetensors package")
def test_round_trip_with_the_safetensors_package(tmp_path):
    ours = {}
    for dt in VALUES:
        ours[dt.name] = ev.tensor(VALUES[dt], dtype=dt)
        ours[dt.name + "_T"] = ev.arange(12).to(dt).reshape(3, 4).T
        ours[dt.name + "_0d"] = ev.tensor(VALUES[dt][0], dtype=dt)
        ours[dt.name + "_empty"] = ev.zeros(0, 3, dtype=dt)
    ev.save(ours, tmp_path / "ours.safetensors")
    ev.save({"model": {"0.weight": ev.ones(2)}, "optim": optimizer_state(ev.ones(2))},
            tmp_path / "nested.safetensors")
    r = subprocess.run([peer_python(), "-c", PEER, str(tmp_path)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    # safetensors.numpy reads our names, dtypes, shapes and bytes.
    assert set(got["numpy"]) == set(ours)
    for k, t in ours.items():
        npdt, shape, data = got["numpy"][k]
        assert npdt == t.dtype.name and shape == list(t.shape), k
        assert bytes(data) == raw(t), k
    assert got["numpy_nested"] == ["model.0.weight", "optim.state.0.momentum_buffer"]
    # ... and we read what it wrote.
    theirs = ev.load(tmp_path / "numpy.safetensors")
    for dt in VALUES:
        same(expected(dt), theirs[dt.name])
        same(expected(dt).reshape(-1)[3], theirs[dt.name + "_0d"])
        assert theirs[dt.name + "_empty"].shape == (0, 3)
    if "torch" in got:
        # PyTorch, through safetensors.torch, reads ours ...
        assert set(got["torch"]) == set(ours)
        for k, (tdt, shape, values) in got["torch"].items():
            t = ours[k]
            assert tdt == "torch." + t.dtype.name and shape == list(t.shape), k
            assert json.dumps(values) == json.dumps(t.reshape(-1).tolist()), k
        # ... and we read its file.
        pt = ev.load(tmp_path / "torch.safetensors")
        assert pt["w"].tolist() == ev.arange(12.0).reshape(3, 4).T.tolist()
        assert pt["b"].tolist() == [0, 1, 2, 3] and pt["m"].tolist() == [True, False]


def test_works_without_numpy(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        sys.modules["numpy"] = None  # import numpy raises ImportError
        import eagervm as ev
        p = {str(tmp_path / "n.safetensors")!r}
        ev.save({{"w": ev.ones(2, 3).T, "s": {{"step": 1}}}}, p)
        out = ev.load(p)
        assert out["w"].tolist() == [[1.0, 1.0]] * 3 and out["s"] == {{"step": 1}}
        assert "numpy" not in sys.modules or sys.modules["numpy"] is None
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=PYPATH)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
