/* The fused optimizer updates (include/eagervm/ops.h) as private functions of
 * eagervm._C, for eagervm.optim: _sgd_update_ and _adam_update_ (one
 * parameter), _sgd_update_multi_ and _adam_update_multi_ (a list). Each
 * issues one instruction and returns None at once. */
#include <limits.h>

#include "evpy.h"

/* obj as a float (a Python int or float, or anything with __float__). */
static int parse_double(const char *fn, const char *what, PyObject *obj, double *out)
{
    if (PyBool_Check(obj) || !(PyFloat_Check(obj) || PyNumber_Check(obj))) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be a number, not %.100s", fn, what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = PyFloat_AsDouble(obj);
    return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* A Tensor, or NULL for None (what names the argument). */
static int parse_optional_tensor(const char *fn, PyObject *obj, ev_tensor **out)
{
    if (!obj || obj == Py_None) {
        *out = NULL;
        return 0;
    }
    *out = evpy_need_tensor(fn, obj);
    return *out ? 0 : -1;
}

/* Issued: None, or under EAGERVM_SYNC=1 after the update has run. */
static PyObject *finish(int rc, ev_tensor *param)
{
    if (rc) {
        return evpy_raise(rc);
    }
    if (evpy_maybe_sync(param) != 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* _sgd_update_(param, grad, momentum_buf, lr, momentum, dampening,
 *              weight_decay, nesterov, maximize, first_step) */
static PyObject *py_sgd_update(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    (void)mod;
    static const char fn[] = "_sgd_update_";
    static const char *const names[] = {"param",        "grad",     "momentum_buf", "lr",
                                        "momentum",     "dampening", "weight_decay",
                                        "nesterov",     "maximize", "first_step",   NULL};
    PyObject *a[10];
    ev_tensor *p, *g, *buf;
    double lr, momentum, dampening, wd;
    int nesterov, maximize, first;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 10, 10, a) != 0 ||
        !(p = evpy_need_tensor(fn, a[0])) || !(g = evpy_need_tensor(fn, a[1])) ||
        parse_optional_tensor(fn, a[2], &buf) != 0 || parse_double(fn, "lr", a[3], &lr) ||
        parse_double(fn, "momentum", a[4], &momentum) ||
        parse_double(fn, "dampening", a[5], &dampening) ||
        parse_double(fn, "weight_decay", a[6], &wd) || (nesterov = evpy_parse_bool(a[7], 0)) < 0 ||
        (maximize = evpy_parse_bool(a[8], 0)) < 0 || (first = evpy_parse_bool(a[9], 0)) < 0) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    return finish(ev_sgd_update_(&ex, p, g, buf, lr, momentum, dampening, wd, nesterov,
                                 maximize, first),
                  p);
}

/* _adam_update_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr,
 *               beta1, beta2, eps, weight_decay, decoupled, maximize) */
static PyObject *py_adam_update(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    (void)mod;
    static const char fn[] = "_adam_update_";
    static const char *const names[] = {"param", "grad",         "exp_avg",   "exp_avg_sq",
                                        "max_exp_avg_sq",         "step",      "lr",
                                        "beta1", "beta2",        "eps",       "weight_decay",
                                        "decoupled",              "maximize",  NULL};
    PyObject *a[13];
    ev_tensor *p, *g, *m, *v, *x;
    long step;
    double lr, b1, b2, eps, wd;
    int decoupled, maximize;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 13, 13, a) != 0 ||
        !(p = evpy_need_tensor(fn, a[0])) || !(g = evpy_need_tensor(fn, a[1])) ||
        !(m = evpy_need_tensor(fn, a[2])) || !(v = evpy_need_tensor(fn, a[3])) ||
        parse_optional_tensor(fn, a[4], &x) != 0 ||
        evpy_parse_int(fn, "step", a[5], &step) != 0 || parse_double(fn, "lr", a[6], &lr) ||
        parse_double(fn, "beta1", a[7], &b1) || parse_double(fn, "beta2", a[8], &b2) ||
        parse_double(fn, "eps", a[9], &eps) || parse_double(fn, "weight_decay", a[10], &wd) ||
        (decoupled = evpy_parse_bool(a[11], 0)) < 0 || (maximize = evpy_parse_bool(a[12], 0)) < 0) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    return finish(ev_adam_update_(&ex, p, g, m, v, x, (int64_t)step, lr, b1, b2, eps, wd,
                                  decoupled, maximize),
                  p);
}

/* ---------------------------------------------------- many parameters */

/* A list argument of the multi-tensor forms: a sequence of n entries (n < 0:
 * its length sets n). Entries are Tensors, or None where none_ok. */
typedef struct tensor_list {
    ev_tensor **t; /* PyMem_Malloc'd; borrowed tensors; NULL for None */
    PyObject *seq; /* the sequence, held while t is used */
} tensor_list;

static void tensor_list_free(tensor_list *l)
{
    PyMem_Free(l->t);
    Py_XDECREF(l->seq);
    l->t = NULL;
    l->seq = NULL;
}

