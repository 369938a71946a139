/* Ops for Python: each C op of ops.h and tensor.h bound once as a module
 * function (eagervm.add(a, b)) and, where NumPy or PyTorch has one, as a
 * Tensor method and operator. Python scalars mix with tensors as NumPy's weak
 * scalars do. Argument errors raise at the call (DESIGN rule 5). */
#include <math.h>
#include <string.h>

#include "evpy.h"

/* --------------------------------------------------------------- arguments */

/* Matches positional and keyword arguments to `names` (NULL-terminated);
 * out[i] is a borrowed reference or NULL when absent. The first `npos`
 * names may be given by position, the first `nreq` are required. */
int evpy_parse_args(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                    const char *const *names, int npos, int nreq, PyObject **out)
{
    int n = 0;
    while (names[n]) {
        out[n] = NULL;
        n++;
    }
    if (nargs > npos) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional arguments (%zd given)",
                     fn, npos, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        out[i] = args[i];
    }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int found = -1;
        for (int i = 0; i < n; i++) {
            if (PyUnicode_CompareWithASCIIString(key, names[i]) == 0) {
                found = i;
                break;
            }
        }
        if (found < 0) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fn,
                         key);
            return -1;
        }
        if (out[found]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fn,
                         names[found]);
            return -1;
        }
        out[found] = args[nargs + k];
    }
    for (int i = 0; i < nreq; i++) {
        if (!out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fn, names[i]);
            return -1;
        }
    }
    return 0;
}

