/* The export protocols: the buffer protocol, __dlpack__ and
 * __dlpack_device__, and from_dlpack (bound from its op table row). */
#include <stdlib.h>
#include <string.h>

#include "dlpack.h"
#include "evpy.h"

/* ------------------------------------------------------------------ export */

/* What a buffer export holds: the tensor it shows (kept alive until the
 * release) and the shape and strides in the buffer's units. */
typedef struct {
    ev_tensor *t;
    uint64_t gen;
    Py_ssize_t shape[EV_MAX_DIMS];
    Py_ssize_t strides[EV_MAX_DIMS];
} buf_info;

static const char *buffer_format(ev_dtype d)
{
    switch (d) {
    case EV_BOOL:
        return "?";
    case EV_INT32:
        return "i";
    case EV_INT64:
        return "q";
    case EV_FLOAT32:
        return "f";
    case EV_UINT8:
        return "B";
    case EV_INT8:
        return "b";
    case EV_INT16:
        return "h";
    default:
        return "d";
    }
}

/* A contiguous tensor holding t's values (t itself when it is contiguous),
 * waited for: a sync point. */
static ev_tensor *ready_contiguous(ev_tensor *t)
{
    ev_exec ex;
    ev_tensor *c;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    int rc = ev_contiguous(&ex, t, &c);
    if (rc) {
        evpy_raise(rc);
        return NULL;
    }
    if (evpy_wait_tensor(c) != 0) {
        ev_tensor_unref(c);
        return NULL;
    }
    return c;
}

/* The buffer protocol, read-only: a sync point that waits for the tensor,
 * then shows its memory (or, for a non-contiguous tensor, a contiguous copy).
 * The view shares memory with the tensor, so an in-place op issued later
 * shows through once it has run: read it before issuing more writes to the
 * tensor, or take a copy (numpy(), bytes()). Writable requests raise
 * BufferError, since an op queued on the tensor could write concurrently. */
static int tensor_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    if (flags & PyBUF_WRITABLE) {
        PyErr_SetString(PyExc_BufferError,
                        "eagervm Tensor buffers are read-only: ops write tensors "
                        "asynchronously; use t.numpy() for a writable copy");
        return -1;
    }
    ev_tensor *t = evpy_tensor_get(self);
    if (!t) {
        return -1;
    }
    buf_info *info = PyMem_Calloc(1, sizeof *info);
    if (!info) {
        PyErr_NoMemory();
        return -1;
    }
    info->t = ready_contiguous(t);
    if (!info->t) {
        PyMem_Free(info);
        return -1;
    }
    info->gen = evpy_generation();
    ev_tensor *c = info->t;
    ev_dtype dt = ev_tensor_dtype(c);
    int nd = ev_tensor_ndim(c);
    Py_ssize_t es = (Py_ssize_t)ev_dtype_size(dt);
    Py_ssize_t stride = es;
    for (int i = nd - 1; i >= 0; i--) {
        info->shape[i] = (Py_ssize_t)ev_tensor_shape(c)[i];
        info->strides[i] = stride;
        stride *= info->shape[i] ? info->shape[i] : 1;
    }
    view->buf = ev_tensor_data(c);
    view->obj = Py_NewRef(self);
    view->len = (Py_ssize_t)ev_tensor_numel(c) * es;
    view->readonly = 1;
    view->itemsize = es;
    view->format = (flags & PyBUF_FORMAT) ? (char *)buffer_format(dt) : NULL;
    view->ndim = nd;
    view->shape = (flags & PyBUF_ND) ? info->shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? info->strides : NULL;
    view->suboffsets = NULL;
    view->internal = info;
    return 0;
}

static void tensor_releasebuffer(PyObject *self, Py_buffer *view)
{
    buf_info *info = view->internal;
    if (info) {
        if (info->gen == evpy_generation()) {
            ev_tensor_unref(info->t);
        }
        PyMem_Free(info);
        view->internal = NULL;
    }
}

/* DLPack: the manager context keeps a tensor reference and the shape and
 * strides arrays. The deleter may run on any thread, without the GIL: it
 * touches no Python object. */
typedef struct {
    DLManagedTensor mt;
    ev_tensor *t;
    int64_t shape[EV_MAX_DIMS];
    int64_t strides[EV_MAX_DIMS];
} dl_ctx;

static void dl_deleter(DLManagedTensor *self)
{
    dl_ctx *ctx = self->manager_ctx;
    ev_tensor_unref(ctx->t);
    free(ctx);
}

static void dl_capsule_destructor(PyObject *capsule)
{
    if (PyCapsule_IsValid(capsule, "dltensor")) {
        /* Never consumed: the deleter is ours to call. */
        DLManagedTensor *mt = PyCapsule_GetPointer(capsule, "dltensor");
        if (mt && mt->deleter) {
            mt->deleter(mt);
        }
    }
    PyErr_Clear();
}

