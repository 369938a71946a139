/* Autograd for Python: Tensor.requires_grad, .grad, .grad_fn, .is_leaf,
 * requires_grad_(), detach(), backward() and the hooks, the graph nodes
 * (eagervm._C.Node), grad mode, and the functions eagervm.autograd builds
 * on. The graph itself lives in the C autograd layer. */
#include "evpy.h"

#include "eagervm/autograd.h"

/* ------------------------------------------------------------------- nodes */

typedef struct {
    PyObject_HEAD
    ev_ag_node *node;  /* owned reference */
} evpy_node;

static PyTypeObject *node_type;

static void node_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    ev_ag_node_unref(((evpy_node *)self)->node);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *node_wrap(ev_ag_node *n)
{
    if (!n) {
        Py_RETURN_NONE;
    }
    evpy_node *o = PyObject_New(evpy_node, node_type);
    if (!o) {
        return NULL;
    }
    ev_ag_node_ref(n);
    o->node = n;
    return (PyObject *)o;
}

static PyObject *node_name(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyUnicode_FromString(ev_ag_node_name(((evpy_node *)self)->node));
}

static PyObject *node_get_next(PyObject *self, void *Py_UNUSED(closure))
{
    ev_ag_node *n = ((evpy_node *)self)->node;
    int k = ev_ag_node_n_next(n);
    PyObject *t = PyTuple_New(k);
    for (int i = 0; t && i < k; i++) {
        PyObject *pair = Py_BuildValue("(Ni)", node_wrap(ev_ag_node_next(n, i)), 0);
        if (!pair) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, pair);
    }
    return t;
}

static PyObject *node_get_site(PyObject *self, void *Py_UNUSED(closure))
{
    const ev_site *s = ev_ag_node_site(((evpy_node *)self)->node);
    if (!s || !s->file) {
        Py_RETURN_NONE;
    }
    return PyUnicode_FromFormat("%s:%d", s->file, s->line);
}

static PyObject *node_repr(PyObject *self)
{
    return PyUnicode_FromFormat("<%s>", ev_ag_node_name(((evpy_node *)self)->node));
}

static PyObject *node_richcompare(PyObject *a, PyObject *b, int op)
{
    if (Py_TYPE(b) != node_type || (op != Py_EQ && op != Py_NE)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    int same = ((evpy_node *)a)->node == ((evpy_node *)b)->node;
    return PyBool_FromLong(op == Py_EQ ? same : !same);
}

static Py_hash_t node_hash(PyObject *self)
{
    Py_hash_t h = (Py_hash_t)((uintptr_t)((evpy_node *)self)->node >> 4);
    return h == -1 ? -2 : h;
}

static PyMethodDef node_methods[] = {
    {"name", node_name, METH_NOARGS, "name($self)\n--\n\nThe node's name (\"mul_backward\")."},
    {NULL},
};

static PyGetSetDef node_getset[] = {
    {"next_functions", node_get_next, NULL,
     "the nodes of the inputs' gradients, as (node or None, 0) pairs", NULL},
    {"site", node_get_site, NULL, "file:line of the forward op that made it", NULL},
    {NULL},
};

static PyType_Slot node_slots[] = {
    {Py_tp_dealloc, node_dealloc},
    {Py_tp_repr, node_repr},
    {Py_tp_richcompare, node_richcompare},
    {Py_tp_hash, node_hash},
    {Py_tp_methods, node_methods},
    {Py_tp_getset, node_getset},
    {Py_tp_doc, "A node of the autograd graph: the backward of one recorded op."},
    {0, NULL},
};

/* ----------------------------------------------------------- tensor state */

PyObject *evpy_tensor_get_requires_grad(PyObject *self, void *Py_UNUSED(closure))
{
    ev_tensor *t = evpy_tensor_get(self);
    return t ? PyBool_FromLong(ev_ag_requires_grad(t)) : NULL;
}

int evpy_tensor_set_requires_grad(PyObject *self, PyObject *value, void *Py_UNUSED(closure))
{
    ev_tensor *t = evpy_tensor_get(self);
    if (!t) {
        return -1;
    }
    if (!value || !PyBool_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "requires_grad must be a bool");
        return -1;
    }
    int rc = ev_ag_set_requires_grad(t, value == Py_True);
    return rc ? evpy_raise_int(rc) : 0;
}