ev_tensor *evpy_need_tensor(const char *fn, PyObject *obj)
{
    if (!evpy_tensor_check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s(): expected a Tensor, got %.100s", fn,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return evpy_tensor_get(obj);
}

int evpy_parse_bool(PyObject *obj, int dflt)
{
    return obj ? PyObject_IsTrue(obj) : dflt;
}

int evpy_parse_int(const char *fn, const char *what, PyObject *obj, long *out)
{
    if (PyBool_Check(obj) || !PyIndex_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be an integer, not %.100s", fn, what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = PyLong_AsLong(obj);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* dim=None (every dimension), an int, or a sequence of ints. */
int evpy_parse_dims(const char *fn, PyObject *obj, int *ndims, int *dims, int *all)
{
    *ndims = 0;
    *all = !obj || obj == Py_None;
    if (*all) {
        return 0;
    }
    if (PyTuple_Check(obj) || PyList_Check(obj)) {
        Py_ssize_t n = PySequence_Size(obj);
        if (n > EV_MAX_DIMS) {
            PyErr_Format(PyExc_ValueError, "%s(): too many dimensions", fn);
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            long d;
            PyObject *it = PySequence_GetItem(obj, i);
            int rc = it ? evpy_parse_int(fn, "dim", it, &d) : -1;
            Py_XDECREF(it);
            if (rc) {
                return -1;
            }
            dims[i] = (int)d;
        }
        *ndims = (int)n;
        return 0;
    }
    long d;
    if (evpy_parse_int(fn, "dim", obj, &d) != 0) {
        return -1;
    }
    dims[0] = (int)d;
    *ndims = 1;
    return 0;
}

/* Converts a Python number to an ev_scalar (bool, int64 or float64). */
static int to_scalar(const char *fn, PyObject *obj, ev_scalar *out)
{
    if (PyBool_Check(obj)) {
        *out = ev_scalar_bool(obj == Py_True);
    } else if (PyLong_Check(obj) || (PyIndex_Check(obj) && !PyFloat_Check(obj))) {
        long long v = PyLong_AsLongLong(obj);
        if (v == -1 && PyErr_Occurred()) {
            return -1;
        }
        *out = ev_scalar_int(v);
    } else if (PyFloat_Check(obj) || PyNumber_Check(obj)) {
        double v = PyFloat_AsDouble(obj);
        if (v == -1.0 && PyErr_Occurred()) {
            return -1;
        }
        *out = ev_scalar_float(v);
    } else {
        PyErr_Format(PyExc_TypeError, "%s(): expected a number, got %.100s", fn,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 0;
}

/* The result of an op: raise on failure, wait under EAGERVM_SYNC, wrap. */
PyObject *evpy_finish(evpy_state *st, int rc, ev_tensor *out)
{
    if (rc) {
        return evpy_raise(rc);
    }
    if (evpy_maybe_sync(out) != 0) {
        ev_tensor_unref(out);
        return NULL;
    }
    return evpy_tensor_wrap(st, out);
}

/* ---------------------------------------------------------------- operands */

/* A 0-d tensor holding a Python scalar, made on the host (no instruction). */
static int scalar_tensor(ev_dtype dtype, PyObject *obj, ev_tensor **out)
{
    union {
        uint8_t b;
        int8_t i8;
        int16_t i16;
        int32_t i32;
        int64_t i64;
        float f32;
        double f64;
    } v;
    switch (dtype) {
    case EV_BOOL:
        v.b = (uint8_t)PyObject_IsTrue(obj);
        break;
    case EV_UINT8: /* weak_dtype chose a dtype that holds the value */
        v.b = (uint8_t)PyLong_AsLong(obj);
        break;
    case EV_INT8:
        v.i8 = (int8_t)PyLong_AsLong(obj);
        break;
    case EV_INT16:
        v.i16 = (int16_t)PyLong_AsLong(obj);
        break;
    case EV_INT32:
        v.i32 = (int32_t)PyLong_AsLong(obj);
        break;
    case EV_INT64:
        v.i64 = PyLong_AsLongLong(obj);
        break;
    case EV_FLOAT32:
        v.f32 = (float)PyFloat_AsDouble(obj);
        break;
    default:
        v.f64 = PyFloat_AsDouble(obj);
        break;
    }
    if (PyErr_Occurred()) {
        return -1;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return -1;
    }
    int rc = ev_from_host(&ex, dtype, 0, NULL, &v, out);
    return rc ? evpy_raise_int(rc) : 0;
}

/* The smallest dtype that holds the integer v, preferring uint8 for 0..255
 * (NumPy's min_scalar_type among eagervm's dtypes: it has no uint16, uint32
 * or uint64, so larger values take the next signed dtype). */
static ev_dtype min_int_dtype(long long v)
{
    static const ev_dtype order[] = {EV_UINT8, EV_INT8, EV_INT16, EV_INT32};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        int64_t lo, hi;
        ev_dtype_int_range(order[i], &lo, &hi);
        if (v >= lo && v <= hi) {
            return order[i];
        }
    }
    return EV_INT64;
}

/* NumPy's weak scalars (NumPy 1.x value-based casting): a Python scalar
 * takes the dtype of the tensor it meets when that dtype can hold it within
 * the scalar's kind (an int with a uint8, int8, int16 or int32 tensor, a
 * float with a float32 tensor, keep the tensor's dtype). An int too large
 * for an integer tensor takes the smallest dtype that holds it, and the
 * promotion then widens the result: int8 + 200 is int16, uint8 + -1 is
 * int16, int32 + 2**40 is int64, as NumPy 1.24; where NumPy would pick an
 * unsigned type eagervm lacks (uint8 + 256 is uint16 there) the result is
 * the signed type that holds the same values (int16). An int with a bool
 * tensor, or with no tensor, is int64; a float with a non-float tensor is
 * float32, the default float dtype (NumPy: float64; PyTorch: float32).
 * PyTorch keeps an integer tensor's dtype for any int (wrapping); eagervm
 * keeps NumPy's rule, which never wraps the scalar. */
static ev_dtype weak_dtype(PyObject *obj, const ev_tensor *like)
{
    int have = like != NULL;
    ev_dtype ld = have ? ev_tensor_dtype(like) : EV_DTYPE_COUNT;
    int lkind = have ? ev_dtype_get_info(ld)->kind : -1;
    if (PyBool_Check(obj)) {
        return have ? ld : EV_BOOL;
    }
    if (PyLong_Check(obj)) {
        if (lkind == EV_KIND_FLOAT) {
            return ld;
        }
        if (lkind == EV_KIND_INT && ld != EV_INT64) {
            int overflow;
            long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
            int64_t lo, hi;
            ev_dtype_int_range(ld, &lo, &hi);
            if (overflow) {
                return EV_INT64; /* scalar_tensor raises OverflowError */
            }
            return v >= lo && v <= hi ? ld : min_int_dtype(v);
        }
        return EV_INT64;
    }
    return lkind == EV_KIND_FLOAT ? ld : EV_FLOAT32;
}

int evpy_is_py_scalar(PyObject *obj)
{
    return PyBool_Check(obj) || PyLong_Check(obj) || PyFloat_Check(obj);
}

int evpy_operand(evpy_state *st, PyObject *obj, ev_tensor *like, ev_tensor **out, int *owned)
{
    *owned = 0;
    if (evpy_tensor_check(obj)) {
        *out = evpy_tensor_get(obj);
        return *out ? 0 : -1;
    }
    *owned = 1;
    if (evpy_is_py_scalar(obj)) {
        return scalar_tensor(weak_dtype(obj, like), obj, out);
    }
    return evpy_tensor_from_data(st, obj, -1, out);
}

/* 1 if obj could be an operand (operators return NotImplemented otherwise,
 * so Python may try the other side). */
int evpy_operand_like(PyObject *obj)
{
    return evpy_tensor_check(obj) || evpy_is_py_scalar(obj) || PyList_Check(obj) ||
           PyTuple_Check(obj) || PyObject_CheckBuffer(obj);
}

/* clamp(input, min=None, max=None) and clamp_ (code 1). */
PyObject *evpy_clamp_fn(evpy_state *st, int inplace, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames)
{
    static const char *const names[] = {"input", "min", "max", NULL};
    PyObject *a[3];
    ev_tensor *x;
    if (evpy_parse_args("clamp", args, nargs, kwnames, names, 3, 1, a) != 0 ||
        !(x = evpy_need_tensor("clamp", a[0]))) {
        return NULL;
    }
    ev_scalar lo, hi;
    int has_lo = a[1] && a[1] != Py_None, has_hi = a[2] && a[2] != Py_None;
    if ((has_lo && to_scalar("clamp", a[1], &lo) != 0) ||
        (has_hi && to_scalar("clamp", a[2], &hi) != 0)) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    if (inplace) {
        int rc = ev_ag_clamp_(&ex, x, has_lo ? &lo : NULL, has_hi ? &hi : NULL);
        if (rc) {
            return evpy_raise(rc);
        }
        return evpy_maybe_sync(x) ? NULL : Py_NewRef(a[0]);
    }
    ev_tensor *out;
    int rc = ev_ag_clamp(&ex, x, has_lo ? &lo : NULL, has_hi ? &hi : NULL, &out);
    return evpy_finish(st, rc, out);
}

/* to(dtype) / cast(input, dtype): always a new tensor, as ev_cast. */
PyObject *evpy_cast_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames)
{
    static const char *const names[] = {"input", "dtype", NULL};
    PyObject *a[2];
    ev_tensor *x;
    int dtype;
    if (evpy_parse_args("to", args, nargs, kwnames, names, 2, 2, a) != 0 ||
        !(x = evpy_need_tensor("to", a[0])) || evpy_parse_dtype(st, a[1], &dtype) != 0) {
        return NULL;
    }
    if (dtype < 0) {
        PyErr_SetString(PyExc_TypeError, "to(): dtype must not be None");
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_tensor *out;
    int rc = ev_ag_cast(&ex, x, (ev_dtype)dtype, &out);
    return evpy_finish(st, rc, out);
}

/* -------------------------------------------------------------- reductions */

/* sum/mean/prod/max/min(input, dim=None, keepdim=False); values as NumPy. */
PyObject *evpy_reduce_fn(evpy_state *st, int op, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames)
{
    static const char *const names[] = {"input", "dim", "keepdim", NULL};
    PyObject *a[3];
    const char *fn = ev_reduce_op_name(op);
    ev_tensor *x;
    int dims[EV_MAX_DIMS], ndims, all, keep;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 3, 1, a) != 0 ||
        !(x = evpy_need_tensor(fn, a[0])) || evpy_parse_dims(fn, a[1], &ndims, dims, &all) != 0 ||
        (keep = evpy_parse_bool(a[2], 0)) < 0) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_tensor *out;
    int rc = ev_ag_reduce(&ex, op, x, ndims, all ? NULL : dims, keep, &out);
    return evpy_finish(st, rc, out);
}

/* argmax/argmin(input, dim=None, keepdim=False); code 0 argmax, 1 argmin. */
PyObject *evpy_arg_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames)
{
    static const char *const names[] = {"input", "dim", "keepdim", NULL};
    PyObject *a[3];
    const char *fn = code ? "argmin" : "argmax";
    ev_tensor *x;
    int keep;
    long d = 0;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 3, 1, a) != 0 ||
        !(x = evpy_need_tensor(fn, a[0])) || (keep = evpy_parse_bool(a[2], 0)) < 0) {
        return NULL;
    }
    int has_dim = a[1] && a[1] != Py_None;
    if (has_dim && evpy_parse_int(fn, "dim", a[1], &d) != 0) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    int dim = (int)d;
    ev_tensor *out;
    int rc = (code ? ev_argmin : ev_argmax)(&ex, x, has_dim ? &dim : NULL, keep, &out);
    return evpy_finish(st, rc, out);
}

