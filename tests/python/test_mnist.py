"""eagervm.datasets.mnist (the IDX reader) and a short training run of
examples/fashion_mnist.py."""
import gzip
import importlib.util
import io
import os
import struct

import pytest

np = pytest.importorskip("numpy")

import eagervm as ev  # noqa: E402
from eagervm.datasets import mnist  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def idx_bytes(arr, magic=None):
    arr = np.asarray(arr, dtype=np.uint8)
    magic = magic if magic is not None else 0x00000800 | arr.ndim
    head = struct.pack(">I", magic) + struct.pack(f">{arr.ndim}I", *arr.shape)
    return head + arr.tobytes()


def write(path, data, gz=True):
    with (gzip.open if gz else open)(path, "wb") as f:
        f.write(data)
    return str(path)


def write_split(folder, images, labels, split="train", gz=True):
    stems = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
             "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}[split]
    suffix = ".gz" if gz else ""
    write(folder / (stems[0] + suffix), idx_bytes(images), gz)
    write(folder / (stems[1] + suffix), idx_bytes(labels), gz)


def synthetic(n, seed=0):
    """Ten classes, each a bright band across its own rows (so that a
    left-right flip keeps the class), plus noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n).astype(np.uint8)
    images = rng.integers(0, 60, (n, 28, 28)).astype(np.uint8)
    for i, c in enumerate(labels):
        images[i, 2 * c + 4:2 * c + 6, 4:24] = 200
    return images, labels


# ------------------------------------------------------------------- reader

@pytest.mark.parametrize("gz", [True, False])
def test_read_good_files(tmp_path, gz):
    images, labels = synthetic(37)
    write_split(tmp_path, images, labels, "train", gz)
    write_split(tmp_path, images[:5], labels[:5], "test", gz)
    x, y = mnist.load_fashion_mnist("train", root=str(tmp_path))
    assert x.shape == (37, 784) and x.dtype == ev.float32
    assert y.shape == (37,) and y.dtype == ev.int64
    assert np.array_equal(x.numpy(), images.reshape(37, 784).astype(np.float32))
    assert np.array_equal(y.numpy(), labels.astype(np.int64))
    xt, yt = mnist.load_fashion_mnist("test", root=str(tmp_path), flatten=False)
    assert xt.shape == (5, 28, 28)
    dims, data = mnist.read_idx(str(tmp_path / ("train-labels-idx1-ubyte" + (".gz" if gz else ""))))
    assert dims == (37,) and data == labels.tobytes()


def test_truncated_file(tmp_path):
    images, _ = synthetic(4)
    data = idx_bytes(images)
    path = write(tmp_path / "cut.gz", data[:-10])
    with pytest.raises(mnist.IDXError, match=r"cut\.gz: truncated: the header says 4 x 28 x 28 "
                                             r"= 3136 bytes of data, the file has 3126"):
        mnist.load_idx_images(path)
    # a gzip stream cut short
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb") as f:
        f.write(data)
    cut = tmp_path / "stream.gz"
    cut.write_bytes(raw.getvalue()[:200])
    with pytest.raises(mnist.IDXError, match="truncated gzip"):
        mnist.load_idx_images(str(cut))
    # a header cut short
    path = write(tmp_path / "head", data[:9], gz=False)
    with pytest.raises(mnist.IDXError, match="truncated: the header needs 16 bytes"):
        mnist.read_idx(path)
    assert issubclass(mnist.IDXError, ValueError)


def test_wrong_magic(tmp_path):
    images, labels = synthetic(3)
    # a label file where images are expected
    path = write(tmp_path / "labels.gz", idx_bytes(labels))
    with pytest.raises(mnist.IDXError, match=r"wrong magic number 0x00000801, expected "
                                             r"0x00000803"):
        mnist.load_idx_images(path)
    # not an IDX file at all
    path = write(tmp_path / "junk.gz", b"PK\x03\x04" + bytes(100))
    with pytest.raises(mnist.IDXError, match="wrong magic number 0x504b0304"):
        mnist.read_idx(path)
    # float elements (type 0x0d) are not what we read
    path = write(tmp_path / "floats.gz", idx_bytes(images, magic=0x00000D03))
    with pytest.raises(mnist.IDXError, match="not an IDX file of unsigned bytes"):
        mnist.read_idx(path)


def test_missing_file_and_mismatch(tmp_path):
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte.gz"):
        mnist.load_fashion_mnist("train", root=str(tmp_path))
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
        mnist.load_fashion_mnist("train", root=str(tmp_path / "fashion"))
    images, labels = synthetic(6)
    write(tmp_path / "train-images-idx3-ubyte.gz", idx_bytes(images))
    write(tmp_path / "train-labels-idx1-ubyte.gz", idx_bytes(labels[:5]))
    with pytest.raises(mnist.IDXError, match="6 images but .* 5 labels"):
        mnist.load_fashion_mnist("train", root=str(tmp_path))
    write(tmp_path / "train-labels-idx1-ubyte.gz", idx_bytes(np.full(6, 12)))
    with pytest.raises(mnist.IDXError, match="label 12 out of range"):
        mnist.load_fashion_mnist("train", root=str(tmp_path))
    with pytest.raises(ValueError, match="split"):
        mnist.load_fashion_mnist("valid", root=str(tmp_path))


# ----------------------------------------------------------------- training

def load_example():
    spec = importlib.util.spec_from_file_location(
        "fashion_mnist_example", os.path.join(ROOT, "examples", "fashion_mnist.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_short_training_run_reduces_the_loss(tmp_path):
    fm = load_example()
    images, labels = synthetic(1024, seed=1)
    write_split(tmp_path, images, labels, "train")
    x, y = mnist.load_fashion_mnist("train", root=str(tmp_path))
    out = io.StringIO()
    model, history, prof = fm.train(x, y, epochs=3, batch_size=64, seed=3, profile_epoch=1,
                                    out=out)
    losses = [h["loss"] for h in history]
    assert losses[0] < 2.3          # below chance already in the first epoch
    assert losses[2] < losses[0] / 2, losses
    assert "epoch 3/3 batch 16/16" in out.getvalue()
    assert model.accuracy(x, y) > 0.9
    # the profile of the second epoch: the loader's ops ran on its own worker
    lanes = {prof.stream_name(k) for k in prof.streams()}
    assert "cpu compute thread 0 (training)" in lanes
    loader_uid = [k[2] for k in prof.streams() if k[2] != 0]
    assert len(loader_uid) == 1
    assert {e.thread_uid for e in prof.events if e.name == "matmul"} == {0}
    # same seed, same result
    _, again, _ = fm.train(x, y, epochs=3, batch_size=64, seed=3, progress=False)
    assert [h["loss"] for h in again] == pytest.approx(losses, rel=1e-5)


@pytest.mark.skipif(not os.path.exists(os.path.join(mnist.FASHION_MNIST_ROOT,
                                                    "train-labels-idx1-ubyte.gz")),
                    reason="dataset-fashion-mnist is not installed")
def test_real_fashion_mnist_subset():
    fm = load_example()
    x, y = mnist.load_fashion_mnist("test")  # the smaller file
    assert x.shape == (10000, 784) and y.shape == (10000,)
    assert 0 <= y.numpy().min() and y.numpy().max() == 9
    xs, ys = x[:2048], y[:2048]
    model, history, _ = fm.train(xs, ys, epochs=2, batch_size=128, progress=False)
    assert history[1]["loss"] < history[0]["loss"] < 2.3


def test_save_and_resume_continue_the_same_run(tmp_path):
    fm = load_example()
    images, labels = synthetic(512, seed=2)
    write_split(tmp_path, images, labels, "train")
    x, y = mnist.load_fashion_mnist("train", root=str(tmp_path))
    ckpt = str(tmp_path / "ckpt.safetensors")
    _, whole, _ = fm.train(x, y, epochs=3, batch_size=64, seed=5, progress=False)
    _, first, _ = fm.train(x, y, epochs=3, batch_size=64, seed=5, progress=False, save=ckpt,
                           stop_after=2)
    saved = ev.load(ckpt)
    assert saved["epochs_done"] == 2 and set(saved["model"]) == {
        "0.weight", "0.bias", "2.weight", "2.bias"}
    model, rest, _ = fm.train(x, y, epochs=3, batch_size=64, seed=5, progress=False,
                              resume=ckpt)
    assert len(rest) == 1
    losses = [h["loss"] for h in first + rest]
    assert losses == pytest.approx([h["loss"] for h in whole], rel=1e-5)
    assert model.accuracy(x, y) > 0.5