PyObject *evpy_tensor_get_grad(PyObject *self, void *Py_UNUSED(closure))
{
    ev_tensor *t = evpy_tensor_get(self);
    if (!t) {
        return NULL;
    }
    ev_tensor *g = ev_ag_grad(t);
    if (!g) {
        Py_RETURN_NONE;
    }
    return evpy_tensor_wrap(evpy_state_of_type(Py_TYPE(self)), g);
}

int evpy_tensor_set_grad(PyObject *self, PyObject *value, void *Py_UNUSED(closure))
{
    ev_tensor *t = evpy_tensor_get(self), *g = NULL;
    if (!t) {
        return -1;
    }
    if (value && value != Py_None) {
        if (!evpy_tensor_check(value)) {
            PyErr_Format(PyExc_TypeError, "grad must be a Tensor or None, not %.100s",
                         Py_TYPE(value)->tp_name);
            return -1;
        }
        if (!(g = evpy_tensor_get(value))) {
            return -1;
        }
    }
    int rc = ev_ag_set_grad(t, g);
    return rc ? evpy_raise_int(rc) : 0;
}

PyObject *evpy_tensor_get_is_leaf(PyObject *self, void *Py_UNUSED(closure))
{
    ev_tensor *t = evpy_tensor_get(self);
    return t ? PyBool_FromLong(ev_ag_is_leaf(t)) : NULL;
}

PyObject *evpy_tensor_get_grad_fn(PyObject *self, void *Py_UNUSED(closure))
{
    ev_tensor *t = evpy_tensor_get(self);
    return t ? node_wrap(ev_ag_grad_fn(t)) : NULL;
}

static PyObject *tensor_requires_grad_(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kwnames)
{
    static const char *const names[] = {"requires_grad", NULL};
    PyObject *a[1];
    if (evpy_parse_args("requires_grad_", args, nargs, kwnames, names, 1, 0, a) != 0) {
        return NULL;
    }
    int on = evpy_parse_bool(a[0], 1);
    ev_tensor *t = evpy_tensor_get(self);
    if (on < 0 || !t) {
        return NULL;
    }
    int rc = ev_ag_set_requires_grad(t, on);
    return rc ? evpy_raise(rc) : Py_NewRef(self);
}

static PyObject *tensor_detach(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    ev_tensor *t = evpy_tensor_get(self), *out;
    if (!t) {
        return NULL;
    }
    int rc = ev_ag_detach(t, &out);
    return rc ? evpy_raise(rc) : evpy_tensor_wrap(evpy_state_of_type(Py_TYPE(self)), out);
}

/* ------------------------------------------------------------------ hooks */

static void hook_free(void *ctx)
{
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF((PyObject *)ctx);
    PyGILState_Release(g);
}

/* Python raised inside a hook: the backward stops with this code, and the
 * exception stays set for the caller of backward to re-raise. */
#define HOOK_RAISED EV_EKERNEL

static int grad_hook(void *ctx, ev_tensor *grad, ev_tensor **out)
{
    evpy_state *st = PyType_GetModuleState(node_type);
    PyObject *g = evpy_tensor_wrap(st, ev_tensor_ref(grad));
    PyObject *r = g ? PyObject_CallOneArg((PyObject *)ctx, g) : NULL;
    Py_XDECREF(g);
    if (!r) {
        return HOOK_RAISED;
    }
    if (r != Py_None) {
        if (!evpy_tensor_check(r)) {
            PyErr_Format(PyExc_TypeError, "a gradient hook must return None or a Tensor, not "
                                          "%.100s", Py_TYPE(r)->tp_name);
            Py_DECREF(r);
            return HOOK_RAISED;
        }
        *out = ev_tensor_ref(evpy_tensor_get(r));
    }
    Py_DECREF(r);
    return 0;
}

static int leaf_hook(void *ctx, ev_tensor *leaf)
{
    evpy_state *st = PyType_GetModuleState(node_type);
    PyObject *t = evpy_tensor_wrap(st, ev_tensor_ref(leaf));
    PyObject *r = t ? PyObject_CallOneArg((PyObject *)ctx, t) : NULL;
    Py_XDECREF(t);
    Py_XDECREF(r);
    return r ? 0 : HOOK_RAISED;
}