/* var/std(input, dim=None, *, correction=1, keepdim=False, unbiased=None);
 * code 0 var, 1 std. */
PyObject *evpy_var_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames)
{
    static const char *const names[] = {"input", "dim", "correction", "keepdim", "unbiased",
                                        NULL};
    PyObject *a[5];
    const char *fn = code ? "std" : "var";
    ev_tensor *x;
    int dims[EV_MAX_DIMS], ndims, all, keep;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 2, 1, a) != 0 ||
        !(x = evpy_need_tensor(fn, a[0])) || evpy_parse_dims(fn, a[1], &ndims, dims, &all) != 0 ||
        (keep = evpy_parse_bool(a[3], 0)) < 0) {
        return NULL;
    }
    double correction = 1.0;
    if (a[2] && a[2] != Py_None) {
        correction = PyFloat_AsDouble(a[2]);
        if (correction == -1.0 && PyErr_Occurred()) {
            return NULL;
        }
    }
    if (a[4] && a[4] != Py_None) {
        int u = PyObject_IsTrue(a[4]);
        if (u < 0) {
            return NULL;
        }
        correction = u ? 1.0 : 0.0;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_tensor *out;
    int rc = ev_ag_var(&ex, x, ndims, all ? NULL : dims, correction, keep, code, &out);
    return evpy_finish(st, rc, out);
}

