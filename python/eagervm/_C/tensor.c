/* The Tensor type: a thin handle to an ev_tensor (STYLE 28). Conversions
 * from Python data and NumPy, the sync points that hand data to Python
 * (numpy, tolist, item, repr), metadata, and indexing through views. The ops
 * (arithmetic, reductions, methods) live in ops.c. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "evpy.h"

/* ------------------------------------------------------------------ handle */

PyObject *evpy_tensor_wrap(evpy_state *st, ev_tensor *t)
{
    evpy_tensor *self = PyObject_New(evpy_tensor, st->tensor_type);
    if (!self) {
        ev_tensor_unref(t);
        return NULL;
    }
    self->t = t;
    self->gen = evpy_generation();
    return (PyObject *)self;
}

void evpy_tensor_dealloc(PyObject *op)
{
    evpy_tensor *self = EvTensor_CAST(op);
    PyTypeObject *tp = Py_TYPE(op);
    /* A tensor of the parent's runtime is leaked in a fork child: releasing
     * it would touch a runtime whose threads do not exist here. */
    if (self->gen == evpy_generation()) {
        ev_tensor_unref(self->t);
    }
    PyObject_Free(op);
    Py_DECREF(tp);
}

/* Copies t's elements in C order into dst with plain loads (no waiting):
 * only for a tensor no instruction can touch any more. */
static void host_gather(const ev_tensor *t, char *dst)
{
    int nd = ev_tensor_ndim(t);
    const int64_t *shape = ev_tensor_shape(t), *strides = ev_tensor_strides(t);
    size_t es = ev_dtype_size(ev_tensor_dtype(t));
    int64_t n = ev_tensor_numel(t);
    int64_t idx[EV_MAX_DIMS] = {0};
    const char *base = ev_tensor_data(t);
    for (int64_t k = 0; k < n; k++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++) {
            off += idx[d] * strides[d];
        }
        memcpy(dst + (size_t)k * es, base + off * (int64_t)es, es);
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < shape[d]) {
                break;
            }
            idx[d] = 0;
        }
    }
}

/* Adopts a tensor made before a fork into this process's runtime: the parent
 * drained its work before forking, so the bytes are final. Views of one
 * storage become separate tensors here (aliasing does not survive a fork). */
static int adopt(evpy_tensor *self)
{
    ev_tensor *old = self->t;
    size_t bytes = (size_t)ev_tensor_numel(old) * ev_dtype_size(ev_tensor_dtype(old));
    char *buf = malloc(bytes ? bytes : 1);
    if (!buf) {
        PyErr_NoMemory();
        return -1;
    }
    host_gather(old, buf);
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        free(buf);
        return -1;
    }
    ev_tensor *fresh;
    int rc = ev_from_host(&ex, ev_tensor_dtype(old), ev_tensor_ndim(old), ev_tensor_shape(old),
                          buf, &fresh);
    free(buf);
    if (rc) {
        evpy_raise(rc);
        return -1;
    }
    self->t = fresh; /* `old` is leaked on purpose, see evpy_tensor_dealloc */
    self->gen = evpy_generation();
    return 0;
}

ev_tensor *evpy_tensor_get(PyObject *op)
{
    evpy_tensor *self = EvTensor_CAST(op);
    if (self->gen != evpy_generation() && adopt(self) != 0) {
        return NULL;
    }
    return self->t;
}

/* ------------------------------------------------------------------ shapes */

int evpy_parse_shape(PyObject *const *args, Py_ssize_t nargs, int *ndim, int64_t *shape)
{
    PyObject *const *items = args;
    Py_ssize_t n = nargs;
    PyObject *seq = NULL;
    if (nargs == 1 && (PyTuple_Check(args[0]) || PyList_Check(args[0]))) {
        seq = PySequence_Fast(args[0], "shape must be a sequence");
        if (!seq) {
            return -1;
        }
        items = PySequence_Fast_ITEMS(seq);
        n = PySequence_Fast_GET_SIZE(seq);
    }
    if (n > EV_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "a shape has at most %d dimensions, got %zd",
                     EV_MAX_DIMS, n);
        Py_XDECREF(seq);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyBool_Check(items[i]) || !PyIndex_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "shape entries must be integers, not %.100s",
                         Py_TYPE(items[i])->tp_name);
            Py_XDECREF(seq);
            return -1;
        }
        long long v = PyLong_AsLongLong(items[i]);
        if (v == -1 && PyErr_Occurred()) {
            Py_XDECREF(seq);
            return -1;
        }
        shape[i] = v;
    }
    *ndim = (int)n;
    Py_XDECREF(seq);
    return 0;
}

static PyObject *shape_tuple(int nd, const int64_t *shape)
{
    PyObject *tup = PyTuple_New(nd);
    for (int i = 0; tup && i < nd; i++) {
        PyObject *v = PyLong_FromLongLong(shape[i]);
        if (!v) {
            Py_CLEAR(tup);
            break;
        }
        PyTuple_SET_ITEM(tup, i, v);
    }
    return tup;
}

/* ------------------------------------------------------- data -> tensor */

enum { KIND_NONE = -1 };

