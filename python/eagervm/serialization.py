"""eagervm.save and eagervm.load: tensors and (nested) state dicts in the
safetensors format (https://github.com/huggingface/safetensors), so that the
safetensors package and PyTorch read what we write and we read what they write.

    ev.save({"0.weight": w, "0.bias": b}, "model.safetensors")
    state = ev.load("model.safetensors")          # {"0.weight": Tensor, "0.bias": Tensor}
    ev.save({"model": model_sd, "optim": optim_sd, "epoch": 3}, "ckpt.safetensors")

The file: 8 bytes little-endian u64 N, N bytes of UTF-8 JSON header
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
then the tensors' bytes, little-endian and in C order, covering the data
exactly.

A flat dict of str -> Tensor is written with exactly those names and nothing
else, so safetensors.torch.load_file gives PyTorch the same dict. Any other
object (a lone Tensor; nested dicts with str or int keys, lists and tuples;
leaves that are Tensors or int, float, bool, None, str) has its tensors
written under dotted names ("state.0.momentum_buffer") and its shape, with the
non-tensor leaves, recorded as JSON in __metadata__["eagervm.structure"], from
which load() rebuilds it (dict, list and tuple subclasses come back as their
base type). Files without that entry load as a flat dict of str -> Tensor.
"""
import errno
import json
import math
import os
import secrets
import stat
import sys

from . import _C

__all__ = ["save", "load"]

# safetensors dtype name -> (eagervm dtype, the struct format of one element).
_DTYPES = {
    "BOOL": (_C.bool, "?"), "U8": (_C.uint8, "B"), "I8": (_C.int8, "b"),
    "I16": (_C.int16, "h"), "I32": (_C.int32, "i"), "I64": (_C.int64, "q"),
    "F32": (_C.float32, "f"), "F64": (_C.float64, "d"),
}
_NAMES = {dtype: name for name, (dtype, _) in _DTYPES.items()}
# The format's other dtypes (safetensors/src/tensor.rs, enum Dtype): known,
# so a file holding one is valid, but eagervm has no such dtype.
_UNSUPPORTED = frozenset({
    "F4", "F6_E2M3", "F6_E3M2", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ",
    "F8_E5M2FNUZ", "U16", "F16", "BF16", "U32", "C64", "U64",
})
_MAX_HEADER = 100_000_000  # the reference implementation's limit (MAX_HEADER_SIZE)
_MAX_DIMS = 8              # EV_MAX_DIMS
_MAX_SIZES = (2**63 - 1) // 16  # the tensor layer's bound on a shape (src/tensor/tensor.c)
_META = "__metadata__"
_STRUCTURE = "eagervm.structure"  # our key in __metadata__
_VERSION = 1
_SEP = "."
_ROOT_TENSOR = "tensor"  # the name of a lone Tensor saved on its own


def _fspath(path, fn):
    """path as a str, or TypeError: what open() takes, not a file object."""
    try:
        path = os.fspath(path)
    except TypeError:
        raise TypeError(f"{fn}(): path must be a str or os.PathLike, not "
                        f"{type(path).__name__}") from None
    return os.fsdecode(path) if isinstance(path, bytes) else path


def _where(keys):
    """A key path as Python would index it: obj['state'][0]['step']."""
    return "obj" + "".join(f"[{k!r}]" for k in keys)


# ------------------------------------------------------------------ save

