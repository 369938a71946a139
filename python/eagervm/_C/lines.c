/* The ops along the lines of a dimension for Python: scans (cumsum,
 * cumprod), sorts (sort, argsort, topk), flips and rolls, the triangles
 * (tril, triu), and the ops whose output size depends on the values
 * (nonzero, unique: sync points on their input). Bound from the op table's
 * rows (op_table.c). */
#include <string.h>

#include "evpy.h"

/* A tuple of the two tensors (both owned), or NULL with both released. */
static PyObject *pair(evpy_state *st, ev_tensor *a, ev_tensor *b)
{
    PyObject *ta = evpy_tensor_wrap(st, a);
    if (!ta) {
        ev_tensor_unref(b);
        return NULL;
    }
    PyObject *tb = evpy_tensor_wrap(st, b);
    if (!tb) {
        Py_DECREF(ta);
        return NULL;
    }
    PyObject *res = PyTuple_Pack(2, ta, tb);
    Py_DECREF(ta);
    Py_DECREF(tb);
    return res;
}

/* cumsum(input, dim, dtype=None), cumprod (code 1); codes 2, 3: the
 * in-place methods cumsum_ and cumprod_. */
PyObject *evpy_scan_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    static const char *const fns[] = {"cumsum", "cumprod", "cumsum_", "cumprod_"};
    static const char *const names[] = {"input", "dim", "dtype", NULL};
    const char *fn = fns[code];
    PyObject *a[3];
    ev_tensor *x;
    long dim;
    int dtype;
    ev_exec ex;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 3, 2, a) != 0 ||
        !(x = evpy_need_tensor(fn, a[0])) || evpy_parse_int(fn, "dim", a[1], &dim) != 0 ||
        evpy_parse_dtype(st, a[2], &dtype) != 0 || evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_dtype dt = dtype < 0 ? EV_DTYPE_NONE : (ev_dtype)dtype;
    if (code >= 2) {
        int rc = code == 2 ? ev_ag_cumsum_(&ex, x, (int)dim, dt) : ev_ag_cumprod_(&ex, x, (int)dim, dt);
        if (rc) {
            return evpy_raise(rc);
        }
        return evpy_maybe_sync(x) ? NULL : Py_NewRef(a[0]);
    }
    ev_tensor *out;
    int rc = code == 0 ? ev_ag_cumsum(&ex, x, (int)dim, dt, &out)
                       : ev_ag_cumprod(&ex, x, (int)dim, dt, &out);
    return evpy_finish(st, rc, out);
}

/* sort(input, dim=-1, descending=False, stable=False) -> (values, indices);
 * argsort (code 1) -> indices. */
PyObject *evpy_sort_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    static const char *const names[] = {"input", "dim", "descending", "stable", NULL};
    const char *fn = code ? "argsort" : "sort";
    PyObject *a[4];
    ev_tensor *x;
    long dim = -1;
    int desc, stable;
    ev_exec ex;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 4, 1, a) != 0 ||
        !(x = evpy_need_tensor(fn, a[0])) ||
        (a[1] && a[1] != Py_None && evpy_parse_int(fn, "dim", a[1], &dim) != 0) ||
        (desc = evpy_parse_bool(a[2], 0)) < 0 || (stable = evpy_parse_bool(a[3], 0)) < 0 ||
        evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_tensor *values = NULL, *indices = NULL;
    if (code) {
        int rc = ev_argsort(&ex, x, (int)dim, desc, stable, &indices);
        return evpy_finish(st, rc, indices);
    }
    int rc = ev_ag_sort(&ex, x, (int)dim, desc, stable, &values, &indices);
    if (rc) {
        return evpy_raise(rc);
    }
    return pair(st, values, indices);
}

/* topk(input, k, dim=-1, largest=True, sorted=True) -> (values, indices). */
PyObject *evpy_topk_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    static const char *const names[] = {"input", "k", "dim", "largest", "sorted", NULL};
    PyObject *a[5];
    ev_tensor *x;
    long k, dim = -1;
    int largest, sorted;
    ev_exec ex;
    (void)code;
    if (evpy_parse_args("topk", args, nargs, kwnames, names, 5, 2, a) != 0 ||
        !(x = evpy_need_tensor("topk", a[0])) || evpy_parse_int("topk", "k", a[1], &k) != 0 ||
        (a[2] && a[2] != Py_None && evpy_parse_int("topk", "dim", a[2], &dim) != 0) ||
        (largest = evpy_parse_bool(a[3], 1)) < 0 || (sorted = evpy_parse_bool(a[4], 1)) < 0 ||
        evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_tensor *values, *indices;
    int rc = ev_ag_topk(&ex, x, k, (int)dim, largest, sorted, &values, &indices);
    if (rc) {
        return evpy_raise(rc);
    }
    return pair(st, values, indices);
}

