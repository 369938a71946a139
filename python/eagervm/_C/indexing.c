/* Indexing with index tensors and boolean masks (t[idx], t[mask] = v):
 * what Tensor.__getitem__ and __setitem__ (tensor.c) hand over when a key
 * holds a tensor or a list. */
#include <stdlib.h>
#include <string.h>

#include "evpy.h"

/* ---------------------------------------------------------------- indexing
 *
 * t[index_tensor] and t[..., mask, ...]: one tensor (or list) index per
 * expression, together with slices, None and Ellipsis. An integer index
 * selects along the dimension it stands for (NumPy's advanced indexing with
 * one index array: the index's shape replaces that dimension), negative
 * values counting from the end; an out-of-range value fails the instruction
 * (IndexError at the next sync point on the result). A bool mask covers as
 * many dimensions as it has and keeps the elements where it is True; the
 * result's size depends on the mask's values, so reading with a mask is a
 * sync point on the mask. Assignment t[index] = v writes through; with an
 * integer index it is a sync point on the index (which is checked at once
 * and, for repeated entries, the last value wins, as in NumPy); with a mask
 * and a scalar or 0-d value it is asynchronous (a where). */

static int is_adv_item(PyObject *it)
{
    return evpy_tensor_check(it) || PyList_Check(it);
}

int evpy_is_advanced_key(PyObject *key)
{
    if (is_adv_item(key)) {
        return 1;
    }
    if (PyTuple_Check(key)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(key); i++) {
            if (is_adv_item(PyTuple_GET_ITEM(key, i))) {
                return 1;
            }
        }
    }
    return 0;
}

/* The parsed key: the basic part (the tensor index replaced by k full
 * slices) applied as a view `base`, the index tensor, and the dimension of
 * base where it starts. */
typedef struct {
    PyObject *base; /* a Tensor (new reference) */
    ev_tensor *idx; /* owned reference */
    int is_mask;
    int dim;
} adv_key;

static void adv_clear(adv_key *k)
{
    Py_CLEAR(k->base);
    ev_tensor_unref(k->idx);
    k->idx = NULL;
}

