/* Random numbers for Python: eagervm.Generator (a counter-based Philox
 * generator), rand, randn, randint, the *_like forms, randperm, uniform_ and
 * normal_, and manual_seed. The ops are bound from the op table's rows
 * (op_table.c); evpy_random_init adds the type and manual_seed. */
#include <stdlib.h>
#include <string.h>

#include "evpy.h"

static int mdouble(PyObject *obj, double dflt, double *out)
{
    if (!obj) {
        *out = dflt;
        return 0;
    }
    *out = PyFloat_AsDouble(obj);
    return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* ---------------------------------------------------------------- random */

typedef struct {
    PyObject_HEAD
    ev_generator *gen; /* owned unless it is the default generator */
} evpy_generator;

static PyObject *generator_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"device", "seed", NULL};
    PyObject *device = Py_None, *seed_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O$O:Generator", kwlist, &device, &seed_obj)) {
        return NULL;
    }
    if (device != Py_None &&
        !(PyUnicode_Check(device) && PyUnicode_CompareWithASCIIString(device, "cpu") == 0)) {
        PyErr_Format(PyExc_ValueError, "Generator(): device must be 'cpu', not %R", device);
        return NULL;
    }
    unsigned long long seed = 0;
    if (seed_obj) {
        seed = PyLong_AsUnsignedLongLongMask(seed_obj);
        if (PyErr_Occurred()) {
            return NULL;
        }
    }
    evpy_generator *self = (evpy_generator *)tp->tp_alloc(tp, 0);
    if (!self) {
        return NULL;
    }
    int rc = ev_generator_create(seed, &self->gen);
    if (rc) {
        Py_DECREF(self);
        return evpy_raise(rc);
    }
    return (PyObject *)self;
}

static void generator_dealloc(PyObject *op)
{
    evpy_generator *self = (evpy_generator *)op;
    PyTypeObject *tp = Py_TYPE(op);
    ev_generator_destroy(self->gen); /* ignores the default generator */
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyObject *generator_manual_seed(PyObject *op, PyObject *seed)
{
    unsigned long long s = PyLong_AsUnsignedLongLongMask(seed);
    if (PyErr_Occurred()) {
        return NULL;
    }
    ev_generator_manual_seed(((evpy_generator *)op)->gen, s);
    return Py_NewRef(op);
}

static PyObject *generator_initial_seed(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    ev_generator_state s;
    ev_generator_get_state(((evpy_generator *)op)->gen, &s);
    return PyLong_FromUnsignedLongLong(s.seed);
}

static PyObject *generator_get_state(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    ev_generator_state s;
    ev_generator_get_state(((evpy_generator *)op)->gen, &s);
    return Py_BuildValue("(KK)", (unsigned long long)s.seed, (unsigned long long)s.offset);
}

static PyObject *generator_set_state(PyObject *op, PyObject *state)
{
    unsigned long long seed, offset;
    if (!PyTuple_Check(state) || !PyArg_ParseTuple(state, "KK:set_state", &seed, &offset)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "set_state(): expected the (seed, offset) tuple "
                                             "get_state() returns");
        }
        return NULL;
    }
    ev_generator_state s = {seed, offset};
    int rc = ev_generator_set_state(((evpy_generator *)op)->gen, &s);
    if (rc) {
        return evpy_raise(rc);
    }
    Py_RETURN_NONE;
}

static PyMethodDef generator_methods[] = {
    {"manual_seed", generator_manual_seed, METH_O,
     "manual_seed($self, seed)\n--\n\nSets the seed (and resets the offset); returns self."},
    {"initial_seed", generator_initial_seed, METH_NOARGS, "The seed last set."},
    {"get_state", generator_get_state, METH_NOARGS,
     "get_state($self)\n--\n\nThe state as a (seed, offset) tuple."},
    {"set_state", generator_set_state, METH_O,
     "set_state($self, state)\n--\n\nRestores a state from get_state(): the calls that follow "
     "replay the values issued after it was read."},
    {NULL},
};

static PyType_Slot generator_slots[] = {
    {Py_tp_new, generator_new},
    {Py_tp_dealloc, generator_dealloc},
    {Py_tp_methods, generator_methods},
    {Py_tp_doc, "Generator(device='cpu', *, seed=0)\n--\n\nA counter-based (Philox4x32-10) "
                "random number generator: the values of a call depend only on the seed and "
                "on the order of the calls that use the generator, never on which worker "
                "runs them."},
    {0, NULL},
};

static PyType_Spec generator_spec = {
    .name = "eagervm.Generator",
    .basicsize = sizeof(evpy_generator),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = generator_slots,
};