/* A sequence of ints (or one int) into out[]; *n their count. */
static int int64_list(const char *fn, const char *what, PyObject *obj, int64_t *out, int *n)
{
    if (PyLong_Check(obj)) {
        long v;
        if (evpy_parse_int(fn, what, obj, &v) != 0) {
            return -1;
        }
        out[0] = v;
        *n = 1;
        return 0;
    }
    if (!PyTuple_Check(obj) && !PyList_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be an int or a sequence of ints, not %s",
                     fn, what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t len = PySequence_Size(obj);
    if (len > EV_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s(): %s has %zd entries, at most %d", fn, what, len,
                     EV_MAX_DIMS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        long v;
        PyObject *it = PySequence_GetItem(obj, i);
        int rc = it ? evpy_parse_int(fn, what, it, &v) : -1;
        Py_XDECREF(it);
        if (rc) {
            return -1;
        }
        out[i] = v;
    }
    *n = (int)len;
    return 0;
}

/* flip(input, dims) (code 0) and roll(input, shifts, dims=None) (code 1). */
PyObject *evpy_flip_roll_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    static const char *const fnames[] = {"input", "dims", NULL};
    static const char *const rnames[] = {"input", "shifts", "dims", NULL};
    const char *fn = code ? "roll" : "flip";
    PyObject *a[3] = {NULL, NULL, NULL};
    ev_tensor *x;
    if (evpy_parse_args(fn, args, nargs, kwnames, code ? rnames : fnames, code ? 3 : 2, 2, a) !=
            0 ||
        !(x = evpy_need_tensor(fn, a[0]))) {
        return NULL;
    }
    int64_t v[EV_MAX_DIMS], s[EV_MAX_DIMS];
    int nd = 0, ns = 0, dims[EV_MAX_DIMS];
    PyObject *dims_obj = code ? a[2] : a[1];
    if (code && int64_list(fn, "shifts", a[1], s, &ns) != 0) {
        return NULL;
    }
    if (dims_obj && dims_obj != Py_None) {
        if (int64_list(fn, "dims", dims_obj, v, &nd) != 0) {
            return NULL;
        }
        for (int i = 0; i < nd; i++) {
            dims[i] = (int)v[i];
        }
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_tensor *out;
    int rc = code ? ev_ag_roll(&ex, x, ns, s, nd, nd ? dims : NULL, &out)
                  : ev_ag_flip(&ex, x, nd, dims, &out);
    return evpy_finish(st, rc, out);
}

/* tril(input, diagonal=0), triu (1), and the in-place tril_ (2), triu_ (3). */
PyObject *evpy_tri_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames)
{
    static const char *const fns[] = {"tril", "triu", "tril_", "triu_"};
    static const char *const names[] = {"input", "diagonal", NULL};
    const char *fn = fns[code];
    PyObject *a[2];
    ev_tensor *x;
    long diag = 0;
    ev_exec ex;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 2, 1, a) != 0 ||
        !(x = evpy_need_tensor(fn, a[0])) ||
        (a[1] && evpy_parse_int(fn, "diagonal", a[1], &diag) != 0) || evpy_exec(&ex) != 0) {
        return NULL;
    }
    if (code >= 2) {
        int rc = ev_ag_tri_(&ex, x, diag, code == 3);
        if (rc) {
            return evpy_raise(rc);
        }
        return evpy_maybe_sync(x) ? NULL : Py_NewRef(a[0]);
    }
    ev_tensor *out;
    int rc = ev_ag_tri(&ex, x, diag, code, &out);
    return evpy_finish(st, rc, out);
}

/* The C calls below wait for x (their output size depends on its values):
 * let other Python threads run meanwhile. */

/* nonzero(input): (n, ndim) int64 indices of the nonzero elements. */
PyObject *evpy_nonzero_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames)
{
    static const char *const names[] = {"input", NULL};
    PyObject *a[1];
    ev_tensor *x, *out = NULL;
    ev_exec ex;
    (void)code;
    if (evpy_parse_args("nonzero", args, nargs, kwnames, names, 1, 1, a) != 0 ||
        !(x = evpy_need_tensor("nonzero", a[0])) || evpy_exec(&ex) != 0 ||
        evpy_wait_tensor(x) != 0) {
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ev_nonzero(&ex, x, &out);
    Py_END_ALLOW_THREADS
    return evpy_finish(st, rc, out);
}

/* unique(input, sorted=True, return_inverse=False, return_counts=False):
 * values, or a tuple (values[, inverse][, counts]). */
PyObject *evpy_unique_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames)
{
    static const char *const names[] = {"input", "sorted", "return_inverse", "return_counts",
                                        NULL};
    PyObject *a[4];
    ev_tensor *x;
    int sorted, inv, cnt;
    ev_exec ex;
    (void)code;
    if (evpy_parse_args("unique", args, nargs, kwnames, names, 4, 1, a) != 0 ||
        !(x = evpy_need_tensor("unique", a[0])) || (sorted = evpy_parse_bool(a[1], 1)) < 0 ||
        (inv = evpy_parse_bool(a[2], 0)) < 0 || (cnt = evpy_parse_bool(a[3], 0)) < 0 ||
        evpy_exec(&ex) != 0 || evpy_wait_tensor(x) != 0) {
        return NULL;
    }
    ev_tensor *values = NULL, *inverse = NULL, *counts = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ev_unique(&ex, x, sorted, inv, cnt, &values, inv ? &inverse : NULL,
                   cnt ? &counts : NULL);
    Py_END_ALLOW_THREADS
    if (rc) {
        return evpy_raise(rc);
    }
    if (!inv && !cnt) {
        return evpy_finish(st, 0, values);
    }
    ev_tensor *parts[3] = {values, inverse, counts};
    PyObject *res = PyTuple_New(1 + inv + cnt);
    Py_ssize_t k = 0;
    for (int i = 0; i < 3; i++) {
        if (!parts[i]) {
            continue;
        }
        /* A failed wrap released its tensor; release those not yet wrapped. */
        PyObject *t = res ? evpy_tensor_wrap(st, parts[i]) : (ev_tensor_unref(parts[i]), NULL);
        if (!t) {
            for (int j = i + 1; j < 3; j++) {
                if (parts[j]) {
                    ev_tensor_unref(parts[j]);
                }
            }
            Py_XDECREF(res);
            return NULL;
        }
        PyTuple_SET_ITEM(res, k++, t);
    }
    return res;
}