/* softmax/log_softmax(input, dim); code 0 softmax, 1 log_softmax. */
PyObject *evpy_softmax_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    static const char *const names[] = {"input", "dim", NULL};
    PyObject *a[2];
    const char *fn = code ? "log_softmax" : "softmax";
    ev_tensor *x;
    long d;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 2, 2, a) != 0 ||
        !(x = evpy_need_tensor(fn, a[0])) || evpy_parse_int(fn, "dim", a[1], &d) != 0) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_tensor *out;
    int rc = (code ? ev_ag_log_softmax : ev_ag_softmax)(&ex, x, (int)d, &out);
    return evpy_finish(st, rc, out);
}

static PyObject *matmul_objs(evpy_state *st, PyObject *a, PyObject *b)
{
    ev_tensor *ta, *tb;
    int own_a, own_b;
    if (evpy_operand(st, a, NULL, &ta, &own_a) != 0) {
        return NULL;
    }
    PyObject *res = NULL;
    if (evpy_operand(st, b, NULL, &tb, &own_b) == 0) {
        ev_exec ex;
        if (evpy_exec(&ex) == 0) {
            ev_tensor *out;
            int rc = ev_ag_matmul(&ex, ta, tb, &out);
            res = evpy_finish(st, rc, out);
        }
        if (own_b) {
            ev_tensor_unref(tb);
        }
    }
    if (own_a) {
        ev_tensor_unref(ta);
    }
    return res;
}