class _Flattener:
    """Walks what save() was given: collects (name, tensor) in order and the
    structure as JSON-ready nodes. Raises TypeError/ValueError naming the key
    path of the first thing that cannot be saved."""

    def __init__(self):
        self.entries = []   # (name, tensor), in the order met
        self.paths = {}     # name -> key path, to report collisions
        self.on_path = set()  # ids of the containers being walked (cycles)

    def tensor(self, name, t, keys):
        if name == _META:
            raise ValueError(f"save(): {_where(keys)} would be stored as {_META!r}, which "
                             "the format reserves for its metadata")
        if name in self.paths:
            raise ValueError(f"save(): {_where(self.paths[name])} and {_where(keys)} would "
                             f"both be stored as {name!r}")
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"save(): the key {name!r} at {_where(keys)} is not valid "
                             "UTF-8 (a lone surrogate)") from None
        self.paths[name] = keys
        self.entries.append((name, t))

    def node(self, obj, keys):
        """The JSON node of obj: a JSON scalar for None, bool, int and str,
        {"float": repr}, {"tensor": name}, {"dict": [[key, node], ...]},
        {"list": [...]} or {"tuple": [...]}."""
        if isinstance(obj, _C.Tensor):
            name = _SEP.join(str(k) for k in keys) if keys else _ROOT_TENSOR
            self.tensor(name, obj, keys)
            return {"tensor": name}
        if obj is None or isinstance(obj, bool):
            return None if obj is None else bool(obj)
        if isinstance(obj, int):
            return int(obj)
        if isinstance(obj, float):
            return {"float": repr(float(obj))}  # exact, and inf/nan are not JSON
        if isinstance(obj, str):
            try:
                obj.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"save(): the str at {_where(keys)} is not valid UTF-8 "
                                 "(a lone surrogate)") from None
            return str(obj)
        if not isinstance(obj, (dict, list, tuple)):
            raise TypeError(f"save(): {_where(keys)} is a {type(obj).__module__}."
                            f"{type(obj).__qualname__}; only Tensors, dicts, lists, tuples "
                            "and int, float, bool, None, str can be saved")
        if id(obj) in self.on_path:
            raise ValueError(f"save(): {_where(keys)} contains itself")
        self.on_path.add(id(obj))
        if isinstance(obj, dict):
            items = []
            for k, v in obj.items():
                if isinstance(k, bool) or not isinstance(k, (str, int)):
                    raise TypeError(f"save(): {_where(keys)} has the key {k!r} of type "
                                    f"{type(k).__name__}; keys must be str or int")
                k = str(k) if isinstance(k, str) else int(k)
                items.append([k, self.node(v, keys + (k,))])
            out = {"dict": items}
        else:
            out = {"list" if isinstance(obj, list) else "tuple":
                   [self.node(v, keys + (i,)) for i, v in enumerate(obj)]}
        self.on_path.discard(id(obj))
        return out


def _flatten(obj):
    """(entries, metadata): the (name, tensor) pairs to write and the
    __metadata__ dict (None for a flat dict of str -> Tensor)."""
    f = _Flattener()
    if isinstance(obj, dict) and all(
            isinstance(k, str) and isinstance(v, _C.Tensor) for k, v in obj.items()):
        for k, v in obj.items():
            f.tensor(str(k), v, (k,))  # the names as they are, dots and all
        return f.entries, None
    try:
        root = f.node(obj, ())
    except RecursionError:
        raise ValueError("save(): obj is nested too deeply") from None
    structure = json.dumps({"version": _VERSION, "root": root}, ensure_ascii=False,
                           allow_nan=False, separators=(",", ":"))
    return f.entries, {_STRUCTURE: structure}


