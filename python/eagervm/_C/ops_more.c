/* More ops for Python, bound from ops.h functions that ops.c does not bind:
 * where, cat, stack, index_select, gather, take, scatter_add; one_hot and
 * cross_entropy; random numbers (randperm included) with eagervm.manual_seed
 * and eagervm.Generator; indexing with index tensors and boolean masks; and
 * the export protocols (the buffer protocol, __dlpack__, from_dlpack).
 *
 * Tensor methods and slots defined here are merged into the Tensor type by
 * evpy_tensor_init_type. */
#include <stdlib.h>
#include <string.h>

#include "dlpack.h"
#include "evpy.h"

/* --------------------------------------------------------------- arguments */

static int mdouble(PyObject *obj, double dflt, double *out)
{
    if (!obj) {
        *out = dflt;
        return 0;
    }
    *out = PyFloat_AsDouble(obj);
    return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
}

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
static PyObject *where_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
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
            int rc = ev_where(&ex, oc.t, ox.t, oy.t, &out);
            res = evpy_finish(st, rc, out);
        }
        op_release(&ox);
        op_release(&oy);
    }
    op_release(&oc);
    return res;
}

/* cat(tensors, dim=0) (code 0) and stack(tensors, dim=0) (code 1). */
static PyObject *join_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
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
        int rc = (code ? ev_stack : ev_cat)(&ex, ts, (int)n, (int)dim, &out);
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

enum { SEL_INDEX_SELECT, SEL_GATHER, SEL_TAKE, SEL_SCATTER_ADD, SEL_SCATTER_ADD_ };

/* index_select(input, dim, index), gather(input, dim, index), take(input,
 * index), scatter_add(input, dim, index, src) and scatter_add_. */