static int dl_dtype(ev_dtype d, DLDataType *out)
{
    out->lanes = 1;
    out->bits = (uint8_t)(ev_dtype_size(d) * 8);
    switch (d) {
    case EV_BOOL:
        out->code = kDLBool;
        return 0;
    case EV_INT32:
    case EV_INT64:
    case EV_INT8:
    case EV_INT16:
        out->code = kDLInt;
        return 0;
    case EV_UINT8:
        out->code = kDLUInt;
        return 0;
    default:
        out->code = kDLFloat;
        return 0;
    }
}

/* t.__dlpack__(stream=None): a sync point (waits for t), then a capsule
 * that shares t's memory (or a copy's, for an expanded tensor or one with a
 * negative stride). Writes through the consumer's view are only safe while
 * no op is queued on t. */
static PyObject *tensor_dlpack(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    static const char *const names[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *a[4];
    if (evpy_parse_args("__dlpack__", args, nargs, kwnames, names, 1, 0, a) != 0) {
        return NULL;
    }
    if (a[0] && a[0] != Py_None) {
        PyErr_SetString(PyExc_ValueError, "__dlpack__(): stream must be None for a cpu tensor");
        return NULL;
    }
    ev_tensor *t = evpy_tensor_get(self);
    if (!t) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    dl_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        return PyErr_NoMemory();
    }
    /* DLPack allows any strides, but consumers do not all take them: stride-0
     * (expanded) tensors confuse some, and PyTorch and TensorFlow reject
     * negative strides (PyTorch versions have aborted on them). Export those
     * as a contiguous copy, which shares nothing with t. */
    ev_tensor *src = ev_tensor_ref(t);
    int nd = ev_tensor_ndim(t);
    for (int i = 0; i < nd; i++) {
        if (ev_tensor_strides(t)[i] <= 0 && ev_tensor_shape(t)[i] > 1) {
            ev_tensor_unref(src);
            int rc = ev_contiguous(&ex, t, &src);
            if (rc) {
                free(ctx);
                return evpy_raise(rc);
            }
            break;
        }
    }
    if (evpy_wait_tensor(src) != 0) {
        ev_tensor_unref(src);
        free(ctx);
        return NULL;
    }
    ctx->t = src;
    for (int i = 0; i < nd; i++) {
        ctx->shape[i] = ev_tensor_shape(src)[i];
        ctx->strides[i] = ev_tensor_strides(src)[i];
    }
    DLTensor *dl = &ctx->mt.dl_tensor;
    dl->data = ev_tensor_data(src);
    dl->device.device_type = kDLCPU;
    dl->device.device_id = 0;
    dl->ndim = nd;
    dl_dtype(ev_tensor_dtype(src), &dl->dtype);
    dl->shape = ctx->shape;
    dl->strides = ctx->strides;
    dl->byte_offset = 0;
    ctx->mt.manager_ctx = ctx;
    ctx->mt.deleter = dl_deleter;
    PyObject *cap = PyCapsule_New(&ctx->mt, "dltensor", dl_capsule_destructor);
    if (!cap) {
        dl_deleter(&ctx->mt);
    }
    return cap;
}

static PyObject *tensor_dlpack_device(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return Py_BuildValue("(ii)", (int)kDLCPU, 0);
}

/* from_dlpack(x): a new tensor holding a copy of the data of x (an object
 * with __dlpack__, or a "dltensor" capsule, which is consumed). */