/* Scans nested sequences: fills shape from the first element at each depth,
 * checks every sequence has the length its depth requires, and raises the
 * kind to the widest leaf seen (bool < int < float). */
static int scan(PyObject *obj, int depth, int *ndim, int64_t *shape, int *kind)
{
    int is_seq = !PyUnicode_Check(obj) && !PyBytes_Check(obj) && PySequence_Check(obj) &&
                 !evpy_tensor_check(obj);
    Py_ssize_t n = -1;
    if (is_seq) {
        n = PySequence_Size(obj);
        if (n < 0) {
            PyErr_Clear(); /* a 0-d NumPy array: a leaf */
            is_seq = 0;
        }
    }
    if (!is_seq) {
        if (depth != *ndim) {
            PyErr_SetString(PyExc_ValueError,
                            "tensor(): the nested sequences are ragged (a scalar where a "
                            "sequence was expected)");
            return -1;
        }
        int k;
        if (PyBool_Check(obj)) {
            k = EV_KIND_BOOL;
        } else if (PyLong_Check(obj) || PyIndex_Check(obj)) {
            k = EV_KIND_INT;
        } else if (PyFloat_Check(obj) || (Py_TYPE(obj)->tp_as_number &&
                                          Py_TYPE(obj)->tp_as_number->nb_float)) {
            k = EV_KIND_FLOAT;
        } else {
            PyErr_Format(PyExc_TypeError, "tensor(): cannot convert %.100s to a tensor element",
                         Py_TYPE(obj)->tp_name);
            return -1;
        }
        *kind = k > *kind ? k : *kind;
        return 0;
    }
    if (depth == *ndim) {
        /* first visit at this depth: it fixes the dimension's size */
        if (depth >= EV_MAX_DIMS) {
            PyErr_Format(PyExc_ValueError, "tensor(): more than %d nested levels", EV_MAX_DIMS);
            return -1;
        }
        shape[depth] = n;
        (*ndim)++;
    } else if (depth > *ndim || shape[depth] != n) {
        PyErr_Format(PyExc_ValueError,
                     "tensor(): the nested sequences are ragged (length %zd at depth %d, "
                     "expected %lld)",
                     n, depth, depth < *ndim ? (long long)shape[depth] : -1LL);
        return -1;
    }
    PyObject *fast = PySequence_Fast(obj, "tensor(): expected a sequence");
    if (!fast) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (scan(PySequence_Fast_GET_ITEM(fast, i), depth + 1, ndim, shape, kind) != 0) {
            Py_DECREF(fast);
            return -1;
        }
    }
    Py_DECREF(fast);
    if (n == 0 && depth + 1 == *ndim) {
        return 0;
    }
    return 0;
}

/* Writes one Python scalar into dst as dtype (NumPy's conversions: floats
 * truncate toward zero into integers; out-of-range integers overflow). */
static int store_scalar(PyObject *obj, ev_dtype dtype, char *dst)
{
    switch (dtype) {
    case EV_BOOL: {
        int v = PyObject_IsTrue(obj);
        if (v < 0) {
            return -1;
        }
        *(uint8_t *)dst = (uint8_t)v;
        return 0;
    }
    case EV_UINT8:
    case EV_INT8:
    case EV_INT16:
    case EV_INT32:
    case EV_INT64: {
        long long v;
        if (PyFloat_Check(obj) || (!PyLong_Check(obj) && !PyIndex_Check(obj))) {
            double f = PyFloat_AsDouble(obj);
            if (f == -1.0 && PyErr_Occurred()) {
                return -1;
            }
            if (!(f > -9.3e18 && f < 9.3e18)) {
                PyErr_Format(PyExc_OverflowError, "cannot convert %R to %s", obj,
                             ev_dtype_name(dtype));
                return -1;
            }
            v = (long long)f;
        } else {
            PyObject *idx = PyNumber_Index(obj);
            if (!idx) {
                return -1;
            }
            v = PyLong_AsLongLong(idx);
            Py_DECREF(idx);
            if (v == -1 && PyErr_Occurred()) {
                return -1;
            }
        }
        int64_t lo, hi;
        ev_dtype_int_range(dtype, &lo, &hi);
        if (v < lo || v > hi) {
            /* NumPy 2's error (1.24 warns and wraps): a value never wraps
             * silently on its way in. */
            PyErr_Format(PyExc_OverflowError, "Python integer %lld out of bounds for %s", v,
                         ev_dtype_name(dtype));
            return -1;
        }
        switch (dtype) {
        case EV_UINT8:
            *(uint8_t *)dst = (uint8_t)v;
            break;
        case EV_INT8:
            *(int8_t *)dst = (int8_t)v;
            break;
        case EV_INT16:
            *(int16_t *)dst = (int16_t)v;
            break;
        case EV_INT32:
            *(int32_t *)dst = (int32_t)v;
            break;
        default:
            *(int64_t *)dst = (int64_t)v;
            break;
        }
        return 0;
    }
    case EV_FLOAT32:
    case EV_FLOAT64: {
        double f = PyFloat_AsDouble(obj);
        if (f == -1.0 && PyErr_Occurred()) {
            return -1;
        }
        if (dtype == EV_FLOAT32) {
            *(float *)dst = (float)f;
        } else {
            *(double *)dst = f;
        }
        return 0;
    }
    default:
        PyErr_SetString(PyExc_TypeError, "unsupported dtype");
        return -1;
    }
}