static int adv_parse(PyObject *self, PyObject *key, adv_key *k)
{
    evpy_state *st = evpy_state_of_type(Py_TYPE(self));
    memset(k, 0, sizeof *k);
    PyObject *const *items = &key;
    Py_ssize_t n = 1;
    if (PyTuple_Check(key)) {
        items = &PyTuple_GET_ITEM(key, 0);
        n = PyTuple_GET_SIZE(key);
    }
    Py_ssize_t adv = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = items[i];
        if (is_adv_item(it)) {
            if (adv >= 0) {
                PyErr_SetString(PyExc_IndexError,
                                "only one tensor or list index per indexing expression is "
                                "supported; index in several steps");
                return -1;
            }
            adv = i;
        } else if (it != Py_None && it != Py_Ellipsis && !PySlice_Check(it)) {
            PyErr_Format(PyExc_IndexError,
                         "combining a tensor index with %.100s indices is not supported; "
                         "index in two steps (slices, None and ... are allowed)",
                         Py_TYPE(it)->tp_name);
            return -1;
        }
    }
    PyObject *ai = items[adv];
    if (evpy_tensor_check(ai)) {
        ev_tensor *t = evpy_tensor_get(ai);
        if (!t) {
            return -1;
        }
        k->idx = ev_tensor_ref(t);
    } else if (PyList_GET_SIZE(ai) == 0) {
        ev_exec ex;
        int64_t zero = 0;
        if (evpy_exec(&ex) != 0) {
            return -1;
        }
        int rc = ev_empty(&ex, EV_INT64, 1, &zero, &k->idx);
        if (rc) {
            return evpy_raise_int(rc);
        }
    } else if (evpy_tensor_from_data(st, ai, -1, &k->idx) != 0) {
        return -1;
    }
    ev_dtype dt = ev_tensor_dtype(k->idx);
    if (ev_dtype_is_float(dt)) {
        PyErr_Format(PyExc_IndexError, "tensors used as indices must be integer or bool "
                                       "tensors, not %s", ev_dtype_name(dt));
        adv_clear(k);
        return -1;
    }
    k->is_mask = dt == EV_BOOL;
    int kd = k->is_mask ? ev_tensor_ndim(k->idx) : 1;
    if (k->is_mask && kd == 0) {
        PyErr_SetString(PyExc_IndexError, "a 0-d bool tensor index is not supported");
        adv_clear(k);
        return -1;
    }
    /* The basic key with the index replaced by kd full slices. */
    PyObject *full = PySlice_New(NULL, NULL, NULL);
    PyObject *basic = full ? PyTuple_New(n - 1 + kd) : NULL;
    if (!basic) {
        Py_XDECREF(full);
        adv_clear(k);
        return -1;
    }
    Py_ssize_t j = 0;
    int dim = 0, ell_before = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i == adv) {
            for (int r = 0; r < kd; r++) {
                PyTuple_SET_ITEM(basic, j++, Py_NewRef(full));
            }
            continue;
        }
        if (i < adv) {
            if (items[i] == Py_Ellipsis) {
                ell_before = 1;
            } else {
                dim++;
            }
        }
        PyTuple_SET_ITEM(basic, j++, Py_NewRef(items[i]));
    }
    Py_DECREF(full);
    k->base = PyObject_GetItem(self, basic);
    Py_DECREF(basic);
    if (!k->base) {
        adv_clear(k);
        return -1;
    }
    ev_tensor *bt = EvTensor_CAST(k->base)->t;
    if (ell_before) {
        /* The Ellipsis stood for what the other items did not consume. */
        int consumed = kd;
        for (Py_ssize_t i = 0; i < n; i++) {
            consumed += i != adv && PySlice_Check(items[i]);
        }
        int newdims = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            newdims += items[i] == Py_None;
        }
        (void)newdims;
        dim += ev_tensor_ndim(bt) - (int)(consumed + newdims);
    }
    k->dim = dim;
    if (k->is_mask) {
        const int64_t *ms = ev_tensor_shape(k->idx), *bs = ev_tensor_shape(bt);
        for (int r = 0; r < kd; r++) {
            if (dim + r >= ev_tensor_ndim(bt) || ms[r] != bs[dim + r]) {
                PyErr_Format(PyExc_IndexError,
                             "the shape of the mask at index %d (size %lld) does not match "
                             "the shape of the indexed tensor (size %lld)",
                             r, (long long)ms[r],
                             dim + r < ev_tensor_ndim(bt) ? (long long)bs[dim + r] : -1LL);
                adv_clear(k);
                return -1;
            }
        }
    }
    return 0;
}