static int tensor_list_parse(const char *fn, const char *what, PyObject *obj, int none_ok,
                             Py_ssize_t *n, tensor_list *out)
{
    out->t = NULL;
    out->seq = PySequence_Fast(obj, "");
    if (!out->seq) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be a list of Tensors, not %.100s", fn, what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(out->seq);
    if (*n >= 0 && len != *n) {
        PyErr_Format(PyExc_ValueError, "%s(): %s has %zd entries, expected %zd (one per "
                     "parameter)", fn, what, len, *n);
        return -1;
    }
    *n = len;
    out->t = PyMem_Malloc(sizeof *out->t * (size_t)(len ? len : 1));
    if (!out->t) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(out->seq);
    for (Py_ssize_t i = 0; i < len; i++) {
        if (items[i] == Py_None && none_ok) {
            out->t[i] = NULL;
        } else if (!evpy_tensor_check(items[i])) {
            PyErr_Format(PyExc_TypeError, "%s(): %s[%zd] must be a Tensor%s, not %.100s", fn,
                         what, i, none_ok ? " or None" : "", Py_TYPE(items[i])->tp_name);
            return -1;
        } else if (!(out->t[i] = evpy_tensor_get(items[i]))) {
            return -1;
        }
    }
    return 0;
}

/* A sequence of n integers (bools too, for first_steps) into out[]. */
static int int_list_parse(const char *fn, const char *what, PyObject *obj, Py_ssize_t n,
                          int64_t *out)
{
    PyObject *seq = PySequence_Fast(obj, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be a list of integers, not %.100s", fn,
                     what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    int rc = 0;
    if (PySequence_Fast_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_ValueError, "%s(): %s has %zd entries, expected %zd (one per "
                     "parameter)", fn, what, PySequence_Fast_GET_SIZE(seq), n);
        rc = -1;
    }
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
        PyObject *v = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyIndex_Check(v)) {
            PyErr_Format(PyExc_TypeError, "%s(): %s[%zd] must be an integer, not %.100s", fn,
                         what, i, Py_TYPE(v)->tp_name);
            rc = -1;
            break;
        }
        out[i] = PyLong_AsLongLong(v);
        if (out[i] == -1 && PyErr_Occurred()) {
            rc = -1;
        }
    }
    Py_DECREF(seq);
    return rc;
}

/* _sgd_update_multi_(params, grads, momentum_bufs, first_steps, lr, momentum,
 *                    dampening, weight_decay, nesterov, maximize) */
static PyObject *py_sgd_update_multi(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames)
{
    (void)mod;
    static const char fn[] = "_sgd_update_multi_";
    static const char *const names[] = {"params",   "grads",        "momentum_bufs",
                                        "first_steps", "lr",        "momentum",
                                        "dampening", "weight_decay", "nesterov",
                                        "maximize", NULL};
    PyObject *a[10];
    double lr, momentum, dampening, wd;
    int nesterov, maximize;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 10, 10, a) != 0 ||
        parse_double(fn, "lr", a[4], &lr) || parse_double(fn, "momentum", a[5], &momentum) ||
        parse_double(fn, "dampening", a[6], &dampening) ||
        parse_double(fn, "weight_decay", a[7], &wd) || (nesterov = evpy_parse_bool(a[8], 0)) < 0 ||
        (maximize = evpy_parse_bool(a[9], 0)) < 0) {
        return NULL;
    }
    Py_ssize_t n = -1;
    tensor_list ps = {0}, gs = {0}, bs = {0};
    int64_t *first64 = NULL;
    int *first = NULL;
    PyObject *ret = NULL;
    if (tensor_list_parse(fn, "params", a[0], 0, &n, &ps) != 0 ||
        tensor_list_parse(fn, "grads", a[1], 0, &n, &gs) != 0 ||
        (a[2] != Py_None && tensor_list_parse(fn, "momentum_bufs", a[2], 1, &n, &bs) != 0)) {
        goto done;
    }
    if (n > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "%s(): too many parameters (%zd)", fn, n);
        goto done;
    }
    if (a[3] != Py_None) {
        first64 = PyMem_Malloc(sizeof *first64 * (size_t)(n ? n : 1));
        first = PyMem_Malloc(sizeof *first * (size_t)(n ? n : 1));
        if (!first64 || !first) {
            PyErr_NoMemory();
            goto done;
        }
        if (int_list_parse(fn, "first_steps", a[3], n, first64) != 0) {
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            first[i] = first64[i] != 0;
        }
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        goto done;
    }
    int rc = ev_sgd_update_multi_(&ex, (int)n, ps.t, gs.t, bs.t, first, lr, momentum,
                                  dampening, wd, nesterov, maximize);
    if (rc) {
        evpy_raise(rc);
        goto done;
    }
    if (evpy_sync_mode && evpy_synchronize() != 0) {
        goto done;
    }
    ret = Py_NewRef(Py_None);
done:
    tensor_list_free(&ps);
    tensor_list_free(&gs);
    tensor_list_free(&bs);
    PyMem_Free(first64);
    PyMem_Free(first);
    return ret;
}