static int fill(PyObject *obj, int depth, int ndim, ev_dtype dtype, char **cursor)
{
    if (depth == ndim) {
        if (store_scalar(obj, dtype, *cursor) != 0) {
            return -1;
        }
        *cursor += ev_dtype_size(dtype);
        return 0;
    }
    PyObject *fast = PySequence_Fast(obj, "tensor(): expected a sequence");
    if (!fast) {
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (fill(PySequence_Fast_GET_ITEM(fast, i), depth + 1, ndim, dtype, cursor) != 0) {
            Py_DECREF(fast);
            return -1;
        }
    }
    Py_DECREF(fast);
    return 0;
}

static int from_sequence(PyObject *data, int dtype, ev_tensor **out)
{
    int ndim = 0, kind = KIND_NONE;
    int64_t shape[EV_MAX_DIMS];
    if (scan(data, 0, &ndim, shape, &kind) != 0) {
        return -1;
    }
    if (dtype < 0) {
        dtype = kind == EV_KIND_BOOL ? EV_BOOL : kind == EV_KIND_INT ? EV_INT64 : EV_FLOAT32;
    }
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        n *= shape[i];
    }
    size_t bytes = (size_t)n * ev_dtype_size(dtype);
    char *buf = PyMem_Malloc(bytes ? bytes : 1);
    if (!buf) {
        PyErr_NoMemory();
        return -1;
    }
    char *cursor = buf;
    ev_exec ex;
    if (fill(data, 0, ndim, (ev_dtype)dtype, &cursor) != 0 || evpy_exec(&ex) != 0) {
        PyMem_Free(buf);
        return -1;
    }
    int rc = ev_from_host(&ex, (ev_dtype)dtype, ndim, shape, buf, out);
    PyMem_Free(buf);
    return rc ? evpy_raise_int(rc) : 0;
}

/* The dtype a buffer's format maps to; `wide` says the items must be widened
 * on the host first (unsigned integers other than uint8 to int64, half to
 * float32). */
static int buffer_dtype(const Py_buffer *v, int *dtype, int *wide)
{
    const char *f = v->format ? v->format : "B";
    if (*f == '@' || *f == '=' || *f == '<') {
        f++;
    }
    *wide = 0;
    if (f[0] && f[1] == 0) {
        switch (f[0]) {
        case '?':
            *dtype = EV_BOOL;
            return 0;
        case 'f':
            *dtype = EV_FLOAT32;
            return 0;
        case 'd':
            *dtype = EV_FLOAT64;
            return 0;
        case 'e':
            *dtype = EV_FLOAT32;
            *wide = 1;
            return 0;
        case 'i':
        case 'l':
        case 'q':
            if (v->itemsize == 4) {
                *dtype = EV_INT32;
                return 0;
            }
            if (v->itemsize == 8) {
                *dtype = EV_INT64;
                return 0;
            }
            break;
        case 'B':
            *dtype = EV_UINT8;
            return 0;
        case 'b':
            *dtype = EV_INT8;
            return 0;
        case 'h':
            if (v->itemsize == 2) {
                *dtype = EV_INT16;
                return 0;
            }
            break;
        case 'H':
        case 'I':
        case 'L':
        case 'Q':
            *dtype = EV_INT64;
            *wide = 1;
            return 0;
        default:
            break;
        }
    }
    PyErr_Format(PyExc_TypeError, "tensor(): unsupported buffer format '%s'", v->format);
    return -1;
}

static int64_t read_int(const char *p, char f)
{
    switch (f) {
    case 'b':
        return *(const int8_t *)p;
    case 'B':
        return *(const uint8_t *)p;
    case 'h':
        return *(const int16_t *)p;
    case 'H':
        return *(const uint16_t *)p;
    case 'I':
        return *(const uint32_t *)p;
    default:
        return (int64_t)*(const uint64_t *)p; /* L, Q: wraps as a cast does */
    }
}