/* A sync point: the index values on the host as int64 (n entries, C order). */
int64_t *evpy_host_int64(ev_tensor *t, int64_t *n)
{
    ev_exec ex;
    ev_tensor *c;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    int rc = ev_cast(&ex, t, EV_INT64, &c);
    if (rc) {
        evpy_raise(rc);
        return NULL;
    }
    *n = ev_tensor_numel(c);
    int64_t *buf = PyMem_Malloc((size_t)(*n ? *n : 1) * sizeof *buf);
    if (!buf) {
        ev_tensor_unref(c);
        PyErr_NoMemory();
        return NULL;
    }
    if (evpy_wait_tensor(c) != 0) {
        ev_tensor_unref(c);
        PyMem_Free(buf);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = ev_to_host(&ex, c, buf);
    Py_END_ALLOW_THREADS
    ev_tensor_unref(c);
    if (rc) {
        PyMem_Free(buf);
        evpy_raise(rc);
        return NULL;
    }
    return buf;
}

/* Turns a mask over dims [dim, dim + k) of base into a 1-d int64 index over
 * those dims merged (a sync point), and *merged a view or copy of base with
 * them merged into one (must_view: fail rather than copy). */
static int mask_to_index(ev_tensor *base, ev_tensor *mask, int dim, int must_view,
                         ev_tensor **merged, ev_tensor **index)
{
    int64_t n;
    int64_t *m = evpy_host_int64(mask, &n);
    if (!m) {
        return -1;
    }
    int64_t cnt = 0;
    for (int64_t i = 0; i < n; i++) {
        if (m[i]) {
            m[cnt++] = i;
        }
    }
    ev_exec ex;
    int rc = evpy_exec(&ex) != 0 ? -1 : ev_from_host(&ex, EV_INT64, 1, &cnt, m, index);
    PyMem_Free(m);
    if (rc) {
        return rc == -1 ? -1 : evpy_raise_int(rc);
    }
    int nd = ev_tensor_ndim(base), kd = ev_tensor_ndim(mask), od = 0;
    int64_t shape[EV_MAX_DIMS];
    const int64_t *bs = ev_tensor_shape(base);
    for (int i = 0; i < nd; i++) {
        if (i == dim) {
            shape[od++] = n;
        } else if (i < dim || i >= dim + kd) {
            shape[od++] = bs[i];
        }
    }
    rc = must_view ? ev_view(base, od, shape, merged)
                   : ev_ag_reshape(&ex, base, od, shape, merged);
    if (rc) {
        ev_tensor_unref(*index);
        if (must_view) {
            PyErr_SetString(PyExc_IndexError, "assignment through a multi-dimensional mask "
                                              "needs the masked dimensions to be mergeable "
                                              "(a contiguous view); use a 1-d mask");
            return -1;
        }
        return evpy_raise_int(rc);
    }
    return 0;
}

/* where(idx < 0, idx + size, idx): NumPy's negative indices, asynchronously. */
static int wrap_negative(const ev_exec *ex, ev_tensor *idx, int64_t size, ev_tensor **out)
{
    /* The bounds in int32 for an int32 index, else int64: a narrower index
     * promotes to it in the ops below (a uint8 index may face a size of 300). */
    ev_dtype dt = ev_tensor_dtype(idx) == EV_INT32 ? EV_INT32 : EV_INT64;
    union {
        int32_t i32;
        int64_t i64;
    } zero = {0}, sz;
    if (dt == EV_INT32) {
        sz.i32 = (int32_t)size;
    } else {
        sz.i64 = size;
    }
    ev_tensor *z = NULL, *s = NULL, *neg = NULL, *plus = NULL;
    int rc = ev_from_host(ex, dt, 0, NULL, &zero, &z);
    rc = rc ? rc : ev_from_host(ex, dt, 0, NULL, &sz, &s);
    rc = rc ? rc : ev_lt(ex, idx, z, &neg);
    rc = rc ? rc : ev_add(ex, idx, s, &plus);
    rc = rc ? rc : ev_where(ex, neg, plus, idx, out);
    ev_tensor_unref(z);
    ev_tensor_unref(s);
    ev_tensor_unref(neg);
    ev_tensor_unref(plus);
    return rc;
}

PyObject *evpy_getitem_advanced(PyObject *self, PyObject *key)
{
    evpy_state *st = evpy_state_of_type(Py_TYPE(self));
    adv_key k;
    if (adv_parse(self, key, &k) != 0) {
        return NULL;
    }
    ev_tensor *base = EvTensor_CAST(k.base)->t, *out = NULL;
    ev_exec ex;
    int rc = 0;
    if (evpy_exec(&ex) != 0) {
        adv_clear(&k);
        return NULL;
    }
    if (k.is_mask) {
        ev_tensor *merged, *index;
        if (mask_to_index(base, k.idx, k.dim, 0, &merged, &index) != 0) {
            adv_clear(&k);
            return NULL;
        }
        rc = ev_ag_index_select(&ex, merged, k.dim, index, &out);
        ev_tensor_unref(merged);
        ev_tensor_unref(index);
    } else {
        int nd = ev_tensor_ndim(base), id = ev_tensor_ndim(k.idx);
        if (nd - 1 + id > EV_MAX_DIMS) {
            adv_clear(&k);
            PyErr_Format(PyExc_IndexError, "the result would have more than %d dimensions",
                         EV_MAX_DIMS);
            return NULL;
        }
        const int64_t *bs = ev_tensor_shape(base);
        int64_t flat_n = -1, shape[EV_MAX_DIMS];
        ev_tensor *flat = NULL, *wrapped = NULL, *sel = NULL;
        rc = ev_reshape(&ex, k.idx, 1, &flat_n, &flat);
        rc = rc ? rc : wrap_negative(&ex, flat, bs[k.dim], &wrapped);
        rc = rc ? rc : ev_ag_index_select(&ex, base, k.dim, wrapped, &sel);
        int od = 0;
        for (int i = 0; i < nd; i++) {
            if (i == k.dim) {
                for (int r = 0; r < id; r++) {
                    shape[od++] = ev_tensor_shape(k.idx)[r];
                }
            } else {
                shape[od++] = bs[i];
            }
        }
        rc = rc ? rc : ev_ag_reshape(&ex, sel, od, shape, &out);
        ev_tensor_unref(flat);
        ev_tensor_unref(wrapped);
        ev_tensor_unref(sel);
    }
    adv_clear(&k);
    return evpy_finish(st, rc, out);
}

/* base[dim-th dims by index] = value with a host-known index: out = where(
 * mask, index_select(value, dim, src_row), base) copied into base. */
static int assign_rows(evpy_state *st, ev_tensor *base, int dim, ev_tensor *idx,
                       PyObject *value)
{
    int64_t m;
    int64_t *iv = evpy_host_int64(idx, &m);
    if (!iv) {
        return -1;
    }
    int nd = ev_tensor_ndim(base), id = ev_tensor_ndim(idx);
    const int64_t *bs = ev_tensor_shape(base);
    int64_t size = bs[dim];
    int64_t *src_row = PyMem_Calloc((size_t)(size ? size : 1), sizeof *src_row);
    uint8_t *mask = PyMem_Calloc((size_t)(size ? size : 1), 1);
    ev_tensor *v = NULL, *ve = NULL, *vflat = NULL, *rows = NULL, *maskt = NULL, *maskv = NULL,
              *picked = NULL, *res = NULL;
    int own_v = 0, rc = -1, err = 0;
    if (!src_row || !mask) {
        PyErr_NoMemory();
        goto done;
    }
    for (int64_t j = 0; j < m; j++) {
        int64_t i = iv[j];
        if (i < -size || i >= size) {
            PyErr_Format(PyExc_IndexError,
                         "index %lld is out of bounds for dimension %d with size %lld",
                         (long long)i, dim, (long long)size);
            goto done;
        }
        i = i < 0 ? i + size : i;
        src_row[i] = j; /* the last of repeated entries wins, as in NumPy */
        mask[i] = 1;
    }
    if (m == 0) {
        rc = 0;
        goto done;
    }
    if (nd - 1 + id > EV_MAX_DIMS) {
        PyErr_Format(PyExc_IndexError, "the indexed result would have more than %d dimensions",
                     EV_MAX_DIMS);
        goto done;
    }
    if (evpy_operand(st, value, base, &v, &own_v) != 0) {
        goto done;
    }
    /* value broadcast to base[:dim] + idx.shape + base[dim+1:], then with
     * idx's dims flattened into one of m rows. */
    int64_t vshape[EV_MAX_DIMS], fshape[EV_MAX_DIMS];
    int vd = 0;
    for (int i = 0; i < nd; i++) {
        if (i == dim) {
            for (int r = 0; r < id; r++) {
                vshape[vd++] = ev_tensor_shape(idx)[r];
            }
            fshape[i] = m;
        } else {
            vshape[vd++] = bs[i];
            fshape[i] = bs[i];
        }
    }
    ev_tensor *vs = v;
    while (ev_tensor_ndim(vs) > vd && ev_tensor_shape(vs)[0] == 1) {
        ev_tensor *sq;
        if ((err = ev_squeeze(vs, 0, &sq)) != 0) {
            break;
        }
        if (vs != v) {
            ev_tensor_unref(vs);
        }
        vs = sq;
    }
    ev_exec ex;
    if (err == 0 && evpy_exec(&ex) != 0) {
        if (vs != v) {
            ev_tensor_unref(vs);
        }
        goto done;
    }
    err = err ? err : ev_expand(vs, vd, vshape, &ve);
    if (vs != v) {
        ev_tensor_unref(vs);
    }
    err = err ? err : ev_reshape(&ex, ve, nd, fshape, &vflat);
    err = err ? err : ev_from_host(&ex, EV_INT64, 1, &size, src_row, &rows);
    err = err ? err : ev_from_host(&ex, EV_BOOL, 1, &size, mask, &maskt);
    if (!err) {
        int64_t mshape[EV_MAX_DIMS];
        for (int i = 0; i < nd; i++) {
            mshape[i] = i == dim ? size : 1;
        }
        err = ev_view(maskt, nd, mshape, &maskv);
    }
    err = err ? err : ev_index_select(&ex, vflat, dim, rows, &picked);
    if (!err && ev_tensor_dtype(picked) != ev_tensor_dtype(base)) {
        /* In base's dtype before the where, as for a mask (see below). */
        ev_tensor *pc;
        err = ev_cast(&ex, picked, ev_tensor_dtype(base), &pc);
        if (!err) {
            ev_tensor_unref(picked);
            picked = pc;
        }
    }
    err = err ? err : ev_where(&ex, maskv, picked, base, &res);
    err = err ? err : ev_copy_(&ex, base, res);
    if (err) {
        evpy_raise(err);
        goto done;
    }
    rc = evpy_maybe_sync(base);
done:
    PyMem_Free(iv);
    PyMem_Free(src_row);
    PyMem_Free(mask);
    if (own_v) {
        ev_tensor_unref(v);
    }
    ev_tensor_unref(ve);
    ev_tensor_unref(vflat);
    ev_tensor_unref(rows);
    ev_tensor_unref(maskt);
    ev_tensor_unref(maskv);
    ev_tensor_unref(picked);
    ev_tensor_unref(res);
    return rc;
}

int evpy_setitem_advanced(PyObject *self, PyObject *key, PyObject *value)
{
    evpy_state *st = evpy_state_of_type(Py_TYPE(self));
    adv_key k;
    if (adv_parse(self, key, &k) != 0) {
        return -1;
    }
    ev_tensor *base = EvTensor_CAST(k.base)->t;
    int rc = -1;
    if (k.is_mask) {
        int scalar = evpy_is_py_scalar(value) ||
                     (evpy_tensor_check(value) && ev_tensor_ndim(EvTensor_CAST(value)->t) == 0);
        if (scalar) {
            /* Asynchronous: base = where(mask, value, base). */
            ev_tensor *v = NULL, *maskv = NULL, *res = NULL;
            int own = 0, err = 0;
            ev_exec ex;
            if (evpy_operand(st, value, base, &v, &own) != 0 || evpy_exec(&ex) != 0) {
                goto done;
            }
            if (ev_tensor_dtype(v) != ev_tensor_dtype(base)) {
                /* The value in base's dtype first, as NumPy assigns: a where
                 * in the promoted dtype would carry every element of base
                 * through it (int64 through float64 loses its low bits).
                 * assign_rows does the same for integer indices. */
                ev_tensor *vc;
                err = ev_cast(&ex, v, ev_tensor_dtype(base), &vc);
                if (own) {
                    ev_tensor_unref(v);
                }
                if (err) {
                    evpy_raise(err);
                    goto done;
                }
                v = vc;
                own = 1;
            }
            int nd = ev_tensor_ndim(base), kd = ev_tensor_ndim(k.idx);
            int64_t mshape[EV_MAX_DIMS];
            for (int i = 0; i < nd; i++) {
                mshape[i] = i >= k.dim && i < k.dim + kd ? ev_tensor_shape(k.idx)[i - k.dim] : 1;
            }
            err = ev_reshape(&ex, k.idx, nd, mshape, &maskv);
            err = err ? err : ev_where(&ex, maskv, v, base, &res);
            err = err ? err : ev_copy_(&ex, base, res);
            if (own) {
                ev_tensor_unref(v);
            }
            ev_tensor_unref(maskv);
            ev_tensor_unref(res);
            if (err) {
                evpy_raise(err);
                goto done;
            }
            rc = evpy_maybe_sync(base);
            goto done;
        }
        ev_tensor *merged, *index;
        if (mask_to_index(base, k.idx, k.dim, 1, &merged, &index) != 0) {
            goto done;
        }
        rc = assign_rows(st, merged, k.dim, index, value);
        ev_tensor_unref(merged);
        ev_tensor_unref(index);
        goto done;
    }
    rc = assign_rows(st, base, k.dim, k.idx, value);
done:
    adv_clear(&k);
    return rc;
}