/* generator=None (the default) or a Generator. */
static int parse_generator(evpy_state *st, const char *fn, PyObject *obj, ev_generator **out)
{
    if (!obj || obj == Py_None) {
        *out = NULL;
        return 0;
    }
    if (!PyObject_TypeCheck(obj, st->generator_type)) {
        PyErr_Format(PyExc_TypeError, "%s(): generator must be an eagervm.Generator, not %.100s",
                     fn, Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = ((evpy_generator *)obj)->gen;
    return 0;
}

/* Splits positional shape entries from keywords generator=, dtype=, device=. */
static int shape_and_kw(evpy_state *st, const char *fn, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames, int *nd, int64_t *shape, ev_generator **gen,
                        int *dtype)
{
    PyObject *g = NULL, *dt = NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *size = NULL;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        if (PyUnicode_CompareWithASCIIString(key, "generator") == 0) {
            g = args[nargs + k];
        } else if (PyUnicode_CompareWithASCIIString(key, "dtype") == 0) {
            dt = args[nargs + k];
        } else if (PyUnicode_CompareWithASCIIString(key, "size") == 0) {
            size = args[nargs + k];
        } else if (PyUnicode_CompareWithASCIIString(key, "device") != 0) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fn,
                         key);
            return -1;
        }
    }
    int rc = size ? (nargs ? (PyErr_Format(PyExc_TypeError, "%s(): size given twice", fn), -1)
                           : evpy_parse_shape(&size, 1, nd, shape))
                  : evpy_parse_shape(args, nargs, nd, shape);
    if (rc != 0 || parse_generator(st, fn, g, gen) != 0 || evpy_parse_dtype(st, dt, dtype) != 0) {
        return -1;
    }
    return 0;
}

/* rand(*size, generator=None, dtype=None) (code 0) and randn (code 1). */
PyObject *evpy_rand_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames)
{
    const char *fn = code ? "randn" : "rand";
    int nd, dtype;
    int64_t shape[EV_MAX_DIMS];
    ev_generator *gen;
    if (shape_and_kw(st, fn, args, nargs, kwnames, &nd, shape, &gen, &dtype) != 0) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_dtype d = dtype < 0 ? EV_FLOAT32 : (ev_dtype)dtype;
    ev_tensor *out;
    int rc = (code ? ev_randn : ev_rand)(&ex, gen, d, nd, shape, &out);
    return evpy_finish(st, rc, out);
}

/* randint(low=0, high, size, *, generator=None, dtype=int64), as PyTorch:
 * randint(high, size) or randint(low, high, size). */
PyObject *evpy_randint_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    static const char *const names[] = {"low", "high", "size", "generator", "dtype", "device",
                                        NULL};
    PyObject *a[6];
    PyObject *const *pos = args;
    PyObject *shifted[EVPY_MAX_ARGS];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    int size_kw = 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        size_kw |= PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, k), "size") == 0;
    }
    if (nargs == 2 && !size_kw && nargs + nkw <= EVPY_MAX_ARGS - 1) {
        /* randint(high, size): low defaults to 0. */
        static PyObject *zero;
        if (!zero && !(zero = PyLong_FromLong(0))) {
            return NULL;
        }
        shifted[0] = zero;
        memcpy(shifted + 1, args, (size_t)(nargs + nkw) * sizeof *args);
        pos = shifted;
        nargs = 3;
    }
    long long lo = 0, hi;
    int nd, dtype;
    int64_t shape[EV_MAX_DIMS];
    ev_generator *gen;
    if (evpy_parse_args("randint", pos, nargs, kwnames, names, 3, 3, a) != 0) {
        return NULL;
    }
    if (PyBool_Check(a[0]) || PyBool_Check(a[1]) || !PyIndex_Check(a[0]) ||
        !PyIndex_Check(a[1])) {
        PyErr_SetString(PyExc_TypeError, "randint(): low and high must be integers");
        return NULL;
    }
    lo = PyLong_AsLongLong(a[0]);
    if (lo == -1 && PyErr_Occurred()) {
        return NULL;
    }
    hi = PyLong_AsLongLong(a[1]);
    if ((hi == -1 && PyErr_Occurred()) || evpy_parse_shape(&a[2], 1, &nd, shape) != 0 ||
        parse_generator(st, "randint", a[3], &gen) != 0 ||
        evpy_parse_dtype(st, a[4], &dtype) != 0) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_tensor *out;
    int rc = ev_randint(&ex, gen, lo, hi, dtype < 0 ? EV_INT64 : (ev_dtype)dtype, nd, shape,
                        &out);
    return evpy_finish(st, rc, out);
}

