"""Tensors from Python data and NumPy, metadata, sync points, indexing and
assignment, repr, and the argument errors raised at the call."""
import pickle

import numpy as np
import pytest

import eagervm as ev

DTYPES = [ev.bool, ev.uint8, ev.int8, ev.int16, ev.int32, ev.int64, ev.float32, ev.float64]


def test_dtype_inference():
    assert ev.tensor([1, 2]).dtype is ev.int64
    assert ev.tensor([1, 2.0]).dtype is ev.float32
    assert ev.tensor([True, False]).dtype is ev.bool
    assert ev.tensor(3).dtype is ev.int64
    assert ev.tensor(3.0).shape == ()
    assert ev.tensor([]).shape == (0,)
    assert ev.tensor([[1], [2]], dtype=ev.float64).dtype is ev.float64
    assert ev.tensor([1.7, -1.7], dtype="int32").tolist() == [1, -1]
    assert ev.tensor([1, 2], dtype=np.float32).dtype is ev.float32
    assert ev.tensor([0, 2], dtype=bool).tolist() == [False, True]


@pytest.mark.parametrize("npdt", ["bool", "uint8", "int8", "int16", "int32", "int64", "float32",
                                  "float64"])
def test_numpy_roundtrip(npdt):
    a = (np.random.default_rng(0).standard_normal((3, 4)) * 10).astype(npdt)
    t = ev.from_numpy(a)
    assert t.dtype.name == npdt and t.shape == (3, 4)
    b = t.numpy()
    assert b.dtype == a.dtype and np.array_equal(a, b)
    b[0, 0] = 1  # the array is a copy the user may keep and modify
    assert np.array_equal(t.numpy(), a)
    assert np.array_equal(np.asarray(t), a)
    assert np.asarray(t).dtype == a.dtype and np.asarray(t, dtype=np.float64).dtype == np.float64
    assert t.tolist() == a.tolist()
    assert ev.tensor(a).dtype.name == npdt  # the buffer protocol path, no widening
    assert ev.tensor(a[:, ::2]).tolist() == a[:, ::2].tolist()  # strided
    assert type(t[0, 0].item()) is type(a[0, 0].item())


def test_buffers_widened_and_strided():
    assert ev.tensor(np.array([1, 200], dtype=np.uint8)).tolist() == [1, 200]
    assert ev.tensor(np.array([1, 200], dtype=np.uint8)).dtype is ev.uint8
    assert ev.tensor(np.array([-1, 2], dtype=np.int8)).dtype is ev.int8
    assert ev.tensor(np.array([-1, 2], dtype=np.int16)).dtype is ev.int16
    # Unsigned types eagervm lacks are widened to int64.
    assert ev.tensor(np.array([1, 65535], dtype=np.uint16)).dtype is ev.int64
    assert ev.tensor(np.array([1, 65535], dtype=np.uint16)).tolist() == [1, 65535]
    assert ev.tensor(np.array([1.5], dtype=np.float16)).dtype is ev.float32
    a = np.arange(24.0).reshape(4, 6)[::2, 1::2]
    assert np.array_equal(ev.tensor(a).numpy(), a)
    assert ev.tensor(np.float64(2.5)).item() == 2.5
    assert ev.tensor(bytearray(b"\x01\x02")).tolist() == [1, 2]


@pytest.mark.parametrize("dt", DTYPES)
def test_dtype_objects(dt):
    assert dt.name == np.dtype(dt.name).name and str(dt) == dt.name
    assert dt.itemsize == np.dtype(dt.name).itemsize
    assert dt.is_floating_point == (dt.name.startswith("float"))
    assert repr(dt) == f"eagervm.{dt.name}"
    assert pickle.loads(pickle.dumps(dt)) is dt
    assert getattr(ev, dt.name) is dt and getattr(ev._C, dt.name) is dt
    # Named by a string, a NumPy dtype or a NumPy scalar type alike.
    assert ev.zeros(1, dtype=dt.name).dtype is dt
    assert ev.zeros(1, dtype=np.dtype(dt.name)).dtype is dt
    assert ev.zeros(1, dtype=np.dtype(dt.name).type).dtype is dt


