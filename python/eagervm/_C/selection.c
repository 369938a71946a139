/* Selection and joining for Python: where, cat and stack, index_select,
 * gather, take and scatter_add, and the ops built on class indices
 * (one_hot, cross_entropy). Bound from the op table's rows (op_table.c). */
#include <stdlib.h>
#include <string.h>

#include "evpy.h"

/* An operand that may be a Tensor, a Python scalar or data; *own says it
 * must be released with ev_tensor_unref. */
typedef struct {
    ev_tensor *t;
    int own;
} operand;

static void op_release(operand *o)
{
    if (o->own) {
        ev_tensor_unref(o->t);
    }
    o->t = NULL;
    o->own = 0;
}

/* Converts a and b to tensors; a Python scalar takes its dtype from the
 * tensor on the other side (NumPy's weak scalars). */
static int operand_pair(evpy_state *st, PyObject *a, PyObject *b, operand *oa, operand *ob)
{
    oa->t = ob->t = NULL;
    oa->own = ob->own = 0;
    if (evpy_tensor_check(a) || !evpy_tensor_check(b)) {
        if (evpy_operand(st, a, NULL, &oa->t, &oa->own) != 0) {
            return -1;
        }
        if (evpy_operand(st, b, oa->t, &ob->t, &ob->own) != 0) {
            op_release(oa);
            return -1;
        }
        return 0;
    }
    if (evpy_operand(st, b, NULL, &ob->t, &ob->own) != 0) {
        return -1;
    }
    if (evpy_operand(st, a, ob->t, &oa->t, &oa->own) != 0) {
        op_release(ob);
        return -1;
    }
    return 0;
}


/* ------------------------------------------------------------ selection */

/* where(condition, input, other); code 1: the method input.where(condition, other). */
PyObject *evpy_where_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames)
{
    static const char *const names[] = {"condition", "input", "other", NULL};
    static const char *const mnames[] = {"input", "condition", "other", NULL};
    PyObject *a[3];
    if (nargs == 1 && !kwnames && !code) {
        PyErr_SetString(PyExc_TypeError, "where(condition) with one argument (nonzero) is not "
                                         "supported; pass input and other");
        return NULL;
    }
    if (evpy_parse_args("where", args, nargs, kwnames, code ? mnames : names, 3, 3, a) != 0) {
        return NULL;
    }
    PyObject *cond = code ? a[1] : a[0], *x = code ? a[0] : a[1], *y = a[2];
    operand oc, ox, oy;
    if (evpy_operand(st, cond, NULL, &oc.t, &oc.own) != 0) {
        return NULL;
    }
    PyObject *res = NULL;
    if (operand_pair(st, x, y, &ox, &oy) == 0) {
        ev_exec ex;
        if (evpy_exec(&ex) == 0) {
            ev_tensor *out;
            int rc = ev_ag_where(&ex, oc.t, ox.t, oy.t, &out);
            res = evpy_finish(st, rc, out);
        }
        op_release(&ox);
        op_release(&oy);
    }
    op_release(&oc);
    return res;
}

/* cat(tensors, dim=0) (code 0) and stack(tensors, dim=0) (code 1). */
PyObject *evpy_join_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames)
{
    static const char *const names[] = {"tensors", "dim", NULL};
    const char *fn = code ? "stack" : "cat";
    PyObject *a[2];
    long dim = 0;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 2, 1, a) != 0 ||
        (a[1] && evpy_parse_int(fn, "dim", a[1], &dim) != 0)) {
        return NULL;
    }
    if (evpy_tensor_check(a[0]) || !PySequence_Check(a[0])) {
        PyErr_Format(PyExc_TypeError, "%s(): expected a sequence of tensors, got %.100s", fn,
                     Py_TYPE(a[0])->tp_name);
        return NULL;
    }
    PyObject *seq = PySequence_Fast(a[0], "expected a sequence of tensors");
    if (!seq) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n == 0) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s(): expected a non-empty sequence of tensors", fn);
        return NULL;
    }
    ev_tensor **ts = PyMem_Calloc((size_t)n, sizeof *ts);
    int *own = PyMem_Calloc((size_t)n, sizeof *own);
    PyObject *res = NULL;
    Py_ssize_t got = 0;
    if (!ts || !own) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < n; got++) {
        if (evpy_operand(st, PySequence_Fast_GET_ITEM(seq, got), NULL, &ts[got], &own[got]) !=
            0) {
            goto done;
        }
    }
    ev_exec ex;
    if (evpy_exec(&ex) == 0) {
        ev_tensor *out;
        int rc = ev_ag_cat(&ex, ts, (int)n, (int)dim, code, &out);
        res = evpy_finish(st, rc, out);
    }