static PyObject *register_common(PyObject *self, PyObject *fn, int post)
{
    ev_tensor *t = evpy_tensor_get(self);
    if (!t) {
        return NULL;
    }
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "the hook must be callable, not %.100s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    Py_INCREF(fn);
    int rc = post ? ev_ag_register_post_accumulate_hook(t, leaf_hook, fn, hook_free)
                  : ev_ag_register_hook(t, grad_hook, fn, hook_free);
    if (rc) {
        Py_DECREF(fn);
        return evpy_raise(rc);
    }
    Py_RETURN_NONE;
}

static PyObject *tensor_register_hook(PyObject *self, PyObject *fn)
{
    return register_common(self, fn, 0);
}

static PyObject *tensor_register_post_hook(PyObject *self, PyObject *fn)
{
    return register_common(self, fn, 1);
}

/* -------------------------------------------------------------- backward */

/* A sequence of Tensors (or one) as a borrowed array; NULL entries for
 * None when allow_none. Returns the count, or -1 with an exception. */
static Py_ssize_t tensor_seq(const char *fn, const char *what, PyObject *obj, int allow_none,
                             PyObject **fast, ev_tensor ***out)
{
    *fast = NULL;
    *out = NULL;
    if (evpy_tensor_check(obj) || (allow_none && obj == Py_None)) {
        *fast = PyTuple_Pack(1, obj);
    } else {
        *fast = PySequence_Fast(obj, "");
        if (!*fast) {
            PyErr_Format(PyExc_TypeError, "%s: %s must be a Tensor or a sequence of Tensors",
                         fn, what);
            return -1;
        }
    }
    if (!*fast) {
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(*fast);
    *out = PyMem_Calloc(n ? (size_t)n : 1, sizeof(ev_tensor *));
    if (!*out) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(*fast, i);
        if (allow_none && it == Py_None) {
            continue;
        }
        if (!evpy_tensor_check(it)) {
            PyErr_Format(PyExc_TypeError, "%s: %s[%zd] must be a Tensor, not %.100s", fn, what,
                         i, Py_TYPE(it)->tp_name);
            return -1;
        }
        if (!((*out)[i] = evpy_tensor_get(it))) {
            return -1;
        }
    }
    return n;
}

static PyObject *finish_backward(int rc)
{
    if (rc == HOOK_RAISED && PyErr_Occurred()) {
        return NULL;
    }
    return rc ? evpy_raise(rc) : Py_None;
}

/* _backward(tensors, grad_tensors, retain_graph) */
static PyObject *py_backward(PyObject *Py_UNUSED(mod), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_backward(tensors, grad_tensors, retain_graph)");
        return NULL;
    }
    PyObject *fo = NULL, *fg = NULL, *res = NULL;
    ev_tensor **outs = NULL, **grads = NULL;
    Py_ssize_t n = tensor_seq("backward", "tensors", args[0], 0, &fo, &outs);
    Py_ssize_t ng = n < 0 ? -1 : tensor_seq("backward", "grad_tensors", args[1], 1, &fg, &grads);
    int retain = ng < 0 ? -1 : PyObject_IsTrue(args[2]);
    if (retain >= 0 && ng != n) {
        PyErr_Format(PyExc_ValueError,
                     "backward: %zd gradients given for %zd tensors (one each, or None)", ng, n);
    } else if (retain >= 0) {
        ev_exec ex;
        if (evpy_exec(&ex) == 0) {
            res = finish_backward(ev_ag_backward(&ex, (int)n, outs, grads, retain));
            Py_XINCREF(res);
        }
    }
    Py_XDECREF(fo);
    Py_XDECREF(fg);
    PyMem_Free(outs);
    PyMem_Free(grads);
    return res;
}