static int from_buffer(PyObject *data, int dtype, ev_tensor **out)
{
    Py_buffer v;
    if (PyObject_GetBuffer(data, &v, PyBUF_RECORDS_RO) != 0) {
        return -1;
    }
    int src_dtype, wide, rc = -1;
    char *tmp = NULL;
    int64_t shape[EV_MAX_DIMS];
    if (buffer_dtype(&v, &src_dtype, &wide) != 0) {
        goto done;
    }
    if (v.ndim > EV_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "tensor(): more than %d dimensions", EV_MAX_DIMS);
        goto done;
    }
    int64_t n = 1;
    for (int i = 0; i < v.ndim; i++) {
        shape[i] = v.shape ? v.shape[i] : v.len / v.itemsize;
        n *= shape[i];
    }
    const char *src = v.buf;
    if (!PyBuffer_IsContiguous(&v, 'C')) {
        tmp = PyMem_Malloc(v.len ? (size_t)v.len : 1);
        if (!tmp || PyBuffer_ToContiguous(tmp, &v, v.len, 'C') != 0) {
            if (!tmp) {
                PyErr_NoMemory();
            }
            goto done;
        }
        src = tmp;
    }
    char *widened = NULL;
    if (wide) {
        size_t es = ev_dtype_size(src_dtype);
        widened = PyMem_Malloc(n ? (size_t)n * es : 1);
        if (!widened) {
            PyErr_NoMemory();
            goto done;
        }
        char f = v.format[strlen(v.format) - 1];
        for (int64_t i = 0; i < n; i++) {
            const char *p = src + i * v.itemsize;
            if (f == 'e') {
                ((float *)widened)[i] = (float)PyFloat_Unpack2(p, 1);
            } else {
                ((int64_t *)widened)[i] = read_int(p, f);
            }
        }
        src = widened;
    }
    ev_exec ex;
    if (evpy_exec(&ex) == 0) {
        ev_tensor *t;
        int err = ev_from_host(&ex, (ev_dtype)src_dtype, v.ndim, shape, src, &t);
        if (err) {
            evpy_raise(err);
        } else if (dtype >= 0 && dtype != src_dtype) {
            err = ev_cast(&ex, t, (ev_dtype)dtype, out);
            ev_tensor_unref(t);
            if (err) {
                evpy_raise(err);
            } else {
                rc = 0;
            }
        } else {
            *out = t;
            rc = 0;
        }
    }
    PyMem_Free(widened);
done:
    PyMem_Free(tmp);
    PyBuffer_Release(&v);
    return rc;
}

int evpy_tensor_from_data(evpy_state *st, PyObject *data, int dtype, ev_tensor **out)
{
    if (evpy_tensor_check(data)) {
        ev_tensor *src = evpy_tensor_get(data);
        ev_exec ex;
        if (!src || evpy_exec(&ex) != 0) {
            return -1;
        }
        int rc = ev_cast(&ex, src, dtype < 0 ? ev_tensor_dtype(src) : (ev_dtype)dtype, out);
        return rc ? evpy_raise_int(rc) : 0;
    }
    if (PyObject_CheckBuffer(data) && !PyUnicode_Check(data)) {
        return from_buffer(data, dtype, out);
    }
    return from_sequence(data, dtype, out);
}

/* -------------------------------------------------------- tensor -> host */

static PyObject *numpy_module(evpy_state *st)
{
    if (!st->numpy) {
        st->numpy = PyImport_ImportModule("numpy");
        if (!st->numpy) {
            return NULL;
        }
    }
    return st->numpy;
}

/* A sync point that copies t's elements in C order into dst. */
static int copy_out(ev_tensor *t, void *dst)
{
    if (evpy_wait_tensor(t) != 0) {
        return -1;
    }
    ev_exec ex = {evpy_vm(), evpy_current_uid, NULL};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ev_to_host(&ex, t, dst);
    Py_END_ALLOW_THREADS
    return rc ? evpy_raise_int(rc) : 0;
}

static PyObject *scalar_from(ev_dtype dtype, const char *p)
{
    switch (dtype) {
    case EV_BOOL:
        return PyBool_FromLong(*(const uint8_t *)p);
    case EV_INT32:
        return PyLong_FromLong(*(const int32_t *)p);
    case EV_UINT8:
        return PyLong_FromLong(*(const uint8_t *)p);
    case EV_INT8:
        return PyLong_FromLong(*(const int8_t *)p);
    case EV_INT16:
        return PyLong_FromLong(*(const int16_t *)p);
    case EV_INT64:
        return PyLong_FromLongLong(*(const int64_t *)p);
    case EV_FLOAT32:
        return PyFloat_FromDouble(*(const float *)p);
    case EV_FLOAT64:
        return PyFloat_FromDouble(*(const double *)p);
    default:
        PyErr_SetString(PyExc_TypeError, "unsupported dtype");
        return NULL;
    }
}