PyObject *evpy_matmul_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    static const char *const names[] = {"input", "other", NULL};
    PyObject *a[2];
    if (evpy_parse_args("matmul", args, nargs, kwnames, names, 2, 2, a) != 0) {
        return NULL;
    }
    return matmul_objs(st, a[0], a[1]);
}

/* ------------------------------------------------------------------- views */


/* view/reshape/expand/permute(input, *shape) and (input, shape). */
PyObject *evpy_shape_view_fn(evpy_state *st, int code, PyObject *const *args,
                               Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const fns[] = {"view", "reshape", "expand", "permute"};
    const char *fn = fns[code];
    if (kwnames && PyTuple_GET_SIZE(kwnames)) {
        PyErr_Format(PyExc_TypeError, "%s() takes no keyword arguments", fn);
        return NULL;
    }
    ev_tensor *x;
    if (nargs < 1 || !(x = evpy_need_tensor(fn, args[0]))) {
        if (nargs < 1) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument 'input'", fn);
        }
        return NULL;
    }
    int nd;
    int64_t shape[EV_MAX_DIMS];
    if (evpy_parse_shape(args + 1, nargs - 1, &nd, shape) != 0) {
        return NULL;
    }
    ev_tensor *out;
    int rc;
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    if (code == EVPY_V_VIEW) {
        rc = ev_ag_view(&ex, x, nd, shape, &out);
    } else if (code == EVPY_V_EXPAND) {
        rc = ev_ag_expand(&ex, x, nd, shape, &out);
    } else if (code == EVPY_V_PERMUTE) {
        if (nd != ev_tensor_ndim(x)) {
            PyErr_Format(PyExc_ValueError, "permute(): %d dimensions given for a tensor with %d",
                         nd, ev_tensor_ndim(x));
            return NULL;
        }
        int dims[EV_MAX_DIMS];
        for (int i = 0; i < nd; i++) {
            dims[i] = (int)shape[i];
        }
        rc = ev_ag_permute(&ex, x, dims, &out);
    } else {
        rc = ev_ag_reshape(&ex, x, nd, shape, &out);
    }
    return evpy_finish(st, rc, out);
}

PyObject *evpy_flatten_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    static const char *const names[] = {"input", NULL};
    PyObject *a[1];
    ev_tensor *x;
    ev_exec ex;
    if (evpy_parse_args("flatten", args, nargs, kwnames, names, 1, 1, a) != 0 ||
        !(x = evpy_need_tensor("flatten", a[0])) || evpy_exec(&ex) != 0) {
        return NULL;
    }
    int64_t shape[1] = {-1};
    ev_tensor *out;
    int rc = ev_ag_reshape(&ex, x, 1, shape, &out);
    return evpy_finish(st, rc, out);
}

PyObject *evpy_transpose_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    static const char *const names[] = {"input", "dim0", "dim1", NULL};
    PyObject *a[3];
    ev_tensor *x;
    long d0, d1;
    if (evpy_parse_args("transpose", args, nargs, kwnames, names, 3, 3, a) != 0 ||
        !(x = evpy_need_tensor("transpose", a[0])) || evpy_parse_int("transpose", "dim0", a[1], &d0) ||
        evpy_parse_int("transpose", "dim1", a[2], &d1)) {
        return NULL;
    }
    ev_tensor *out;
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    int rc = ev_ag_transpose(&ex, x, (int)d0, (int)d1, &out);
    return evpy_finish(st, rc, out);
}

/* squeeze(input, dim=None) (code 0) and unsqueeze(input, dim) (code 1). */
PyObject *evpy_squeeze_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    static const char *const names[] = {"input", "dim", NULL};
    PyObject *a[2];
    const char *fn = code ? "unsqueeze" : "squeeze";
    ev_tensor *x;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 2, 1 + code, a) != 0 ||
        !(x = evpy_need_tensor(fn, a[0]))) {
        return NULL;
    }
    long d = 0;
    int has = a[1] && a[1] != Py_None;
    if (has && evpy_parse_int(fn, "dim", a[1], &d) != 0) {
        return NULL;
    }
    ev_tensor *out;
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    int rc = code ? ev_ag_unsqueeze(&ex, x, (int)d, &out)
                  : has ? ev_ag_squeeze(&ex, x, (int)d, &out) : ev_ag_squeeze_all(&ex, x, &out);
    return evpy_finish(st, rc, out);
}