/* _grad(outputs, inputs, grad_outputs, retain_graph, allow_unused) */
static PyObject *py_grad(PyObject *Py_UNUSED(mod), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "_grad(outputs, inputs, grad_outputs, retain_graph, allow_unused)");
        return NULL;
    }
    PyObject *fo = NULL, *fi = NULL, *fg = NULL, *res = NULL;
    ev_tensor **outs = NULL, **ins = NULL, **grads = NULL, **results = NULL;
    Py_ssize_t n = tensor_seq("grad", "outputs", args[0], 0, &fo, &outs);
    Py_ssize_t ni = n < 0 ? -1 : tensor_seq("grad", "inputs", args[1], 0, &fi, &ins);
    Py_ssize_t ng = ni < 0 ? -1 : tensor_seq("grad", "grad_outputs", args[2], 1, &fg, &grads);
    int retain = ng < 0 ? -1 : PyObject_IsTrue(args[3]);
    int unused = retain < 0 ? -1 : PyObject_IsTrue(args[4]);
    if (unused >= 0 && ng != n) {
        PyErr_Format(PyExc_ValueError, "grad: %zd grad_outputs given for %zd outputs", ng, n);
    } else if (unused >= 0 && !(results = PyMem_Calloc((size_t)ni + 1, sizeof(*results)))) {
        PyErr_NoMemory();
    } else if (unused >= 0) {
        ev_exec ex;
        if (evpy_exec(&ex) == 0) {
            int rc = ev_ag_grad_of(&ex, (int)n, outs, grads, (int)ni, ins, retain, unused,
                                   results);
            if (finish_backward(rc) && (res = PyTuple_New(ni)) != NULL) {
                evpy_state *st = PyType_GetModuleState(node_type);
                for (Py_ssize_t i = 0; i < ni; i++) {
                    PyObject *o = results[i] ? evpy_tensor_wrap(st, results[i]) : Py_NewRef(Py_None);
                    results[i] = NULL;
                    if (!o) {
                        Py_CLEAR(res);
                        break;
                    }
                    PyTuple_SET_ITEM(res, i, o);
                }
            }
            for (Py_ssize_t i = 0; i < ni; i++) {
                ev_tensor_unref(results[i]);
            }
        }
    }
    Py_XDECREF(fo);
    Py_XDECREF(fi);
    Py_XDECREF(fg);
    PyMem_Free(outs);
    PyMem_Free(ins);
    PyMem_Free(grads);
    PyMem_Free(results);
    return res;
}

static PyObject *py_set_grad_enabled(PyObject *Py_UNUSED(mod), PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0) {
        return NULL;
    }
    return PyBool_FromLong(ev_ag_set_grad_enabled(on));
}

static PyObject *py_is_grad_enabled(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(ev_ag_is_grad_enabled());
}

int evpy_ag_refuse(const char *what, Py_ssize_t n, PyObject *const *objs)
{
    if (!ev_ag_is_grad_enabled()) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (objs[i] && evpy_tensor_check(objs[i])) {
            ev_tensor *t = evpy_tensor_get(objs[i]);
            if (t && ev_ag_requires_grad(t)) {
                PyErr_Format(PyExc_RuntimeError,
                             "autograd: %s has no derivative yet, and an input requires grad "
                             "(compute it under eagervm.no_grad(), or on detach()ed inputs)",
                             what);
                return -1;
            }
        }
    }
    return 0;
}

PyObject *evpy_call_creation(evpy_binding_fn binding, evpy_state *st, int code,
                             PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, at = -1;
    for (Py_ssize_t i = 0; i < nk; i++) {
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), "requires_grad") ==
            0) {
            at = i;
        }
    }
    if (at < 0) {
        return binding(st, code, args, nargs, kwnames);
    }
    int on = PyObject_IsTrue(args[nargs + at]);
    if (on < 0) {
        return NULL;
    }
    PyObject **rest = PyMem_Malloc(sizeof(PyObject *) * (size_t)(nargs + nk));
    PyObject *names = PyTuple_New(nk - 1);
    PyObject *res = NULL;
    if (!rest || !names) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        rest[i] = args[i];
    }
    for (Py_ssize_t i = 0, j = 0; i < nk; i++) {
        if (i != at) {
            rest[nargs + j] = args[nargs + i];
            PyTuple_SET_ITEM(names, j, Py_NewRef(PyTuple_GET_ITEM(kwnames, i)));
            j++;
        }
    }
    res = binding(st, code, rest, nargs, nk > 1 ? names : NULL);
    if (res && on && evpy_tensor_check(res)) {
        int rc = ev_ag_set_requires_grad(evpy_tensor_get(res), 1);
        if (rc) {
            Py_CLEAR(res);
            evpy_raise(rc);
        }
    }