/* _adam_update_multi_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs,
 *                     steps, lr, beta1, beta2, eps, weight_decay, decoupled,
 *                     maximize) */
static PyObject *py_adam_update_multi(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                      PyObject *kwnames)
{
    (void)mod;
    static const char fn[] = "_adam_update_multi_";
    static const char *const names[] = {"params", "grads",     "exp_avgs",     "exp_avg_sqs",
                                        "max_exp_avg_sqs",     "steps",        "lr",
                                        "beta1",  "beta2",     "eps",          "weight_decay",
                                        "decoupled",           "maximize",     NULL};
    PyObject *a[13];
    double lr, b1, b2, eps, wd;
    int decoupled, maximize;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 13, 13, a) != 0 ||
        parse_double(fn, "lr", a[6], &lr) || parse_double(fn, "beta1", a[7], &b1) ||
        parse_double(fn, "beta2", a[8], &b2) || parse_double(fn, "eps", a[9], &eps) ||
        parse_double(fn, "weight_decay", a[10], &wd) ||
        (decoupled = evpy_parse_bool(a[11], 0)) < 0 || (maximize = evpy_parse_bool(a[12], 0)) < 0) {
        return NULL;
    }
    Py_ssize_t n = -1;
    tensor_list ps = {0}, gs = {0}, ms = {0}, vs = {0}, xs = {0};
    int64_t *steps = NULL;
    PyObject *ret = NULL;
    if (tensor_list_parse(fn, "params", a[0], 0, &n, &ps) != 0 ||
        tensor_list_parse(fn, "grads", a[1], 0, &n, &gs) != 0 ||
        tensor_list_parse(fn, "exp_avgs", a[2], 0, &n, &ms) != 0 ||
        tensor_list_parse(fn, "exp_avg_sqs", a[3], 0, &n, &vs) != 0 ||
        (a[4] != Py_None && tensor_list_parse(fn, "max_exp_avg_sqs", a[4], 0, &n, &xs) != 0)) {
        goto done;
    }
    if (n > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "%s(): too many parameters (%zd)", fn, n);
        goto done;
    }
    steps = PyMem_Malloc(sizeof *steps * (size_t)(n ? n : 1));
    if (!steps) {
        PyErr_NoMemory();
        goto done;
    }
    if (int_list_parse(fn, "steps", a[5], n, steps) != 0) {
        goto done;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        goto done;
    }
    int rc = ev_adam_update_multi_(&ex, (int)n, ps.t, gs.t, ms.t, vs.t, xs.t, steps, lr, b1, b2,
                                   eps, wd, decoupled, maximize);
    if (rc) {
        evpy_raise(rc);
        goto done;
    }
    if (evpy_sync_mode && evpy_synchronize() != 0) {
        goto done;
    }
    ret = Py_NewRef(Py_None);
done:
    tensor_list_free(&ps);
    tensor_list_free(&gs);
    tensor_list_free(&ms);
    tensor_list_free(&vs);
    tensor_list_free(&xs);
    PyMem_Free(steps);
    return ret;
}

PyMethodDef evpy_optim_methods[] = {
    {"_sgd_update_", (PyCFunction)(void (*)(void))py_sgd_update, METH_FASTCALL | METH_KEYWORDS,
     "_sgd_update_(param, grad, momentum_buf, lr, momentum, dampening, weight_decay, "
     "nesterov, maximize, first_step)\n--\n\n"
     "One SGD step on param in place, as one instruction (ev_sgd_update_): momentum_buf "
     "(None without momentum) is written too; first_step fills it from the gradient. "
     "For eagervm.optim.SGD."},
    {"_adam_update_", (PyCFunction)(void (*)(void))py_adam_update,
     METH_FASTCALL | METH_KEYWORDS,
     "_adam_update_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, "
     "eps, weight_decay, decoupled, maximize)\n--\n\n"
     "One Adam (decoupled: AdamW) step on param in place, as one instruction "
     "(ev_adam_update_); step counts the updates, this one included; max_exp_avg_sq is None "
     "without amsgrad. For eagervm.optim.Adam and AdamW."},
    {"_sgd_update_multi_", (PyCFunction)(void (*)(void))py_sgd_update_multi,
     METH_FASTCALL | METH_KEYWORDS,
     "_sgd_update_multi_(params, grads, momentum_bufs, first_steps, lr, momentum, dampening, "
     "weight_decay, nesterov, maximize)\n--\n\n"
     "SGD steps on a list of parameters as one instruction (ev_sgd_update_multi_): lists of "
     "one entry per parameter; momentum_bufs and first_steps may be None."},
    {"_adam_update_multi_", (PyCFunction)(void (*)(void))py_adam_update_multi,
     METH_FASTCALL | METH_KEYWORDS,
     "_adam_update_multi_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, "
     "beta1, beta2, eps, weight_decay, decoupled, maximize)\n--\n\n"
     "Adam (AdamW) steps on a list of parameters as one instruction "
     "(ev_adam_update_multi_); max_exp_avg_sqs is None without amsgrad."},
    {NULL},
};