static PyObject *build_list(ev_dtype dtype, int depth, int nd, const int64_t *shape,
                            const char **cursor)
{
    if (depth == nd) {
        PyObject *v = scalar_from(dtype, *cursor);
        *cursor += ev_dtype_size(dtype);
        return v;
    }
    PyObject *list = PyList_New((Py_ssize_t)shape[depth]);
    for (int64_t i = 0; list && i < shape[depth]; i++) {
        PyObject *item = build_list(dtype, depth + 1, nd, shape, cursor);
        if (!item) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

static PyObject *tensor_tolist(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    ev_tensor *t = evpy_tensor_get(self);
    if (!t) {
        return NULL;
    }
    ev_dtype dt = ev_tensor_dtype(t);
    size_t bytes = (size_t)ev_tensor_numel(t) * ev_dtype_size(dt);
    char *buf = PyMem_Malloc(bytes ? bytes : 1);
    if (!buf) {
        return PyErr_NoMemory();
    }
    PyObject *res = NULL;
    if (copy_out(t, buf) == 0) {
        const char *cursor = buf;
        res = build_list(dt, 0, ev_tensor_ndim(t), ev_tensor_shape(t), &cursor);
    }
    PyMem_Free(buf);
    return res;
}

static PyObject *tensor_item(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    ev_tensor *t = evpy_tensor_get(self);
    if (!t) {
        return NULL;
    }
    if (ev_tensor_numel(t) != 1) {
        PyErr_Format(PyExc_ValueError,
                     "item(): only a tensor with one element converts to a Python scalar "
                     "(this one has %lld)",
                     (long long)ev_tensor_numel(t));
        return NULL;
    }
    char buf[16];
    if (copy_out(t, buf) != 0) {
        return NULL;
    }
    return scalar_from(ev_tensor_dtype(t), buf);
}

static PyObject *tensor_numpy(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    evpy_state *st = evpy_state_of_type(Py_TYPE(self));
    ev_tensor *t = evpy_tensor_get(self);
    PyObject *np = t ? numpy_module(st) : NULL;
    if (!np) {
        return NULL;
    }
    PyObject *shape = shape_tuple(ev_tensor_ndim(t), ev_tensor_shape(t));
    PyObject *arr = shape ? PyObject_CallMethod(np, "empty", "Os", shape,
                                                ev_dtype_name(ev_tensor_dtype(t)))
                          : NULL;
    Py_XDECREF(shape);
    if (!arr) {
        return NULL;
    }
    Py_buffer v;
    if (PyObject_GetBuffer(arr, &v, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0) {
        Py_DECREF(arr);
        return NULL;
    }
    int rc = copy_out(t, v.buf);
    PyBuffer_Release(&v);
    if (rc != 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

static PyObject *tensor_array(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"dtype", "copy", NULL};
    PyObject *dtype = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OO:__array__", kwlist, &dtype, &copy)) {
        return NULL;
    }
    PyObject *arr = tensor_numpy(self, NULL);
    if (!arr || dtype == Py_None) {
        return arr;
    }
    PyObject *res = PyObject_CallMethod(arr, "astype", "O", dtype);
    Py_DECREF(arr);
    return res;
}

static PyObject *tensor_repr(PyObject *self)
{
    evpy_state *st = evpy_state_of_type(Py_TYPE(self));
    if (!st->format_fn) {
        PyObject *mod = PyImport_ImportModule("eagervm._repr");
        if (!mod) {
            return NULL;
        }
        st->format_fn = PyObject_GetAttrString(mod, "format_tensor");
        Py_DECREF(mod);
        if (!st->format_fn) {
            return NULL;
        }
    }
    return PyObject_CallOneArg(st->format_fn, self);
}

/* ---------------------------------------------------------------- metadata */

static PyObject *tensor_get_shape(PyObject *self, void *Py_UNUSED(closure))
{
    ev_tensor *t = EvTensor_CAST(self)->t; /* metadata survives a fork as is */
    return shape_tuple(ev_tensor_ndim(t), ev_tensor_shape(t));
}

static PyObject *tensor_get_ndim(PyObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(ev_tensor_ndim(EvTensor_CAST(self)->t));
}

static PyObject *tensor_get_dtype(PyObject *self, void *Py_UNUSED(closure))
{
    evpy_state *st = evpy_state_of_type(Py_TYPE(self));
    return Py_NewRef(st->dtypes[ev_tensor_dtype(EvTensor_CAST(self)->t)]);
}

static PyObject *tensor_get_device(PyObject *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString("cpu");
}

static PyObject *tensor_get_itemsize(PyObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(ev_dtype_size(ev_tensor_dtype(EvTensor_CAST(self)->t)));
}

static PyObject *tensor_get_T(PyObject *self, void *Py_UNUSED(closure))
{
    ev_tensor *t = evpy_tensor_get(self);
    if (!t) {
        return NULL;
    }
    int nd = ev_tensor_ndim(t);
    int dims[EV_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        dims[i] = nd - 1 - i;
    }
    ev_tensor *out;
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    int rc = ev_ag_permute(&ex, t, dims, &out);
    if (rc) {
        return evpy_raise(rc);
    }
    return evpy_tensor_wrap(evpy_state_of_type(Py_TYPE(self)), out);
}

static PyObject *tensor_numel(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromLongLong(ev_tensor_numel(EvTensor_CAST(self)->t));
}

static PyObject *tensor_dim(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromLong(ev_tensor_ndim(EvTensor_CAST(self)->t));
}

static PyObject *tensor_is_contiguous(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(ev_tensor_is_contiguous(EvTensor_CAST(self)->t));
}

static PyObject *tensor_size(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    ev_tensor *t = EvTensor_CAST(self)->t;
    int nd = ev_tensor_ndim(t);
    if (nargs == 0 || args[0] == Py_None) {
        return shape_tuple(nd, ev_tensor_shape(t));
    }
    long d = PyLong_AsLong(args[0]);
    if (d == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (d < -nd || d >= nd) {
        PyErr_Format(PyExc_IndexError, "size(): dimension %ld out of range for %d dimensions",
                     d, nd);
        return NULL;
    }
    return PyLong_FromLongLong(ev_tensor_shape(t)[d < 0 ? d + nd : d]);
}

static Py_ssize_t tensor_len(PyObject *self)
{
    ev_tensor *t = EvTensor_CAST(self)->t;
    if (ev_tensor_ndim(t) == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of a 0-d tensor");
        return -1;
    }
    return (Py_ssize_t)ev_tensor_shape(t)[0];
}

/* Python scalars from one-element tensors (each is a sync point). */
static PyObject *tensor_float(PyObject *self)
{
    PyObject *v = tensor_item(self, NULL);
    if (!v || PyFloat_Check(v)) {
        return v;
    }
    PyObject *f = PyNumber_Float(v);
    Py_DECREF(v);
    return f;
}

static PyObject *tensor_int(PyObject *self)
{
    PyObject *v = tensor_item(self, NULL);
    if (!v || PyLong_Check(v)) {
        return v;
    }
    PyObject *i = PyNumber_Long(v);
    Py_DECREF(v);
    return i;
}

static PyObject *tensor_index(PyObject *self)
{
    if (ev_dtype_is_float(ev_tensor_dtype(EvTensor_CAST(self)->t))) {
        PyErr_SetString(PyExc_TypeError,
                        "only integer tensors of a single element can be used as an index");
        return NULL;
    }
    return tensor_int(self);
}

static int tensor_bool(PyObject *self)
{
    ev_tensor *t = EvTensor_CAST(self)->t;
    if (ev_tensor_numel(t) != 1) {
        PyErr_SetString(PyExc_ValueError, "the truth value of a tensor with more than one "
                                          "element is ambiguous; use .any() or .all()");
        return -1;
    }
    PyObject *v = tensor_item(self, NULL);
    if (!v) {
        return -1;
    }
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* ---------------------------------------------------------------- indexing */

/* A bound from PySlice_Unpack as an int64: a bound clipped to Py_ssize_t
 * means "past that end", whatever the platform's Py_ssize_t. */
static int64_t py_bound(Py_ssize_t v)
{
    return v == PY_SSIZE_T_MAX ? INT64_MAX : v == PY_SSIZE_T_MIN ? INT64_MIN : (int64_t)v;
}

/* Applies an index (int, slice, None, Ellipsis, or a tuple of those) as a
 * chain of views of t. Returns a new reference in *out. */
static int index_view(ev_tensor *t, PyObject *key, ev_tensor **out)
{
    PyObject *const *items = &key;
    Py_ssize_t n = 1;
    if (PyTuple_Check(key)) {
        items = &PyTuple_GET_ITEM(key, 0);
        n = PyTuple_GET_SIZE(key);
    }
    int consume = 0, ellipses = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = items[i];
        if (it == Py_Ellipsis) {
            ellipses++;
        } else if (it != Py_None) {
            if (PyBool_Check(it) || evpy_tensor_check(it) || PyList_Check(it) ||
                !(PySlice_Check(it) || PyIndex_Check(it))) {
                PyErr_Format(PyExc_IndexError,
                             "only integers, slices (`:`), ellipsis (`...`) and None are "
                             "valid indices (got %.100s; tensor and boolean indices are not "
                             "supported yet)",
                             Py_TYPE(it)->tp_name);
                return -1;
            }
            consume++;
        }
    }
    int nd = ev_tensor_ndim(t);
    if (ellipses > 1) {
        PyErr_SetString(PyExc_IndexError, "an index can only have a single ellipsis ('...')");
        return -1;
    }
    if (consume > nd) {
        PyErr_Format(PyExc_IndexError, "too many indices for tensor: tensor is %d-dimensional, "
                     "but %d were indexed", nd, consume);
        return -1;
    }
    /* Each step is a recorded view when t requires grad. */
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return -1;
    }
    ev_tensor *cur = ev_tensor_ref(t), *next = NULL;
    int dim = 0, rc = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = items[i];
        if (it == Py_Ellipsis) {
            dim += nd - consume;
            continue;
        }
        if (it == Py_None) {
            rc = ev_ag_unsqueeze(&ex, cur, dim, &next);
            dim++;
        } else if (PySlice_Check(it)) {
            Py_ssize_t start, stop, step;
            if (PySlice_Unpack(it, &start, &stop, &step) < 0) {
                ev_tensor_unref(cur);
                return -1;
            }
            /* PySlice_Unpack has raised for a zero step and clipped the
             * bounds to Py_ssize_t, an omitted one to its extreme; ev_slice
             * clamps them as PySlice_AdjustIndices would, for either sign
             * of step. */
            rc = ev_ag_slice(&ex, cur, dim, py_bound(start), py_bound(stop), py_bound(step), &next);
            dim++;
        } else {
            Py_ssize_t idx = PyNumber_AsSsize_t(it, PyExc_IndexError);
            if (idx == -1 && PyErr_Occurred()) {
                ev_tensor_unref(cur);
                return -1;
            }
            int64_t size = ev_tensor_shape(cur)[dim];
            if (idx < -size || idx >= size) {
                ev_tensor_unref(cur);
                PyErr_Format(PyExc_IndexError,
                             "index %zd is out of bounds for dimension %d with size %lld", idx,
                             dim, (long long)size);
                return -1;
            }
            if (idx < 0) {
                idx += size;
            }
            ev_tensor *row;
            rc = ev_ag_slice(&ex, cur, dim, idx, idx + 1, 1, &row);
            if (rc == 0) {
                rc = ev_ag_squeeze(&ex, row, dim, &next);
                ev_tensor_unref(row);
            }
        }
        ev_tensor_unref(cur);
        cur = next;
        if (rc) {
            return evpy_raise_int(rc);
        }
    }
    *out = cur;
    return 0;
}

static PyObject *tensor_getitem(PyObject *self, PyObject *key)
{
    if (evpy_is_advanced_key(key)) {
        return evpy_getitem_advanced(self, key); /* indexing.c */
    }
    ev_tensor *t = evpy_tensor_get(self), *out;
    if (!t || index_view(t, key, &out) != 0) {
        return NULL;
    }
    return evpy_tensor_wrap(evpy_state_of_type(Py_TYPE(self)), out);
}

static PyObject *tensor_sq_item(PyObject *self, Py_ssize_t i)
{
    PyObject *key = PyLong_FromSsize_t(i);
    if (!key) {
        return NULL;
    }
    PyObject *r = tensor_getitem(self, key);
    Py_DECREF(key);
    return r;
}

static int tensor_setitem(PyObject *self, PyObject *key, PyObject *value)
{
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "tensor elements cannot be deleted");
        return -1;
    }
    if (evpy_is_advanced_key(key)) {
        PyObject *both[2] = {self, value};
        if (evpy_ag_refuse("assigning through advanced indexing, with a tensor that requires "
                           "grad,", 2, both) != 0) {
            return -1;
        }
        return evpy_setitem_advanced(self, key, value); /* indexing.c */
    }
    evpy_state *st = evpy_state_of_type(Py_TYPE(self));
    ev_tensor *t = evpy_tensor_get(self), *view;
    if (!t) {
        return -1;
    }
    /* Views made before t recorded would not see t's new graph. */
    int value_tracks = evpy_tensor_check(value) && ev_ag_requires_grad(evpy_tensor_get(value));
    if (value_tracks && ev_ag_is_grad_enabled() && !ev_ag_requires_grad(t) &&
        ev_tensor_has_views(t)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "autograd: assigning a tensor that requires grad into a tensor that "
                        "shares its elements with other views, made while it did not require "
                        "grad, is not supported (assign into a clone(), or under no_grad())");
        return -1;
    }
    if (index_view(t, key, &view) != 0) {
        return -1;
    }
    ev_exec ex;
    int rc = -1;
    if (evpy_exec(&ex) != 0) {
        goto done;
    }
    int err;
    if (PyBool_Check(value)) {
        err = ev_ag_fill_(&ex, view, ev_scalar_bool(value == Py_True));
    } else if (PyLong_CheckExact(value)) {
        long long v = PyLong_AsLongLong(value);
        if (v == -1 && PyErr_Occurred()) {
            goto done;
        }
        err = ev_ag_fill_(&ex, view, ev_scalar_int(v));
    } else if (PyFloat_CheckExact(value)) {
        err = ev_ag_fill_(&ex, view, ev_scalar_float(PyFloat_AS_DOUBLE(value)));
    } else {
        ev_tensor *src;
        int owned;
        err = 0;
        if (evpy_operand(st, value, view, &src, &owned) != 0) {
            goto done;
        }
        /* NumPy drops leading size-1 dimensions of the value (a[0, :2] =
         * [[1, 2]]); a squeezed view keeps the same storage. */
        while (ev_tensor_ndim(src) > ev_tensor_ndim(view) && ev_tensor_shape(src)[0] == 1) {
            ev_tensor *sq;
            if ((err = ev_ag_squeeze(&ex, src, 0, &sq)) != 0) {
                break;
            }
            if (owned) {
                ev_tensor_unref(src);
            }
            src = sq;
            owned = 1;
        }
        /* base[key] = src: records when either side requires grad. */
        err = err ? err : ev_ag_assign_(&ex, t, view, src);
        if (owned) {
            ev_tensor_unref(src);
        }
    }
    if (err) {
        evpy_raise(err);
        goto done;
    }
    rc = evpy_maybe_sync(view);
