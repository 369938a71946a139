/* The fused optimizer updates (include/eagervm/ops.h) as private functions of
 * eagervm._C, for eagervm.optim: _sgd_update_ and _adam_update_. Each issues
 * one instruction and returns None at once. */
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
    {NULL},
};