def _header(entries, metadata):
    """(header bytes padded to 8, layout): layout is [(tensor, nbytes)] in
    file order. Wider dtypes come first (as the reference writer does), so
    that every tensor is aligned to its element size in the file."""
    infos = []
    for name, t in entries:
        dtype = t.dtype
        if dtype not in _NAMES:
            raise TypeError(f"save(): the tensor {name!r} has dtype {dtype}, which the "
                            "safetensors format cannot hold")
        infos.append((name, t, _NAMES[dtype], tuple(t.shape), t.numel() * dtype.itemsize))
    order = sorted(range(len(infos)), key=lambda i: -infos[i][1].dtype.itemsize)
    offsets, layout, at = {}, [], 0
    for i in order:
        _, t, _, _, nbytes = infos[i]
        offsets[i] = (at, at + nbytes)
        layout.append((t, nbytes))
        at += nbytes
    header = {_META: metadata} if metadata is not None else {}
    for i, (name, _, dname, shape, _) in enumerate(infos):
        header[name] = {"dtype": dname, "shape": list(shape), "data_offsets": list(offsets[i])}
    text = json.dumps(header, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    raw = text.encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    if len(raw) > _MAX_HEADER:
        raise ValueError(f"save(): the header would be {len(raw):,} bytes, over the format's "
                         f"limit of {_MAX_HEADER:,} (too many tensors or too much metadata)")
    return raw, layout


def _create_temp(path):
    """(fd, temp path): a new file beside path, which no other process
    writes, with the permissions that writing path with open() would leave:
    those of the file it replaces, else 0o666 less the umask."""
    head, tail = os.path.split(path)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = None
    for _ in range(100):
        tmp = os.path.join(head, f".{tail}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        except OSError as e:
            # Name the path the caller gave, not our temporary name.
            raise type(e)(e.errno, f"{e.strerror} (creating a temporary file in "
                                   f"{head or os.curdir!r})", path) from None
        if mode is not None:
            try:
                os.fchmod(fd, mode)
            except OSError:
                pass  # a file system without modes (FAT): keep its default
        return fd, tmp
    raise FileExistsError(errno.EEXIST, "could not create a temporary file beside it", path)


def _fsync_dir(path):
    """Makes the rename durable; some file systems cannot sync a directory."""
    try:
        fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def save(obj, path):
    """Writes obj to path in the safetensors format.

    obj is a Tensor, or a nested structure of dicts (str or int keys), lists
    and tuples whose leaves are Tensors or int, float, bool, None, str (a
    model's or an optimizer's state_dict, a checkpoint of both). A flat dict
    of str -> Tensor is written with exactly those names; anything else has
    its tensors under dotted names and its structure in the metadata, so
    that load(path) rebuilds it.

    A sync point: waits for the pending work on each tensor, and raises a
    failure of that work. Views and non-contiguous tensors are written in C
    order; tensors that share memory are each written in full. The file appears
    whole or not at all: the bytes go to a temporary file beside path, which
    is synced and renamed over path (an existing file stays as it was until
    then, and the temporary file is removed on failure).

    Raises TypeError (a path that is not str or os.PathLike, a leaf or key of
    an unsupported type) or ValueError (two tensors that would get the same
    name, a structure that contains itself or is nested too deeply), naming
    the key path, before anything is written. Keys may contain dots: each
    tensor's name is recorded, so only a real clash ({"a.b": t, "a": {"b": u}})
    is refused.
    """
    path = _fspath(path, "save")
    entries, metadata = _flatten(obj)
    header, layout = _header(entries, metadata)
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if os.path.islink(path):
        path = os.path.realpath(path)  # replace the file it names, as open() writes through it
    fd, tmp = _create_temp(path)
    try:
        with open(fd, "wb", buffering=0, closefd=True) as f:
            _write_all(f, len(header).to_bytes(8, "little"))
            _write_all(f, header)
            for t, nbytes in layout:
                _write_tensor(f, t, nbytes)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(path)


def _write_all(f, data):
    """Writes all of data (an unbuffered write may write less)."""
    with memoryview(data) as mv, mv.cast("B") as left:
        while left:
            n = f.write(left)
            left = left[n:]


def _write_tensor(f, t, nbytes):
    if nbytes == 0:
        return
    # The buffer protocol waits for t and shows its memory in C order (a
    # contiguous copy for a view): one copy, the write itself.
    with memoryview(t) as mv:
        if mv.nbytes != nbytes:  # a tensor resized since the header was made
            raise RuntimeError(f"save(): a tensor changed size while being saved "
                               f"({mv.nbytes} bytes, expected {nbytes})")
        if sys.byteorder != "little" and mv.itemsize > 1:
            mv = _swapped(mv)
        _write_all(f, mv)


def _swapped(mv):
    """mv's elements byte-swapped (big-endian hosts: the format is little-endian)."""
    import array
    fmt = mv.format[-1]
    a = array.array(fmt)
    a.frombytes(mv.tobytes())
    a.byteswap()
    return memoryview(a)


# ------------------------------------------------------------------ load

class _Entry:
    __slots__ = ("name", "fmt", "dtype", "dname", "shape", "begin", "end")


def _check_entry(fail, name, info):
    """One tensor's header entry, checked: an _Entry."""
    if not isinstance(info, dict):
        fail(f"the entry of tensor {name!r} is a {type(info).__name__}, not an object")
    for field in ("dtype", "shape", "data_offsets"):
        if field not in info:
            fail(f"the entry of tensor {name!r} has no {field!r}")
    e = _Entry()
    e.name, e.dname = name, info["dtype"]
    if not isinstance(e.dname, str):
        fail(f"tensor {name!r} has the dtype {e.dname!r}, not a string")
    if e.dname in _UNSUPPORTED:
        fail(f"tensor {name!r} has dtype {e.dname}, which is not supported by eagervm "
             f"(it has {', '.join(_DTYPES)})")
    if e.dname not in _DTYPES:
        fail(f"tensor {name!r} has the unknown dtype {e.dname!r}")
    e.dtype, e.fmt = _DTYPES[e.dname]
    shape = info["shape"]
    if not isinstance(shape, list) or not all(
            type(d) is int and d >= 0 for d in shape):
        fail(f"tensor {name!r} has the shape {shape!r}, not a list of non-negative integers")
    if len(shape) > _MAX_DIMS:
        fail(f"tensor {name!r} has {len(shape)} dimensions; eagervm supports at most "
             f"{_MAX_DIMS}")
    if math.prod(d or 1 for d in shape) > _MAX_SIZES:
        fail(f"tensor {name!r} has the shape {shape}, too large for eagervm (its sizes, "
             "zeros counted as ones, multiply past 2^59)")
    e.shape = tuple(shape)
    offsets = info["data_offsets"]
    if not (isinstance(offsets, list) and len(offsets) == 2 and
            all(type(o) is int for o in offsets) and 0 <= offsets[0] <= offsets[1]):
        fail(f"tensor {name!r} has the data_offsets {offsets!r}, not [begin, end] with "
             "0 <= begin <= end")
    e.begin, e.end = offsets
    need = math.prod(e.shape) * e.dtype.itemsize
    if e.end - e.begin != need:
        fail(f"tensor {name!r} of shape {list(e.shape)} and dtype {e.dname} needs "
             f"{need:,} bytes, but its data_offsets {offsets} give {e.end - e.begin:,}")
    return e


def _check_layout(fail, entries):
    """Checks that the tensors cover the data exactly, in some order; returns
    the entries in file order and the data's length."""
    ordered = sorted(entries, key=lambda e: (e.begin, e.end))
    at, prev = 0, None
    for e in ordered:
        if e.begin < at:
            fail(f"tensors {prev.name!r} (bytes {prev.begin:,} to {prev.end:,}) and "
                 f"{e.name!r} (bytes {e.begin:,} to {e.end:,}) overlap")
        if e.begin > at:
            fail(f"bytes {at:,} to {e.begin:,} of the data belong to no tensor (a hole)")
        at, prev = e.end, e
    return ordered, at


def _check_node(fail, node, names, seen):
    """Checks one node of our structure (see _Flattener.node)."""
    if node is None or isinstance(node, (bool, int, str)):
        return
    if isinstance(node, dict) and len(node) == 1:
        (kind, value), = node.items()
        if kind == "tensor" and isinstance(value, str):
            if value not in names:
                fail(f"the structure in the metadata names the tensor {value!r}, which the "
                     "file does not have")
            if value in seen:
                fail(f"the structure in the metadata names the tensor {value!r} twice")
            seen.add(value)
            return
        if kind == "float" and isinstance(value, str):
            try:
                float(value)
            except ValueError:
                fail(f"the structure in the metadata has the float {value!r}")
            return
        if kind in ("list", "tuple") and isinstance(value, list):
            for v in value:
                _check_node(fail, v, names, seen)
            return
        if kind == "dict" and isinstance(value, list):
            for item in value:
                if not (isinstance(item, list) and len(item) == 2 and
                        type(item[0]) in (str, int)):
                    fail(f"the structure in the metadata has the dict item {item!r}")
                _check_node(fail, item[1], names, seen)
            return
    fail(f"the structure in the metadata has a node it cannot read: {str(node)[:100]}")


def _build_node(node, tensors):
    if node is None or isinstance(node, (bool, int, str)):
        return node
    (kind, value), = node.items()
    if kind == "tensor":
        return tensors[value]
    if kind == "float":
        return float(value)
    if kind == "dict":
        return {k: _build_node(v, tensors) for k, v in value}
    items = [_build_node(v, tensors) for v in value]
    return items if kind == "list" else tuple(items)


def _check_structure(fail, metadata, names):
    """Our structure from __metadata__, checked against the tensor names, or
    None for a file without one."""
    if metadata is None or _STRUCTURE not in metadata:
        return None
    try:
        doc = json.loads(metadata[_STRUCTURE], parse_constant=_no_constant)
    except RecursionError:
        doc = fail("the structure in the metadata is nested too deeply")
    except ValueError as e:
        doc = fail(f"the structure in the metadata is not valid JSON: {e}")
    if not isinstance(doc, dict) or "root" not in doc or "version" not in doc:
        fail("the structure in the metadata is not an object with 'version' and 'root'")
    if doc["version"] != _VERSION:
        fail(f"the structure in the metadata has version {doc['version']!r}; this eagervm "
             f"reads version {_VERSION} (a newer eagervm wrote it?)")
    seen = set()
    try:
        _check_node(fail, doc["root"], names, seen)
    except RecursionError:
        fail("the structure in the metadata is nested too deeply")
    if len(seen) != len(names):
        missing = sorted(set(names) - seen)[:3]
        fail(f"the structure in the metadata does not place the tensors {missing} ...")
    return doc["root"]


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs):
    """object_pairs_hook of json.loads: the format disallows duplicate keys,
    which json.loads would otherwise keep the last of."""
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Duplicate(k)
        out[k] = v
    return out


class _Duplicate(Exception):
    pass


def _parse_header(fail, raw):
    """The header's JSON object from its raw bytes."""
    if not raw.startswith(b"{"):
        fail(f"the header does not start with '{{' (it starts {raw[:16]!r}; not a "
             "safetensors file?)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        fail(f"the header is not valid UTF-8 (at byte {e.start:,} of it)")
    try:
        header = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except _Duplicate as e:
        fail(f"the header has the key {e.args[0]!r} twice")
    except RecursionError:
        fail("the header is nested too deeply")
    except ValueError as e:  # json.JSONDecodeError, or a NaN/Infinity
        fail(f"the header is not valid JSON: {e}")
    if not isinstance(header, dict):
        fail("the header is not a JSON object")
    return header


def load(path):
    """Reads a safetensors file written by save() or by another writer (the
    safetensors package, PyTorch through it).

    Returns what save() was given (a Tensor, or the nested structure), or,
    for a file without eagervm's structure in its metadata, a dict of
    str -> Tensor in the header's order.

    The whole file is checked before any tensor is made: its size, the
    header (length, UTF-8 JSON object, no duplicate keys), every tensor's
    dtype, shape and data_offsets (consistent with each other, covering the
    data exactly, which must end where the file ends) and eagervm's metadata.
    A problem raises ValueError whose message names the file and what is
    wrong; a missing file raises FileNotFoundError as open() does. Dtypes that
    eagervm lacks (F16, BF16, ...) raise ValueError.

    The data is read once, in order, each tensor's bytes into one reused
    buffer and copied into the tensor.
    """
    path = _fspath(path, "load")

    def fail(problem):
        raise ValueError(f"{path}: {problem}")

    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            fail(f"the file has {size} bytes, fewer than the 8 of the header's length "
                 "(not a safetensors file, or truncated?)")
        n = int.from_bytes(_read_exact(f, 8, fail), "little")
        if n > _MAX_HEADER:
            fail(f"the header's length is {n:,} bytes, over the format's limit of "
                 f"{_MAX_HEADER:,} (not a safetensors file?)")
        if n > size - 8:
            fail(f"the header's length is {n:,} bytes, but the file has {size - 8:,} after "
                 "it (truncated?)")
        header = _parse_header(fail, _read_exact(f, n, fail))
        metadata = header.pop(_META, None)
        if metadata is not None and not (isinstance(metadata, dict) and all(
                isinstance(v, str) for v in metadata.values())):
            fail(f"the header's {_META!r} is not an object of str -> str")
        entries = [_check_entry(fail, name, info) for name, info in header.items()]
        ordered, data_len = _check_layout(fail, entries)
        have = size - 8 - n
        if data_len > have:
            fail(f"the header says {data_len:,} bytes of data but the file has {have:,} "
                 "after the header (truncated?)")
        if data_len < have:
            fail(f"the file has {have:,} bytes after the header but its tensors cover "
                 f"{data_len:,} (trailing bytes)")
        root = _check_structure(fail, metadata, header)
        tensors = _read_tensors(f, fail, ordered)
    if root is None:
        return {e.name: tensors[e.name] for e in entries}
    return _build_node(root, tensors)


def _read_exact(f, n, fail):
    buf = bytearray(n)
    if _readinto_exact(f, memoryview(buf)) != n:
        fail("the file ended early (truncated while being read?)")
    return bytes(buf)


def _readinto_exact(f, mv):
    """Fills mv from f (a raw read may return less); returns the bytes read."""
    got = 0
    while got < len(mv):
        k = f.readinto(mv[got:])
        if not k:
            break
        got += k
    return got


def _read_tensors(f, fail, ordered):
    """{name: Tensor} from the data, which starts at f's position."""
    tensors = {}
    buf = bytearray(max((e.end - e.begin for e in ordered), default=0))
    with memoryview(buf) as whole:
        for e in ordered:
            nbytes = e.end - e.begin
            if nbytes == 0:  # empty (a zero in the shape): no bytes to read
                tensors[e.name] = _C.empty(e.shape, dtype=e.dtype)
                continue
            with whole[:nbytes] as raw:
                if _readinto_exact(f, raw) != nbytes:
                    fail(f"the file ended early, in the data of tensor {e.name!r} "
                         "(truncated while being read?)")
                if e.fmt == "?" and buf.count(0, 0, nbytes) + buf.count(1, 0, nbytes) != nbytes:
                    fail(f"tensor {e.name!r} has dtype BOOL but bytes other than 0 and 1")
                if sys.byteorder != "little" and e.dtype.itemsize > 1:
                    with _swapped(raw.cast(e.fmt)) as swapped:
                        tensors[e.name] = _tensor(swapped.cast("B"), e)
                else:
                    tensors[e.name] = _tensor(raw, e)
    return tensors


def _tensor(raw, e):
    """A Tensor holding a copy of raw's bytes, of e's dtype and shape."""
    with raw.cast(e.fmt, e.shape) as view:
        return _C.tensor(view)