done:
    ev_tensor_unref(view);
    return rc;
}

/* -------------------------------------------------------------------- type */

static PyGetSetDef tensor_getset[] = {
    {"shape", tensor_get_shape, NULL, "the shape, a tuple", NULL},
    {"ndim", tensor_get_ndim, NULL, "the number of dimensions", NULL},
    {"dtype", tensor_get_dtype, NULL, "the element type", NULL},
    {"device", tensor_get_device, NULL, "where the memory lives ('cpu')", NULL},
    {"itemsize", tensor_get_itemsize, NULL, "bytes per element", NULL},
    {"T", tensor_get_T, NULL, "the view with the dimensions reversed", NULL},
    {"requires_grad", evpy_tensor_get_requires_grad, evpy_tensor_set_requires_grad,
     "whether gradients are computed for this tensor", NULL},
    {"grad", evpy_tensor_get_grad, evpy_tensor_set_grad,
     "the gradient accumulated by backward (None until then)", NULL},
    {"is_leaf", evpy_tensor_get_is_leaf, NULL, "whether no recorded op made this tensor",
     NULL},
    {"grad_fn", evpy_tensor_get_grad_fn, NULL, "the node that made this tensor, or None",
     NULL},
    {NULL},
};

static PyMethodDef tensor_own_methods[] = {
    {"numpy", tensor_numpy, METH_NOARGS,
     "numpy($self)\n--\n\nA sync point: a NumPy array holding a copy of the values."},
    {"tolist", tensor_tolist, METH_NOARGS,
     "tolist($self)\n--\n\nA sync point: the values as nested lists of Python scalars."},
    {"item", tensor_item, METH_NOARGS,
     "item($self)\n--\n\nA sync point: the value of a one-element tensor as a Python scalar."},
    {"__array__", (PyCFunction)(void (*)(void))tensor_array, METH_VARARGS | METH_KEYWORDS,
     NULL},
    {"numel", tensor_numel, METH_NOARGS, "numel($self)\n--\n\nThe number of elements."},
    {"dim", tensor_dim, METH_NOARGS, "dim($self)\n--\n\nThe number of dimensions."},
    {"size", (PyCFunction)(void (*)(void))tensor_size, METH_FASTCALL,
     "size($self, dim=None)\n--\n\nThe shape, or the size of one dimension."},
    {"is_contiguous", tensor_is_contiguous, METH_NOARGS, NULL},
    {NULL},
};