/* contiguous (code 0) and clone (code 1, always a copy). */
PyObject *evpy_contiguous_fn(evpy_state *st, int code, PyObject *const *args,
                               Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"input", NULL};
    PyObject *a[1];
    const char *fn = code ? "clone" : "contiguous";
    ev_tensor *x;
    ev_exec ex;
    /* contiguous(t) of a contiguous t is a no-op, often called: it returns
     * before the generic argument parsing. */
    if (!code && nargs == 1 && !kwnames && evpy_tensor_check(args[0])) {
        if (!(x = evpy_tensor_get(args[0]))) {
            return NULL;
        }
        if (ev_tensor_is_contiguous(x)) {
            return Py_NewRef(args[0]);
        }
    }
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 1, 1, a) != 0 ||
        !(x = evpy_need_tensor(fn, a[0]))) {
        return NULL;
    }
    if (!code && ev_tensor_is_contiguous(x)) {
        /* Already contiguous: the input itself, as PyTorch's (no new object). */
        return Py_NewRef(a[0]);
    }
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_tensor *out;
    int rc = ev_ag_contiguous(&ex, x, code, &out);
    return evpy_finish(st, rc, out);
}

/* copy_(self, src) (code 0) and fill_(self, value) (code 1). */
PyObject *evpy_write_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames)
{
    static const char *const names[] = {"input", "src", NULL};
    static const char *const fnames[] = {"input", "value", NULL};
    PyObject *a[2];
    const char *fn = code ? "fill_" : "copy_";
    ev_tensor *x;
    ev_exec ex;
    if (evpy_parse_args(fn, args, nargs, kwnames, code ? fnames : names, 2, 2, a) != 0 ||
        !(x = evpy_need_tensor(fn, a[0])) || evpy_exec(&ex) != 0) {
        return NULL;
    }
    int rc;
    if (code) {
        ev_scalar v;
        if (to_scalar(fn, a[1], &v) != 0) {
            return NULL;
        }
        rc = ev_ag_fill_(&ex, x, v);
    } else {
        ev_tensor *src;
        int own;
        if (evpy_operand(st, a[1], x, &src, &own) != 0) {
            return NULL;
        }
        rc = ev_ag_copy_(&ex, x, src);
        if (own) {
            ev_tensor_unref(src);
        }
    }
    if (rc) {
        return evpy_raise(rc);
    }
    return evpy_maybe_sync(x) ? NULL : Py_NewRef(a[0]);
}

/* ---------------------------------------------------------------- creation */

PyObject *evpy_tensor_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    static const char *const names[] = {"data", "dtype", NULL};
    PyObject *a[2];
    const char *fn = code ? "from_numpy" : "tensor";
    int dtype;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 2, 1, a) != 0 ||
        evpy_parse_dtype(st, a[1], &dtype) != 0) {
        return NULL;
    }
    if (code && !PyObject_CheckBuffer(a[0])) {
        PyErr_Format(PyExc_TypeError, "from_numpy(): expected a NumPy array, got %.100s",
                     Py_TYPE(a[0])->tp_name);
        return NULL;
    }
    ev_tensor *out;
    if (evpy_tensor_from_data(st, a[0], dtype, &out) != 0) {
        return NULL;
    }
    return evpy_finish(st, 0, out);
}

/* Shape as varargs or one sequence, then keyword dtype (and fill_value for
 * full). code: 0 empty, 1 zeros, 2 ones. */