def test_narrow_int_from_python_data():
    assert ev.tensor([0, 255], dtype=ev.uint8).tolist() == [0, 255]
    assert ev.tensor([-128, 127], dtype="int8").tolist() == [-128, 127]
    assert ev.tensor([[1.9, -1.9]], dtype=ev.int16).tolist() == [[1, -1]]
    assert ev.tensor(7, dtype=ev.uint8).item() == 7
    assert isinstance(ev.tensor(7, dtype=ev.int8).item(), int)
    # A Python value never wraps on its way in (NumPy 2's OverflowError).
    with pytest.raises(OverflowError, match="Python integer 256 out of bounds for uint8"):
        ev.tensor([256], dtype=ev.uint8)
    with pytest.raises(OverflowError, match="Python integer -1 out of bounds for uint8"):
        ev.tensor([-1], dtype=ev.uint8)
    with pytest.raises(OverflowError, match="Python integer -129 out of bounds for int8"):
        ev.tensor([-129], dtype=ev.int8)
    with pytest.raises(OverflowError, match="out of bounds for int16"):
        ev.tensor([40000], dtype=ev.int16)
    assert repr(ev.tensor([1, 2], dtype=ev.uint8)) == "tensor([1, 2], dtype=uint8)"
    assert repr(ev.tensor(-3, dtype=ev.int8)) == "tensor(-3, dtype=int8)"
    assert repr(ev.zeros(0, 2, dtype=ev.int16)).endswith("dtype=int16)")
    for dt in (ev.uint8, ev.int8, ev.int16):
        assert ev.zeros(2, 3, dtype=dt).tolist() == [[0] * 3] * 2
        assert ev.ones(2, dtype=dt).tolist() == [1, 1]
        assert ev.full((2,), 5, dtype=dt).tolist() == [5, 5]
        assert ev.empty(4, dtype=dt).dtype is dt
        assert ev.arange(5, dtype=dt).tolist() == list(range(5))
        assert ev.zeros_like(ev.ones(2, dtype=dt)).dtype is dt
        assert ev.eye(2, dtype=dt).tolist() == [[1, 0], [0, 1]]
        assert int(ev.tensor(3, dtype=dt)) == 3 and [9, 8, 7][ev.tensor(2, dtype=dt)] == 7
    assert ev.arange(250, 260, dtype=ev.uint8).tolist() == \
        np.arange(250, 260, dtype=np.uint8).tolist()  # wraps, as NumPy
    t = ev.zeros(3, dtype=ev.uint8)
    t[1] = 200
    t[2:] = ev.tensor([7], dtype=ev.int8)
    assert t.tolist() == [0, 200, 7]


def test_metadata():
    t = ev.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and t.ndim == 3 and t.numel() == 24 and len(t) == 2
    assert t.T.shape == (4, 3, 2) and t.dtype is ev.float32 and t.device == "cpu"
    assert t.size(1) == 3 and t.size() == (2, 3, 4)
    assert ev.ones((2, 3)).shape == ev.ones(2, 3).shape == (2, 3)
    assert t.to(ev.int32).dtype is ev.int32
    with pytest.raises(TypeError):
        len(ev.tensor(1.0))
    assert not hasattr(ev, "Thread")


def test_creation_against_numpy():
    assert np.array_equal(ev.arange(5).numpy(), np.arange(5))
    assert ev.arange(5).dtype is ev.int64 and ev.arange(0.0, 1.0, 0.25).dtype is ev.float32
    assert np.allclose(ev.arange(1, 2, 0.25).numpy(), np.arange(1, 2, 0.25))
    assert np.allclose(ev.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5))
    assert np.array_equal(ev.eye(3).numpy(), np.eye(3, dtype=np.float32))
    assert np.array_equal(ev.eye(2, 3, dtype=ev.int64).numpy(), np.eye(2, 3, dtype=np.int64))
    assert np.array_equal(ev.full((2, 2), 7).numpy(), np.full((2, 2), 7))
    assert ev.full((2,), 1.5).dtype is ev.float32
    assert np.array_equal(ev.zeros_like(ev.ones(2, dtype=ev.int32)).numpy(), [0, 0])
    assert ev.empty(3, dtype=ev.float64).dtype is ev.float64


def test_item_and_conversions():
    assert ev.tensor([[5]]).item() == 5
    assert isinstance(ev.tensor(2.5).item(), float)
    assert float(ev.tensor(2)) == 2.0 and int(ev.tensor(2.7)) == 2
    assert bool(ev.tensor([1])) and not bool(ev.tensor(0.0))
    assert [1, 2, 3][ev.tensor(1)] == 2
    with pytest.raises(ValueError, match="one element"):
        ev.ones(2).item()
    with pytest.raises(ValueError, match="ambiguous"):
        bool(ev.ones(2))