static PyType_Slot tensor_base_slots[] = {
    {Py_tp_dealloc, evpy_tensor_dealloc},
    {Py_tp_repr, tensor_repr},
    {Py_tp_getset, tensor_getset},
    {Py_mp_subscript, tensor_getitem},
    {Py_mp_ass_subscript, tensor_setitem},
    {Py_mp_length, tensor_len},
    {Py_sq_length, tensor_len},
    {Py_sq_item, tensor_sq_item},
    {Py_nb_float, tensor_float},
    {Py_nb_int, tensor_int},
    {Py_nb_index, tensor_index},
    {Py_nb_bool, tensor_bool},
    {Py_tp_doc, "An eagervm tensor: a handle to values computed asynchronously.\n\n"
                "Ops return at once; numpy(), tolist(), item() and repr() wait for the "
                "values (sync points)."},
    {0, NULL},
};

/* Concatenates NULL-terminated arrays (of PyMethodDef or PyType_Slot, told
 * by size and by the offset of the field that is NULL at the end) into one
 * allocation with room for `extra` more entries and the terminator. */
static void *concat_tables(void *const *tables, size_t n, size_t size, size_t key, size_t extra,
                           size_t *count)
{
    size_t total = 0;
    for (size_t t = 0; t < n; t++) {
        const char *e = tables[t];
        while (*(void *const *)(e + key)) {
            e += size;
            total++;
        }
    }
    char *out = calloc(total + extra + 1, size);
    if (!out) {
        return NULL;
    }
    size_t k = 0;
    for (size_t t = 0; t < n; t++) {
        const char *e = tables[t];
        while (*(void *const *)(e + key)) {
            memcpy(out + k++ * size, e, size);
            e += size;
        }
    }
    *count = total;
    return out;
}