PyObject *evpy_fill_create_fn(evpy_state *st, int code, PyObject *const *args,
                                Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const fns[] = {"empty", "zeros", "ones"};
    const char *fn = fns[code];
    PyObject *dt = NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        if (PyUnicode_CompareWithASCIIString(key, "dtype") == 0) {
            dt = args[nargs + k];
        } else if (PyUnicode_CompareWithASCIIString(key, "device") != 0) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fn,
                         key);
            return NULL;
        }
    }
    int nd, dtype;
    int64_t shape[EV_MAX_DIMS];
    if (evpy_parse_shape(args, nargs, &nd, shape) != 0 || evpy_parse_dtype(st, dt, &dtype)) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_dtype d = dtype < 0 ? EV_FLOAT32 : (ev_dtype)dtype;
    ev_tensor *out;
    int rc = code == 0 ? ev_empty(&ex, d, nd, shape, &out)
             : code == 1 ? ev_zeros(&ex, d, nd, shape, &out)
                         : ev_ones(&ex, d, nd, shape, &out);
    return evpy_finish(st, rc, out);
}

static ev_dtype scalar_default_dtype(const ev_scalar *v)
{
    return v->dtype == EV_BOOL ? EV_BOOL : v->dtype == EV_INT64 ? EV_INT64 : EV_FLOAT32;
}

PyObject *evpy_full_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames)
{
    static const char *const names[] = {"size", "fill_value", "dtype", NULL};
    PyObject *a[3];
    int nd, dtype;
    int64_t shape[EV_MAX_DIMS];
    ev_scalar v;
    if (evpy_parse_args("full", args, nargs, kwnames, names, 3, 2, a) != 0 ||
        evpy_parse_shape(&a[0], 1, &nd, shape) != 0 || to_scalar("full", a[1], &v) != 0 ||
        evpy_parse_dtype(st, a[2], &dtype) != 0) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_tensor *out;
    int rc = ev_full(&ex, dtype < 0 ? scalar_default_dtype(&v) : (ev_dtype)dtype, nd, shape, v,
                     &out);
    return evpy_finish(st, rc, out);
}

/* *_like(input, [fill_value,] dtype=None): code 0 empty, 1 zeros, 2 ones, 3 full. */
PyObject *evpy_like_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames)
{
    static const char *const names[] = {"input", "dtype", NULL};
    static const char *const fnames[] = {"input", "fill_value", "dtype", NULL};
    static const char *const fns[] = {"empty_like", "zeros_like", "ones_like", "full_like"};
    PyObject *a[3];
    int full = code == 3;
    ev_tensor *x;
    int dtype;
    ev_scalar v = ev_scalar_int(code == 2 ? 1 : 0);
    if (evpy_parse_args(fns[code], args, nargs, kwnames, full ? fnames : names, 1 + full, 1 + full,
                   a) != 0 ||
        !(x = evpy_need_tensor(fns[code], a[0])) ||
        evpy_parse_dtype(st, a[1 + full], &dtype) != 0 ||
        (full && to_scalar(fns[code], a[1], &v) != 0)) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_dtype d = dtype < 0 ? ev_tensor_dtype(x) : (ev_dtype)dtype;
    ev_tensor *out;
    int rc = code == 0 ? ev_empty(&ex, d, ev_tensor_ndim(x), ev_tensor_shape(x), &out)
                       : ev_full(&ex, d, ev_tensor_ndim(x), ev_tensor_shape(x), v, &out);
    return evpy_finish(st, rc, out);
}

PyObject *evpy_arange_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    static const char *const names[] = {"start", "end", "step", "dtype", NULL};
    PyObject *a[4];
    int dtype;
    if (evpy_parse_args("arange", args, nargs, kwnames, names, 3, 1, a) != 0 ||
        evpy_parse_dtype(st, a[3], &dtype) != 0) {
        return NULL;
    }
    ev_scalar start = ev_scalar_int(0), stop, step = ev_scalar_int(1);
    PyObject *s0 = a[1] && a[1] != Py_None ? a[0] : NULL;
    PyObject *s1 = a[1] && a[1] != Py_None ? a[1] : a[0];
    if ((s0 && to_scalar("arange", s0, &start) != 0) || to_scalar("arange", s1, &stop) != 0 ||
        (a[2] && to_scalar("arange", a[2], &step) != 0)) {
        return NULL;
    }
    if (dtype < 0) {
        int any_float = start.dtype == EV_FLOAT64 || stop.dtype == EV_FLOAT64 ||
                        step.dtype == EV_FLOAT64;
        dtype = any_float ? EV_FLOAT32 : EV_INT64;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_tensor *out;
    int rc = ev_arange(&ex, start, stop, step, (ev_dtype)dtype, &out);
    return evpy_finish(st, rc, out);
}