done:
    Py_XDECREF(names);
    PyMem_Free(rest);
    return res;
}

PyMethodDef evpy_autograd_methods[] = {
    {"_backward", (PyCFunction)(void (*)(void))py_backward, METH_FASTCALL,
     "_backward(tensors, grad_tensors, retain_graph)\n--\n\nThe walk behind "
     "eagervm.autograd.backward."},
    {"_grad", (PyCFunction)(void (*)(void))py_grad, METH_FASTCALL,
     "_grad(outputs, inputs, grad_outputs, retain_graph, allow_unused)\n--\n\nThe walk behind "
     "eagervm.autograd.grad: a tuple of gradients (None for unused inputs)."},
    {"_set_grad_enabled", py_set_grad_enabled, METH_O,
     "_set_grad_enabled(mode)\n--\n\nSets grad mode for the calling thread; returns the "
     "previous mode."},
    {"is_grad_enabled", py_is_grad_enabled, METH_NOARGS,
     "is_grad_enabled()\n--\n\nWhether ops issued by this thread are recorded for autograd."},
    {NULL},
};

static PyObject *tensor_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    static const char *const names[] = {"gradient", "retain_graph", "create_graph", "inputs",
                                        NULL};
    PyObject *a[4];
    if (evpy_parse_args("backward", args, nargs, kwnames, names, 4, 0, a) != 0) {
        return NULL;
    }
    if (a[2] && PyObject_IsTrue(a[2])) {
        PyErr_SetString(PyExc_NotImplementedError,
                        "backward(create_graph=True): higher-order gradients are not "
                        "supported yet");
        return NULL;
    }
    if (a[3] && a[3] != Py_None) {
        PyErr_SetString(PyExc_NotImplementedError, "backward(inputs=...) is not supported yet; "
                                                   "use eagervm.autograd.grad");
        return NULL;
    }
    ev_tensor *t = evpy_tensor_get(self), *g = NULL;
    if (!t) {
        return NULL;
    }
    if (a[0] && a[0] != Py_None && !(g = evpy_need_tensor("backward", a[0]))) {
        return NULL;
    }
    int retain = evpy_parse_bool(a[1], 0);
    ev_exec ex;
    if (retain < 0 || evpy_exec(&ex) != 0) {
        return NULL;
    }
    PyObject *r = finish_backward(ev_ag_backward(&ex, 1, &t, &g, retain));
    return Py_XNewRef(r);
}

PyMethodDef evpy_tensor_autograd_methods[] = {
    {"backward", (PyCFunction)(void (*)(void))tensor_backward, METH_FASTCALL | METH_KEYWORDS,
     "backward($self, gradient=None, retain_graph=None, create_graph=False, inputs=None)\n--\n\n"
     "Computes the gradients of self with respect to the graph's leaves and accumulates "
     "them into their .grad (gradient: self's, None for a one-element self)."},
    {"requires_grad_", (PyCFunction)(void (*)(void))tensor_requires_grad_,
     METH_FASTCALL | METH_KEYWORDS,
     "requires_grad_($self, requires_grad=True)\n--\n\nMarks a leaf as requiring grad (or "
     "not); returns self."},
    {"detach", tensor_detach, METH_NOARGS,
     "detach($self)\n--\n\nA tensor sharing self's elements, outside any graph."},
    {"register_hook", tensor_register_hook, METH_O,
     "register_hook($self, hook)\n--\n\nCalls hook(grad) with each gradient computed for "
     "self; it may return a replacement of the same shape and dtype."},
    {"register_post_accumulate_grad_hook", tensor_register_post_hook, METH_O,
     "register_post_accumulate_grad_hook($self, hook)\n--\n\nCalls hook(self) after each "
     "gradient is accumulated into the leaf's .grad."},
    {NULL},
};

int evpy_autograd_init(PyObject *module)
{
    PyType_Spec spec = {
        .name = "eagervm._C.Node",
        .basicsize = sizeof(evpy_node),
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION |
                 Py_TPFLAGS_IMMUTABLETYPE,
        .slots = node_slots,
    };
    node_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &spec, NULL);
    if (!node_type) {
        return -1;
    }
    return PyModule_AddObjectRef(module, "Node", (PyObject *)node_type);
}