done:
    for (Py_ssize_t i = 0; i < got; i++) {
        if (own[i]) {
            ev_tensor_unref(ts[i]);
        }
    }
    PyMem_Free(ts);
    PyMem_Free(own);
    Py_DECREF(seq);
    return res;
}


/* index_select(input, dim, index), gather(input, dim, index), take(input,
 * index), scatter_add(input, dim, index, src) and scatter_add_. */
PyObject *evpy_select_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    static const char *const fns[] = {"index_select", "gather", "take", "scatter_add",
                                      "scatter_add_"};
    static const char *const n3[] = {"input", "dim", "index", NULL};
    static const char *const n2[] = {"input", "index", NULL};
    static const char *const n4[] = {"input", "dim", "index", "src", NULL};
    const char *fn = fns[code];
    const char *const *names = code == EVPY_SEL_TAKE ? n2 : code >= EVPY_SEL_SCATTER_ADD ? n4 : n3;
    int na = code == EVPY_SEL_TAKE ? 2 : code >= EVPY_SEL_SCATTER_ADD ? 4 : 3;
    PyObject *a[4];
    ev_tensor *x;
    long dim = 0;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, na, na, a) != 0 || !(x = evpy_need_tensor(fn, a[0])) ||
        (code != EVPY_SEL_TAKE && evpy_parse_int(fn, "dim", a[1], &dim) != 0)) {
        return NULL;
    }
    operand oi = {NULL, 0}, os = {NULL, 0};
    PyObject *idx_obj = code == EVPY_SEL_TAKE ? a[1] : a[2];
    if (evpy_operand(st, idx_obj, NULL, &oi.t, &oi.own) != 0) {
        return NULL;
    }
    PyObject *res = NULL;
    if (code >= EVPY_SEL_SCATTER_ADD && evpy_operand(st, a[3], x, &os.t, &os.own) != 0) {
        goto done;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        goto done;
    }
    ev_tensor *out = NULL;
    int rc;
    switch (code) {
    case EVPY_SEL_INDEX_SELECT:
        rc = ev_ag_index_select(&ex, x, (int)dim, oi.t, &out);
        break;
    case EVPY_SEL_GATHER:
        rc = ev_ag_gather(&ex, x, (int)dim, oi.t, &out);
        break;
    case EVPY_SEL_TAKE:
        rc = ev_ag_take(&ex, x, oi.t, &out);
        break;
    case EVPY_SEL_SCATTER_ADD:
        rc = ev_ag_scatter_add(&ex, x, (int)dim, oi.t, os.t, &out);
        break;
    default:
        rc = ev_ag_scatter_add_(&ex, x, (int)dim, oi.t, os.t);
        if (rc) {
            evpy_raise(rc);
        } else if (evpy_maybe_sync(x) == 0) {
            res = Py_NewRef(a[0]);
        }
        goto done;
    }
    res = evpy_finish(st, rc, out);
done:
    op_release(&oi);
    op_release(&os);
    return res;
}

/* ------------------------------------------------- encodings and losses */