static PyObject *select_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    static const char *const fns[] = {"index_select", "gather", "take", "scatter_add",
                                      "scatter_add_"};
    static const char *const n3[] = {"input", "dim", "index", NULL};
    static const char *const n2[] = {"input", "index", NULL};
    static const char *const n4[] = {"input", "dim", "index", "src", NULL};
    const char *fn = fns[code];
    const char *const *names = code == SEL_TAKE ? n2 : code >= SEL_SCATTER_ADD ? n4 : n3;
    int na = code == SEL_TAKE ? 2 : code >= SEL_SCATTER_ADD ? 4 : 3;
    PyObject *a[4];
    ev_tensor *x;
    long dim = 0;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, na, na, a) != 0 || !(x = evpy_need_tensor(fn, a[0])) ||
        (code != SEL_TAKE && evpy_parse_int(fn, "dim", a[1], &dim) != 0)) {
        return NULL;
    }
    operand oi = {NULL, 0}, os = {NULL, 0};
    PyObject *idx_obj = code == SEL_TAKE ? a[1] : a[2];
    if (evpy_operand(st, idx_obj, NULL, &oi.t, &oi.own) != 0) {
        return NULL;
    }
    PyObject *res = NULL;
    if (code >= SEL_SCATTER_ADD && evpy_operand(st, a[3], x, &os.t, &os.own) != 0) {
        goto done;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        goto done;
    }
    ev_tensor *out = NULL;
    int rc;
    switch (code) {
    case SEL_INDEX_SELECT:
        rc = ev_index_select(&ex, x, (int)dim, oi.t, &out);
        break;
    case SEL_GATHER:
        rc = ev_gather(&ex, x, (int)dim, oi.t, &out);
        break;
    case SEL_TAKE:
        rc = ev_take(&ex, x, oi.t, &out);
        break;
    case SEL_SCATTER_ADD:
        rc = ev_scatter_add(&ex, x, (int)dim, oi.t, os.t, &out);
        break;
    default:
        rc = ev_scatter_add_(&ex, x, (int)dim, oi.t, os.t);
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
     "manual_seed(seed)\n--\n\nSets the seed (and resets the offset); returns self."},
    {"initial_seed", generator_initial_seed, METH_NOARGS, "The seed last set."},
    {"get_state", generator_get_state, METH_NOARGS,
     "get_state()\n--\n\nThe state as a (seed, offset) tuple."},
    {"set_state", generator_set_state, METH_O,
     "set_state(state)\n--\n\nRestores a state from get_state(): the calls that follow "
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
static PyObject *rand_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
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
static PyObject *randint_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
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
static PyObject *rand_like_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
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
static PyObject *fill_random_fn(evpy_state *st, int code, PyObject *const *args,
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
    int rc = code ? ev_normal_(&ex, gen, x, p0, p1) : ev_uniform_(&ex, gen, x, p0, p1);
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
static int64_t *host_int64(ev_tensor *t, int64_t *n)
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
    int64_t *m = host_int64(mask, &n);
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
    rc = must_view ? ev_view(base, od, shape, merged) : ev_reshape(&ex, base, od, shape, merged);
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
        rc = ev_index_select(&ex, merged, k.dim, index, &out);
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
        rc = rc ? rc : ev_index_select(&ex, base, k.dim, wrapped, &sel);
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
        rc = rc ? rc : ev_reshape(&ex, sel, od, shape, &out);
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
    int64_t *iv = host_int64(idx, &m);
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
static PyObject *from_dlpack_fn(evpy_state *st, int code, PyObject *const *args,
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
    char *buf = PyMem_Malloc(n ? (size_t)n * es : 1);
    if (!buf) {
        PyErr_NoMemory();
        goto out;
    }
    const char *base = (const char *)dl->data + dl->byte_offset;
    if (!dl->strides) {
        memcpy(buf, base, (size_t)n * es);
    } else {
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
        int rc = ev_from_host(&ex, (ev_dtype)dtype, dl->ndim, dl->shape, buf, &out);
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

/* ------------------------------------------------- encodings and losses */

/* one_hot(index, num_classes=-1), as PyTorch. num_classes=-1 means
 * max(index) + 1, which needs the values: that case is a sync point (it
 * waits for index and reads its maximum); a given num_classes is not. */
static PyObject *one_hot_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
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
        int64_t *v = host_int64(m, &n);
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
static PyObject *cross_entropy_fn(evpy_state *st, int code, PyObject *const *args,
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
        int rc = ev_cross_entropy(&ex, x, ot.t, red, &out);
        res = evpy_finish(st, rc, out);
    }
    op_release(&ot);
    return res;
}

/* randperm(n, *, generator=None, dtype=int64), as PyTorch. */
static PyObject *randperm_fn(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs,
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

/* ------------------------------------------------------------------ tables */


EVPY_FN(where, where_fn, 0)
EVPY_METH(where, where_fn, 1)
EVPY_FN(cat, join_fn, 0)
EVPY_FN(concat, join_fn, 0)
EVPY_FN(concatenate, join_fn, 0)
EVPY_FN(stack, join_fn, 1)
EVPY_BOTH(index_select, select_fn, SEL_INDEX_SELECT)
EVPY_BOTH(gather, select_fn, SEL_GATHER)
EVPY_BOTH(take, select_fn, SEL_TAKE)
EVPY_BOTH(scatter_add, select_fn, SEL_SCATTER_ADD)
EVPY_METH(scatter_add_, select_fn, SEL_SCATTER_ADD_)
EVPY_FN(rand, rand_fn, 0)
EVPY_FN(randn, rand_fn, 1)
EVPY_FN(randint, randint_fn, 0)
EVPY_FN(rand_like, rand_like_fn, 0)
EVPY_FN(randn_like, rand_like_fn, 1)
EVPY_METH(uniform_, fill_random_fn, 0)
EVPY_METH(normal_, fill_random_fn, 1)
EVPY_FN(from_dlpack, from_dlpack_fn, 0)
EVPY_FN(one_hot, one_hot_fn, 0)
EVPY_FN(cross_entropy, cross_entropy_fn, 0)
EVPY_FN(randperm, randperm_fn, 0)

PyMethodDef evpy_more_methods[] = {
    EVPY_FN_ENTRY(where, "where(condition, input, other): input where condition else other "
                    "(broadcast; scalars allowed)")
    EVPY_FN_ENTRY(cat, "cat(tensors, dim=0): joins tensors along an existing dimension")
    EVPY_FN_ENTRY(concat, "alias of cat")
    EVPY_FN_ENTRY(concatenate, "alias of cat")
    EVPY_FN_ENTRY(stack, "stack(tensors, dim=0): joins tensors along a new dimension")
    EVPY_FN_ENTRY(index_select, "index_select(input, dim, index)")
    EVPY_FN_ENTRY(gather, "gather(input, dim, index)")
    EVPY_FN_ENTRY(take, "take(input, index): input as 1-d, indexed (negative indices count from "
                   "the end)")
    EVPY_FN_ENTRY(scatter_add, "scatter_add(input, dim, index, src): a copy of input with src "
                          "added at index along dim")
    EVPY_FN_ENTRY(rand, "rand(*size, generator=None, dtype=float32): uniform in [0, 1)")
    EVPY_FN_ENTRY(randn, "randn(*size, generator=None, dtype=float32): standard normal")
    EVPY_FN_ENTRY(randint, "randint(low=0, high, size, *, generator=None, dtype=int64)")
    EVPY_FN_ENTRY(rand_like, "rand_like(input, dtype=None, generator=None)")
    EVPY_FN_ENTRY(randn_like, "randn_like(input, dtype=None, generator=None)")
    EVPY_FN_ENTRY(from_dlpack, "from_dlpack(x): a new tensor holding a copy of the data of a "
                          "DLPack producer (an object with __dlpack__, or a capsule)")
    EVPY_FN_ENTRY(one_hot, "one_hot(index, num_classes=-1): int64 one-hot encoding of shape "
                      "index.shape + (num_classes,); num_classes=-1 means max(index) + 1 and "
                      "is a sync point (it reads index)")
    EVPY_FN_ENTRY(cross_entropy, "cross_entropy(input, target, reduction='mean'): stable "
                            "cross-entropy of (N, C) logits against (N,) class indices; "
                            "reduction 'none', 'mean' or 'sum'")
    EVPY_FN_ENTRY(randperm, "randperm(n, *, generator=None, dtype=int64): a random permutation "
                       "of 0 .. n-1 from the counter-based generator")
    {"manual_seed", py_manual_seed, METH_O,
     "manual_seed(seed)\n--\n\nSeeds the default generator; returns it."},
    {NULL},
};

PyMethodDef evpy_tensor_more_methods[] = {
    EVPY_METH_ENTRY(where, "where(condition, other): self where condition else other")
    EVPY_METH_ENTRY(index_select, NULL)
    EVPY_METH_ENTRY(gather, NULL)
    EVPY_METH_ENTRY(take, NULL)
    EVPY_METH_ENTRY(scatter_add, NULL)
    EVPY_METH_ENTRY(scatter_add_, "scatter_add_(dim, index, src): adds src at index, in place")
    EVPY_METH_ENTRY(uniform_, "uniform_(from=0, to=1, *, generator=None): fills in place")
    EVPY_METH_ENTRY(normal_, "normal_(mean=0, std=1, *, generator=None): fills in place")
    {"__dlpack__", (PyCFunction)(void (*)(void))tensor_dlpack, EVPY_FASTKW,
     "__dlpack__(stream=None)\n--\n\nA sync point: waits for the tensor and returns a DLPack "
     "capsule sharing its memory (cpu)."},
    {"__dlpack_device__", tensor_dlpack_device, METH_NOARGS,
     "__dlpack_device__()\n--\n\n(1, 0): cpu."},
    {NULL},
};

PyType_Slot evpy_tensor_more_slots[] = {
    {Py_bf_getbuffer, tensor_getbuffer},
    {Py_bf_releasebuffer, tensor_releasebuffer},
    {0, NULL},
};

int evpy_more_init(PyObject *module, evpy_state *st)
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
    return PyModule_AddFunctions(module, evpy_more_methods);
}