def test_repr():
    assert repr(ev.tensor([1.0, 2.0])) == "tensor([1., 2.], dtype=float32)"
    assert repr(ev.tensor(3)) == "tensor(3, dtype=int64)"
    assert "shape=(0, 3)" in repr(ev.zeros(0, 3))
    assert repr(ev.float32) == "eagervm.float32"


INDEXES = [
    (1,), (-1,), (slice(None),), (slice(1, None, 2),), (Ellipsis, 0), (None,),
    (0, slice(None, None, 3)), (slice(None), None, 1), (Ellipsis,), (1, 2, 3),
    (slice(-3, -1),), (slice(10, 20),), (None, Ellipsis, None),
]


@pytest.mark.parametrize("idx", INDEXES)
def test_getitem_matches_numpy(idx):
    a = np.arange(4 * 5 * 6).reshape(4, 5, 6)
    t = ev.tensor(a)
    key = idx if len(idx) > 1 else idx[0]
    assert np.array_equal(t[key].numpy(), a[key])


def test_views_share_storage_and_setitem():
    a = np.zeros((4, 5), dtype=np.float32)
    t = ev.tensor(a)
    t[1] = 3
    a[1] = 3
    t[:, ::2] = 1.5
    a[:, ::2] = 1.5
    t[..., 4] = ev.tensor([9.0, 8.0, 7.0, 6.0])
    a[..., 4] = [9.0, 8.0, 7.0, 6.0]
    row = t[2]
    row += 100  # writes through the view into t's storage
    a[2] += 100
    t[3, 1:3] = [[5, 6]]
    a[3, 1:3] = np.array([[5, 6]])
    assert np.array_equal(t.numpy(), a)
    t[...] = 0
    assert t.numpy().sum() == 0


def test_index_errors():
    t = ev.zeros(2, 3)
    with pytest.raises(IndexError, match="out of bounds"):
        t[2]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0]
    with pytest.raises(ValueError, match="step cannot be zero"):
        t[::0]
    with pytest.raises(IndexError, match="integer or bool tensors"):
        t[ev.tensor([0.0])]
    assert [x.tolist() for x in ev.tensor([[1, 2], [3, 4]])] == [[1, 2], [3, 4]]


def test_argument_errors_raise_at_call():
    with pytest.raises(ValueError, match=r"broadcast"):
        ev.ones(2, 3) + ev.ones(4)
    with pytest.raises(TypeError, match="dtype"):
        ev.zeros(2, dtype="complex64")
    with pytest.raises(TypeError):
        ev.ones("a")
    with pytest.raises(ValueError):
        ev.ones(2, 3).view(4)
    with pytest.raises(ValueError, match="ragged"):
        ev.tensor([[1, 2], [3]])
    with pytest.raises(TypeError):
        ev.tensor(["a"])
    with pytest.raises(TypeError):
        ev.tensor([True]) - ev.tensor([True])
    with pytest.raises(TypeError):
        x = ev.ones(2, dtype=ev.int32)
        x += 1.5
    with pytest.raises(TypeError, match="unexpected keyword"):
        ev.sum(ev.ones(2), axis=0)
    with pytest.raises(IndexError):
        ev.sum(ev.ones(2), dim=3)
    with pytest.raises(OverflowError):
        ev.tensor([2**40], dtype=ev.int32)


def test_too_large_shapes_refused_at_call():
    # Valid views whose broadcast, or whose own sizes, multiply past 2^59
    # elements: a ValueError naming the op and the shape, and the runtime
    # goes on as before.
    big = 2**40
    one = ev.ones(1, 1)
    col, row = one.expand(big, 1), one.expand(1, big)
    with pytest.raises(ValueError, match=r"add: shape \[1099511627776, 1099511627776\] is too large"):
        col + row
    with pytest.raises(ValueError, match="matmul: shape .* is too large"):
        col @ row
    with pytest.raises(ValueError, match="expand: .* is too large"):
        one.expand(big, big)
    # Empty, but its strides would overflow: refused as well.
    with pytest.raises(ValueError, match=r"zeros: shape \[0, 1099511627776, 1099511627776\]"):
        ev.zeros(0, big, big)
    with pytest.raises(ValueError, match="reshape: .* is too large"):
        ev.zeros(0).reshape(big, big, 0)
    assert (col[:3] + row[:, :2]).tolist() == [[2.0, 2.0]] * 3