PyObject *evpy_from_dlpack_fn(evpy_state *st, int code, PyObject *const *args,
                                Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"x", NULL};
    PyObject *a[1];
    if (evpy_parse_args("from_dlpack", args, nargs, kwnames, names, 1, 1, a) != 0) {
        return NULL;
    }
    PyObject *cap;
    if (PyCapsule_CheckExact(a[0])) {
        cap = Py_NewRef(a[0]);
    } else {
        PyObject *meth = PyObject_GetAttrString(a[0], "__dlpack__");
        if (!meth) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "from_dlpack(): %.100s does not support DLPack "
                                          "(no __dlpack__ method)", Py_TYPE(a[0])->tp_name);
            return NULL;
        }
        cap = PyObject_CallNoArgs(meth);
        Py_DECREF(meth);
        if (!cap) {
            return NULL;
        }
    }
    DLManagedTensor *mt = PyCapsule_IsValid(cap, "dltensor")
                              ? PyCapsule_GetPointer(cap, "dltensor")
                              : NULL;
    if (!mt) {
        PyErr_Clear();
        Py_DECREF(cap);
        PyErr_SetString(PyExc_ValueError, "from_dlpack(): expected an unconsumed DLPack "
                                          "capsule named 'dltensor'");
        return NULL;
    }
    DLTensor *dl = &mt->dl_tensor;
    PyObject *res = NULL;
    int dtype = -1;
    if (dl->device.device_type != kDLCPU) {
        PyErr_Format(PyExc_BufferError, "from_dlpack(): only cpu data is supported (device "
                                        "type %d)", (int)dl->device.device_type);
        goto out;
    }
    if (dl->dtype.lanes == 1) {
        if (dl->dtype.code == kDLBool && dl->dtype.bits == 8) {
            dtype = EV_BOOL;
        } else if (dl->dtype.code == kDLInt && dl->dtype.bits == 32) {
            dtype = EV_INT32;
        } else if (dl->dtype.code == kDLInt && dl->dtype.bits == 64) {
            dtype = EV_INT64;
        } else if (dl->dtype.code == kDLInt && dl->dtype.bits == 8) {
            dtype = EV_INT8;
        } else if (dl->dtype.code == kDLInt && dl->dtype.bits == 16) {
            dtype = EV_INT16;
        } else if (dl->dtype.code == kDLUInt && dl->dtype.bits == 8) {
            dtype = EV_UINT8;
        } else if (dl->dtype.code == kDLFloat && dl->dtype.bits == 32) {
            dtype = EV_FLOAT32;
        } else if (dl->dtype.code == kDLFloat && dl->dtype.bits == 64) {
            dtype = EV_FLOAT64;
        }
    }
    if (dtype < 0) {
        PyErr_Format(PyExc_TypeError, "from_dlpack(): unsupported DLPack dtype (code %d, %d "
                                      "bits, %d lanes)", (int)dl->dtype.code,
                     (int)dl->dtype.bits, (int)dl->dtype.lanes);
        goto out;
    }
    if (dl->ndim < 0 || dl->ndim > EV_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "from_dlpack(): %d dimensions (at most %d)", dl->ndim,
                     EV_MAX_DIMS);
        goto out;
    }
    size_t es = ev_dtype_size(dtype);
    int64_t n = 1;
    for (int i = 0; i < dl->ndim; i++) {
        n *= dl->shape[i];
    }
    const char *base = (const char *)dl->data + dl->byte_offset;
    /* C-contiguous strides (NumPy 2 always gives strides) are as good as
     * none: the data go straight into the tensor, one copy. */
    int dense = n > 0;
    if (dl->strides) {
        int64_t step = 1;
        for (int d = dl->ndim - 1; dense && d >= 0; d--) {
            dense = dl->shape[d] == 1 || dl->strides[d] == step;
            step *= dl->shape[d];
        }
    }
    char *buf = NULL;
    if (!dense) {
        buf = PyMem_Malloc(n ? (size_t)n * es : 1);
        if (!buf) {
            PyErr_NoMemory();
            goto out;
        }
    }
    if (!dense && !dl->strides) {
        if (n) {
            memcpy(buf, base, (size_t)n * es);
        }
    } else if (!dense) {
        int64_t idx[EV_MAX_DIMS] = {0};
        for (int64_t j = 0; j < n; j++) {
            int64_t off = 0;
            for (int d = 0; d < dl->ndim; d++) {
                off += idx[d] * dl->strides[d];
            }
            memcpy(buf + (size_t)j * es, base + off * (int64_t)es, es);
            for (int d = dl->ndim - 1; d >= 0; d--) {
                if (++idx[d] < dl->shape[d]) {
                    break;
                }
                idx[d] = 0;
            }
        }
    }
    ev_exec ex;
    if (evpy_exec(&ex) == 0) {
        ev_tensor *out;
        int rc = ev_from_host(&ex, (ev_dtype)dtype, dl->ndim, dl->shape, dense ? base : buf,
                              &out);
        res = evpy_finish(st, rc, out);
    }
    PyMem_Free(buf);
out:
    /* Consumed: mark the capsule used and release the producer's memory. */
    if (PyCapsule_SetName(cap, "used_dltensor") == 0 && mt->deleter) {
        mt->deleter(mt);
    }
    Py_DECREF(cap);
    return res;
}


PyMethodDef evpy_tensor_export_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))tensor_dlpack, EVPY_FASTKW,
     "__dlpack__($self, stream=None)\n--\n\nA sync point: waits for the tensor and returns a "
     "DLPack capsule sharing its memory (cpu)."},
    {"__dlpack_device__", tensor_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self)\n--\n\n(1, 0): cpu."},
    {NULL},
};

PyType_Slot evpy_tensor_export_slots[] = {
    {Py_bf_getbuffer, tensor_getbuffer},
    {Py_bf_releasebuffer, tensor_releasebuffer},
    {0, NULL},
};