/* one_hot(index, num_classes=-1), as PyTorch. num_classes=-1 means
 * max(index) + 1, which needs the values: that case is a sync point (it
 * waits for index and reads its maximum); a given num_classes is not. */
PyObject *evpy_one_hot_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    static const char *const names[] = {"index", "num_classes", NULL};
    (void)code;
    PyObject *a[2];
    long long nc = -1;
    if (evpy_parse_args("one_hot", args, nargs, kwnames, names, 2, 1, a) != 0) {
        return NULL;
    }
    if (a[1]) {
        if (PyBool_Check(a[1]) || !PyIndex_Check(a[1])) {
            PyErr_Format(PyExc_TypeError, "one_hot(): num_classes must be an integer, not "
                         "%.100s", Py_TYPE(a[1])->tp_name);
            return NULL;
        }
        nc = PyLong_AsLongLong(a[1]);
        if (nc == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    operand oi = {NULL, 0};
    if (evpy_operand(st, a[0], NULL, &oi.t, &oi.own) != 0) {
        return NULL;
    }
    PyObject *res = NULL;
    ev_exec ex;
    ev_tensor *out = NULL;
    int rc;
    if (evpy_exec(&ex) != 0) {
        goto done;
    }
    if (nc == -1) {
        if (ev_tensor_numel(oi.t) == 0) {
            PyErr_SetString(PyExc_ValueError, "one_hot(): cannot infer num_classes from an "
                                              "empty index; pass num_classes");
            goto done;
        }
        ev_tensor *m;
        /* ev_max checks the dtype too (a float index fails in ev_one_hot). */
        if ((rc = ev_max(&ex, oi.t, 0, NULL, 0, &m)) != 0) {
            evpy_raise(rc);
            goto done;
        }
        int64_t n;
        int64_t *v = evpy_host_int64(m, &n);
        ev_tensor_unref(m);
        if (!v) {
            goto done;
        }
        long long mx = (long long)v[0];
        PyMem_Free(v);
        if (mx < 0) {
            PyErr_Format(PyExc_IndexError, "one_hot(): index %lld is out of range (class "
                         "indices must be >= 0)", mx);
            goto done;
        }
        nc = mx + 1;
    }
    rc = ev_one_hot(&ex, oi.t, (int64_t)nc, &out);
    res = evpy_finish(st, rc, out);
done:
    op_release(&oi);
    return res;
}

/* cross_entropy(input, target, reduction='mean'), as PyTorch's functional
 * form without weight, ignore_index or label_smoothing. */
PyObject *evpy_cross_entropy_fn(evpy_state *st, int code, PyObject *const *args,
                                  Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"input", "target", "reduction", NULL};
    (void)code;
    PyObject *a[3];
    ev_tensor *x;
    if (evpy_parse_args("cross_entropy", args, nargs, kwnames, names, 3, 2, a) != 0 ||
        !(x = evpy_need_tensor("cross_entropy", a[0]))) {
        return NULL;
    }
    int red = EV_REDUCTION_MEAN;
    if (a[2]) {
        red = -1;
        for (int r = 0; PyUnicode_Check(a[2]) && r < EV_REDUCTION_COUNT; r++) {
            if (PyUnicode_CompareWithASCIIString(a[2], ev_reduction_name(r)) == 0) {
                red = r;
            }
        }
        if (red < 0) {
            PyErr_Format(PyExc_ValueError, "cross_entropy(): reduction must be 'none', "
                         "'mean' or 'sum', not %R", a[2]);
            return NULL;
        }
    }
    operand ot = {NULL, 0};
    if (evpy_operand(st, a[1], NULL, &ot.t, &ot.own) != 0) {
        return NULL;
    }
    PyObject *res = NULL;
    ev_exec ex;
    if (evpy_exec(&ex) == 0) {
        ev_tensor *out = NULL;
        int rc = ev_ag_cross_entropy(&ex, x, ot.t, red, &out);
        res = evpy_finish(st, rc, out);
    }
    op_release(&ot);
    return res;
}