int evpy_tensor_init_type(PyObject *module, evpy_state *st)
{
    /* One method table and one slot table, gathered from the files that
     * bind ops: this file, op_table.c (the op table) and export.c. */
    static PyMethodDef *methods;
    static PyType_Slot *slots;
    if (!methods) {
        void *const mtabs[] = {tensor_own_methods, evpy_tensor_table_methods,
                               evpy_tensor_export_methods, evpy_tensor_autograd_methods};
        void *const stabs[] = {tensor_base_slots, evpy_tensor_op_slots,
                               evpy_tensor_table_slots, evpy_tensor_export_slots};
        size_t nm, ns;
        methods = concat_tables(mtabs, 4, sizeof *methods, offsetof(PyMethodDef, ml_name), 0,
                                &nm);
        /* A slot table ends with slot 0 and pfunc NULL: test pfunc. */
        slots = concat_tables(stabs, 4, sizeof *slots, offsetof(PyType_Slot, pfunc), 1, &ns);
        if (!methods || !slots) {
            free(methods);
            free(slots);
            methods = NULL;
            slots = NULL;
            PyErr_NoMemory();
            return -1;
        }
        slots[ns] = (PyType_Slot){Py_tp_methods, methods};
    }
    PyType_Spec spec = {
        .name = "eagervm.Tensor",
        .basicsize = sizeof(evpy_tensor),
        /* Final: evpy_tensor_check relies on no subclass existing. Holds no
         * Python references, so it needs no GC tracking. */
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION |
                 Py_TPFLAGS_IMMUTABLETYPE,
        .slots = slots,
    };
    st->tensor_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &spec, NULL);
    if (!st->tensor_type) {
        return -1;
    }
    return PyModule_AddObjectRef(module, "Tensor", (PyObject *)st->tensor_type);
}