/* rand_like/randn_like(input, dtype=None, generator=None); code 0/1. */
PyObject *evpy_rand_like_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    static const char *const names[] = {"input", "dtype", "generator", NULL};
    const char *fn = code ? "randn_like" : "rand_like";
    PyObject *a[3];
    ev_tensor *x;
    int dtype;
    ev_generator *gen;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 1, 1, a) != 0 || !(x = evpy_need_tensor(fn, a[0])) ||
        evpy_parse_dtype(st, a[1], &dtype) != 0 || parse_generator(st, fn, a[2], &gen) != 0) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_tensor *out;
    ev_dtype d = dtype < 0 ? ev_tensor_dtype(x) : (ev_dtype)dtype;
    int rc = (code ? ev_randn : ev_rand)(&ex, gen, d, ev_tensor_ndim(x), ev_tensor_shape(x),
                                         &out);
    return evpy_finish(st, rc, out);
}

/* self.uniform_(from=0, to=1, *, generator=None) (code 0) and
 * self.normal_(mean=0, std=1, *, generator=None) (code 1). */
PyObject *evpy_fill_random_fn(evpy_state *st, int code, PyObject *const *args,
                                Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const un[] = {"input", "from", "to", "generator", NULL};
    static const char *const nn[] = {"input", "mean", "std", "generator", NULL};
    const char *fn = code ? "normal_" : "uniform_";
    PyObject *a[4];
    ev_tensor *x;
    double p0, p1;
    ev_generator *gen;
    if (evpy_parse_args(fn, args, nargs, kwnames, code ? nn : un, 3, 1, a) != 0 ||
        !(x = evpy_need_tensor(fn, a[0])) || mdouble(a[1], 0.0, &p0) != 0 ||
        mdouble(a[2], 1.0, &p1) != 0 || parse_generator(st, fn, a[3], &gen) != 0) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    int rc = ev_ag_random_(&ex, gen, x, p0, p1, code);
    if (rc) {
        return evpy_raise(rc);
    }
    return evpy_maybe_sync(x) ? NULL : Py_NewRef(a[0]);
}

static PyObject *py_manual_seed(PyObject *mod, PyObject *seed)
{
    evpy_state *st = PyModule_GetState(mod);
    if (PyBool_Check(seed) || !PyIndex_Check(seed)) {
        PyErr_Format(PyExc_TypeError, "manual_seed(): seed must be an integer, not %.100s",
                     Py_TYPE(seed)->tp_name);
        return NULL;
    }
    unsigned long long s = PyLong_AsUnsignedLongLongMask(seed);
    if (PyErr_Occurred()) {
        return NULL;
    }
    ev_generator_manual_seed(NULL, s);
    return Py_NewRef(st->default_generator);
}

/* randperm(n, *, generator=None, dtype=int64), as PyTorch. */
PyObject *evpy_randperm_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    static const char *const names[] = {"n", "generator", "dtype", NULL};
    (void)code;
    PyObject *a[3];
    ev_generator *gen;
    int dtype;
    if (evpy_parse_args("randperm", args, nargs, kwnames, names, 1, 1, a) != 0 ||
        parse_generator(st, "randperm", a[1], &gen) != 0 ||
        evpy_parse_dtype(st, a[2], &dtype) != 0) {
        return NULL;
    }
    if (PyBool_Check(a[0]) || !PyIndex_Check(a[0])) {
        PyErr_Format(PyExc_TypeError, "randperm(): n must be an integer, not %.100s",
                     Py_TYPE(a[0])->tp_name);
        return NULL;
    }
    long long n = PyLong_AsLongLong(a[0]);
    if (n == -1 && PyErr_Occurred()) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_tensor *out = NULL;
    int rc = ev_randperm(&ex, gen, (int64_t)n, dtype < 0 ? EV_INT64 : (ev_dtype)dtype, &out);
    return evpy_finish(st, rc, out);
}


static PyMethodDef random_methods[] = {
    {"manual_seed", py_manual_seed, METH_O,
     "manual_seed(seed)\n--\n\nSeeds the default generator; returns it."},
    {NULL},
};

int evpy_random_init(PyObject *module, evpy_state *st)
{
    st->generator_type =
        (PyTypeObject *)PyType_FromModuleAndSpec(module, &generator_spec, NULL);
    if (!st->generator_type ||
        PyModule_AddObjectRef(module, "Generator", (PyObject *)st->generator_type) < 0) {
        return -1;
    }
    evpy_generator *dflt = PyObject_New(evpy_generator, st->generator_type);
    if (!dflt) {
        return -1;
    }
    dflt->gen = ev_default_generator();
    st->default_generator = (PyObject *)dflt;
    if (PyModule_AddObjectRef(module, "default_generator", st->default_generator) < 0) {
        return -1;
    }
    return PyModule_AddFunctions(module, random_methods);
}
