"""MNIST-format data sets (MNIST, Fashion-MNIST) from their IDX files.

    from eagervm.datasets import mnist
    images, labels = mnist.load_fashion_mnist("train")   # eagervm tensors
    # images: float32 (60000, 784), values 0..255; labels: int64 (60000,)

The files are read by our own IDX reader (gzip'd or plain), which checks the
magic number, the dimensions and the length, and raises IDXError (a
ValueError) naming the file and what is wrong. The default root is where
Debian's dataset-fashion-mnist package puts them
(apt-get install dataset-fashion-mnist).

IDX format: a 4-byte big-endian magic number 0x0000TTNN (TT the element type,
0x08 = unsigned byte; NN the number of dimensions), then NN big-endian uint32
sizes, then the elements in row-major order.
"""
import gzip
import os
import struct
import zlib

__all__ = ["IDXError", "read_idx", "load_idx_images", "load_idx_labels", "load_fashion_mnist",
           "FASHION_MNIST_ROOT", "FASHION_MNIST_CLASSES"]

FASHION_MNIST_ROOT = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                         "Shirt", "Sneaker", "Bag", "Ankle boot")
_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
IMAGES_MAGIC = 0x00000803  # unsigned bytes, 3 dimensions
LABELS_MAGIC = 0x00000801  # unsigned bytes, 1 dimension


class IDXError(ValueError):
    """An IDX file is malformed: wrong magic number, truncated, or not what
    was expected."""


def _read_bytes(path):
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"IDX file not found: {path}" + (
                " (Fashion-MNIST comes from Debian's dataset-fashion-mnist package: "
                "apt-get install dataset-fashion-mnist)" if "fashion" in path else ""))
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return gzip.decompress(raw)
    except EOFError as exc:
        raise IDXError(f"{path}: truncated gzip stream (the file is cut short): {exc}") from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise IDXError(f"{path}: corrupt gzip data: {exc}") from None


def read_idx(path, magic=None):
    """Reads an IDX file of unsigned bytes (gzip'd or not). Returns
    (dims, data): the dimension sizes as a tuple and the elements as bytes.
    magic: the magic number the caller expects (IMAGES_MAGIC, LABELS_MAGIC),
    or None to accept any unsigned-byte IDX file."""
    buf = _read_bytes(path)
    if len(buf) < 4:
        raise IDXError(f"{path}: truncated: {len(buf)} bytes, too short for an IDX header")
    (got,) = struct.unpack(">I", buf[:4])
    if magic is not None and got != magic:
        raise IDXError(f"{path}: wrong magic number 0x{got:08x}, expected 0x{magic:08x} "
                       f"(IDX unsigned bytes, {magic & 0xff} dimension"
                       f"{'s' if (magic & 0xff) != 1 else ''}); is this the right file?")
    if got >> 16 != 0 or (got >> 8) & 0xff != 0x08 or got & 0xff == 0:
        raise IDXError(f"{path}: wrong magic number 0x{got:08x}: not an IDX file of "
                       f"unsigned bytes (expected 0x000008NN)")
    ndim = got & 0xff
    header = 4 + 4 * ndim
    if len(buf) < header:
        raise IDXError(f"{path}: truncated: the header needs {header} bytes, the file has "
                       f"{len(buf)}")
    dims = struct.unpack(f">{ndim}I", buf[4:header])
    want = 1
    for d in dims:
        want *= d
    have = len(buf) - header
    if have < want:
        raise IDXError(f"{path}: truncated: the header says {' x '.join(map(str, dims))} = "
                       f"{want} bytes of data, the file has {have}")
    if have > want:
        raise IDXError(f"{path}: {have - want} bytes of trailing data after the "
                       f"{' x '.join(map(str, dims))} elements the header announces")
    return dims, buf[header:]


def _to_tensor(data, shape, dtype):
    import eagervm as ev
    try:
        import numpy as np
    except ImportError:  # NumPy is optional: go through the buffer protocol
        return ev.tensor(memoryview(data)).reshape(shape).to(dtype)
    arr = np.frombuffer(data, dtype=np.uint8).reshape(shape)
    np_dtype = {ev.float32: np.float32, ev.int64: np.int64, ev.float64: np.float64,
                ev.int32: np.int32}[dtype]
    return ev.from_numpy(np.ascontiguousarray(arr.astype(np_dtype)))


def load_idx_images(path, flatten=True):
    """An IDX image file as a float32 eagervm tensor of (N, rows*cols) (or
    (N, rows, cols) with flatten=False), values 0..255."""
    import eagervm as ev
    dims, data = read_idx(path, IMAGES_MAGIC)
    n, r, c = dims
    return _to_tensor(data, (n, r * c) if flatten else (n, r, c), ev.float32)


def load_idx_labels(path, num_classes=10):
    """An IDX label file as an int64 eagervm tensor of (N,); every label must
    be below num_classes."""
    import eagervm as ev
    dims, data = read_idx(path, LABELS_MAGIC)
    if num_classes is not None and data and max(data) >= num_classes:
        raise IDXError(f"{path}: label {max(data)} out of range for {num_classes} classes")
    return _to_tensor(data, dims, ev.int64)


def load_fashion_mnist(split="train", root=None, flatten=True):
    """(images, labels) of Fashion-MNIST's "train" (60,000) or "test" (10,000)
    split as eagervm tensors: images float32 (N, 784) with values 0..255
    (normalising is the input pipeline's job), labels int64 (N,). root: the
    folder of the four files (gzip'd or not; default FASHION_MNIST_ROOT)."""
    if split not in _FILES:
        raise ValueError(f"split must be 'train' or 'test', not {split!r}")
    root = root or os.environ.get("EAGERVM_FASHION_MNIST", FASHION_MNIST_ROOT)
    paths = []
    for stem in _FILES[split]:
        for cand in (stem + ".gz", stem):
            p = os.path.join(root, cand)
            if os.path.exists(p):
                break
        else:
            p = os.path.join(root, stem + ".gz")
        paths.append(p)
    images = load_idx_images(paths[0], flatten=flatten)
    labels = load_idx_labels(paths[1])
    if images.shape[0] != labels.shape[0]:
        raise IDXError(f"{paths[0]} has {images.shape[0]} images but {paths[1]} has "
                       f"{labels.shape[0]} labels")
    return images, labels