PyObject *evpy_linspace_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    static const char *const names[] = {"start", "end", "steps", "dtype", NULL};
    PyObject *a[4];
    int dtype;
    long steps;
    if (evpy_parse_args("linspace", args, nargs, kwnames, names, 3, 3, a) != 0 ||
        evpy_parse_dtype(st, a[3], &dtype) != 0 ||
        evpy_parse_int("linspace", "steps", a[2], &steps) != 0) {
        return NULL;
    }
    double lo = PyFloat_AsDouble(a[0]);
    if (lo == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    double hi = PyFloat_AsDouble(a[1]);
    if (hi == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_tensor *out;
    int rc = ev_linspace(&ex, lo, hi, steps, dtype < 0 ? EV_FLOAT32 : (ev_dtype)dtype, &out);
    return evpy_finish(st, rc, out);
}

PyObject *evpy_eye_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames)
{
    static const char *const names[] = {"n", "m", "dtype", NULL};
    PyObject *a[3];
    int dtype;
    long n, m = -1;
    if (evpy_parse_args("eye", args, nargs, kwnames, names, 2, 1, a) != 0 ||
        evpy_parse_int("eye", "n", a[0], &n) != 0 ||
        (a[1] && a[1] != Py_None && evpy_parse_int("eye", "m", a[1], &m) != 0) ||
        evpy_parse_dtype(st, a[2], &dtype) != 0) {
        return NULL;
    }
    if (n < 0 || (a[1] && a[1] != Py_None && m < 0)) {
        PyErr_SetString(PyExc_ValueError, "eye(): sizes must be non-negative");
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_tensor *out;
    int rc = ev_eye(&ex, n, m, dtype < 0 ? EV_FLOAT32 : (ev_dtype)dtype, &out);
    return evpy_finish(st, rc, out);
}

/* ----------------------------------------------------- functions, methods */

/* Each op is defined once as an impl taking (input, ...) and bound twice:
 * as a module function, and as a method that puts self in front. */
PyObject *evpy_call_method(evpy_impl_fn impl, int code, PyObject *self, PyObject *const *args,
                           Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *stack[EVPY_MAX_ARGS + 1];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs + nkw > EVPY_MAX_ARGS) {
        PyErr_SetString(PyExc_TypeError, "too many arguments");
        return NULL;
    }
    stack[0] = self;
    memcpy(stack + 1, args, (size_t)(nargs + nkw) * sizeof *args);
    return impl(evpy_state_of_type(Py_TYPE(self)), code, stack, nargs + 1, kwnames);
}


/* Ops bound as both a function and a method (those of the op table are
 * bound in op_table.c). */



PyMethodDef evpy_op_methods[] = {
    {NULL},
};


PyMethodDef evpy_tensor_op_methods[] = {
    {NULL},
};

/* --------------------------------------------------------------- operators */

evpy_state *evpy_state_of_pair(PyObject *a, PyObject *b)
{
    return evpy_state_of_type(Py_TYPE(evpy_tensor_check(a) ? a : b));
}

static PyObject *nb_matmul(PyObject *a, PyObject *b)
{
    if (!evpy_operand_like(a) || !evpy_operand_like(b)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    return matmul_objs(evpy_state_of_pair(a, b), a, b);
}

static PyObject *nb_positive(PyObject *self)
{
    return Py_NewRef(self);
}

PyType_Slot evpy_tensor_op_slots[] = {
    {Py_nb_matrix_multiply, nb_matmul},
    {Py_nb_positive, nb_positive},
    {0, NULL},
};
