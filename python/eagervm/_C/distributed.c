/* eagervm.distributed's C half: the process-wide process group and the
 * collectives with PyTorch's signatures (bound directly as the package's
 * functions, so the site each collective carries is the caller's line), and
 * the Work handle that async_op=True returns. */
#include <sched.h>
#include <time.h>

#include "evpy.h"
#include "eagervm/distributed.h"

/* ----------------------------------------------------------- the group
 *
 * One per process, like the runtime (module.c): MPI's world is a process
 * resource. A fork child cannot use its parent's group (MPI does not follow
 * a fork): the generation tells. Touched with the GIL held. */

static ev_pg *dist_pg;
static uint64_t dist_gen;

/* The group, or NULL with RuntimeError set naming fn. */
static ev_pg *need_pg(const char *fn)
{
    if (!dist_pg) {
        PyErr_Format(PyExc_RuntimeError, "%s(): the default process group is not initialised "
                     "(call eagervm.distributed.init_process_group() first)", fn);
        return NULL;
    }
    if (dist_gen != evpy_generation()) {
        PyErr_Format(PyExc_RuntimeError, "%s(): the process group belongs to the parent of "
                     "this forked process; MPI cannot be used in a fork child", fn);
        return NULL;
    }
    return dist_pg;
}

static int need_default_group(const char *fn, PyObject *group)
{
    if (group && group != Py_None) {
        PyErr_Format(PyExc_ValueError, "%s(): only the default group (group=None) is "
                     "supported", fn);
        return -1;
    }
    return 0;
}

static PyObject *py_available(PyObject *mod, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(ev_dist_available());
}

static PyObject *py_init(PyObject *mod, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"timeout", "debug", NULL};
    double timeout = 0;
    int debug = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|di:_dist_init", kwlist, &timeout,
                                     &debug)) {
        return NULL;
    }
    if (dist_pg && dist_gen == evpy_generation()) {
        PyErr_SetString(PyExc_RuntimeError, "init_process_group(): the default process group "
                        "is initialised already (call destroy_process_group() first)");
        return NULL;
    }
    ev_vm *vm = evpy_vm();
    if (!vm) {
        return NULL;
    }
    ev_pg_config cfg = {.timeout_s = timeout, .debug = debug};
    ev_pg *pg = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ev_pg_create(vm, &cfg, &pg);
    Py_END_ALLOW_THREADS
    if (rc) {
        /* Not initialised is a state problem, whatever the code says. */
        PyErr_Format(rc == EV_EINVAL ? PyExc_ValueError : PyExc_RuntimeError,
                     "init_process_group(): %s", ev_last_message());
        return NULL;
    }
    dist_pg = pg;
    dist_gen = evpy_generation();
    return Py_BuildValue("(ii)", ev_pg_rank(pg), ev_pg_size(pg));
}

static PyObject *py_destroy(PyObject *mod, PyObject *Py_UNUSED(ignored))
{
    if (!need_pg("destroy_process_group")) {
        return NULL;
    }
    ev_pg *pg = dist_pg;
    dist_pg = NULL;
    Py_BEGIN_ALLOW_THREADS
    ev_pg_destroy(pg);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_is_initialized(PyObject *mod, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(dist_pg != NULL && dist_gen == evpy_generation());
}

static PyObject *py_rank(PyObject *mod, PyObject *Py_UNUSED(ignored))
{
    ev_pg *pg = need_pg("get_rank");
    return pg ? PyLong_FromLong(ev_pg_rank(pg)) : NULL;
}

static PyObject *py_size(PyObject *mod, PyObject *Py_UNUSED(ignored))
{
    ev_pg *pg = need_pg("get_world_size");
    return pg ? PyLong_FromLong(ev_pg_size(pg)) : NULL;
}

/* ------------------------------------------------------------------- Work */

/* What async_op=True returns: the collective's completion, and the tensors
 * whose values it hands over (strong references owned by the object). */
typedef struct {
    PyObject_HEAD
    ev_dist_work *w;   /* one reference owned */
    PyObject *outputs; /* tuple of Tensors to wait for after the collective */
} evpy_work;

static void work_dealloc(PyObject *self)
{
    evpy_work *wk = (evpy_work *)self;
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    ev_dist_work_unref(wk->w);
    Py_CLEAR(wk->outputs);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static int work_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(((evpy_work *)self)->outputs);
    return 0;
}

static int work_clear(PyObject *self)
{
    Py_CLEAR(((evpy_work *)self)->outputs);
    return 0;
}

static PyObject *work_wait_impl(evpy_work *wk);

static PyObject *work_wait(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"timeout", NULL};
    PyObject *timeout = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:wait", kwlist, &timeout)) {
        return NULL;
    }
    return work_wait_impl((evpy_work *)self);
}

/* Waits for the outputs (sync points, which Ctrl-C interrupts; a barrier
 * has a token), then for the collective itself, whose failure it raises;
 * True, or NULL raised. The collective is done by then but for its last
 * step (its outputs become ready as it ends): the rest is polled, in
 * growing sleeps with the GIL released and signals checked between them,
 * as the engine's ticket wait has no time limit to slice it with. */
static PyObject *work_wait_impl(evpy_work *wk)
{
    for (Py_ssize_t i = 0; wk->outputs && i < PyTuple_GET_SIZE(wk->outputs); i++) {
        ev_tensor *t = evpy_tensor_get(PyTuple_GET_ITEM(wk->outputs, i));
        if (!t || evpy_wait_tensor(t) != 0) {
            return NULL;
        }
    }
    long sleep_us = 0;
    int64_t slept_us = 0;
    while (!ev_dist_work_is_completed(wk->w)) {
        Py_BEGIN_ALLOW_THREADS
        if (sleep_us == 0) {
            sched_yield();
        } else {
            struct timespec ts = {0, sleep_us * 1000};
            nanosleep(&ts, NULL);
        }
        Py_END_ALLOW_THREADS
        slept_us += sleep_us;
        sleep_us = sleep_us < 1000 ? sleep_us * 2 + 10 : 1000;
        if (slept_us >= 20000) {
            slept_us = 0;
            if (PyErr_CheckSignals() != 0) {
                return NULL;
            }
        }
    }
    ev_error *err = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ev_dist_work_wait(wk->w, &err);
    Py_END_ALLOW_THREADS
    if (err) {
        return evpy_raise_error(err);
    }
    if (rc) {
        return evpy_raise(rc);
    }
    Py_RETURN_TRUE;
}

static PyObject *work_is_completed(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(ev_dist_work_is_completed(((evpy_work *)self)->w));
}

static PyMethodDef work_methods[] = {
    {"wait", (PyCFunction)(void (*)(void))work_wait, METH_VARARGS | METH_KEYWORDS,
     "wait(timeout=None)\n--\n\nBlocks until the collective finished and its results are "
     "ready; raises its failure. Returns True. (The collective timeout, "
     "EAGERVM_COLLECTIVE_TIMEOUT, bounds the wait; timeout is accepted for PyTorch's "
     "signature.)"},
    {"is_completed", work_is_completed, METH_NOARGS,
     "is_completed()\n--\n\nTrue once the collective finished (or failed); never blocks."},
    {NULL},
};

static PyType_Slot work_slots[] = {
    {Py_tp_dealloc, work_dealloc},
    {Py_tp_traverse, work_traverse},
    {Py_tp_clear, work_clear},
    {Py_tp_methods, work_methods},
    {Py_tp_doc, "The handle of a collective issued with async_op=True."},
    {0, NULL},
};

static PyType_Spec work_spec = {
    .name = "eagervm.distributed.Work",
    .basicsize = sizeof(evpy_work),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION |
             Py_TPFLAGS_IMMUTABLETYPE,
    .slots = work_slots,
};

/* The result of a collective: a Work (async_op) or None, after an
 * EAGERVM_SYNC wait. Takes w; outputs is borrowed (NULL: none). */
static PyObject *finish(evpy_state *st, ev_dist_work *w, int async_op, PyObject *outputs)
{
    if (!async_op) {
        ev_dist_work_unref(w);
        for (Py_ssize_t i = 0; evpy_sync_mode && outputs && i < PyTuple_GET_SIZE(outputs); i++) {
            if (evpy_maybe_sync(evpy_tensor_get(PyTuple_GET_ITEM(outputs, i))) != 0) {
                return NULL;
            }
        }
        Py_RETURN_NONE;
    }
    evpy_work *wk = PyObject_GC_New(evpy_work, st->dist_work_type);
    if (!wk) {
        ev_dist_work_unref(w);
        return NULL;
    }
    wk->w = w;
    wk->outputs = outputs ? Py_NewRef(outputs) : PyTuple_New(0);
    PyObject_GC_Track(wk);
    return (PyObject *)wk;
}

/* finish() for a collective just issued on one output tensor object (rc:
 * the issue's result; w is taken either way). */
static PyObject *finish_one(PyObject *mod, int rc, ev_dist_work *w, int async_op,
                            PyObject *output)
{
    if (rc) {
        ev_dist_work_unref(w);
        return evpy_raise(rc);
    }
    PyObject *outs = PyTuple_Pack(1, output);
    PyObject *r = outs ? finish(PyModule_GetState(mod), w, async_op, outs)
                       : (ev_dist_work_unref(w), NULL);
    Py_XDECREF(outs);
    return r;
}

/* ------------------------------------------------------------ collectives */

static int parse_op(const char *fn, PyObject *obj, int *op)
{
    if (!obj) {
        *op = EV_DIST_SUM;
        return 0;
    }
    long v = -1;
    if (PyLong_Check(obj) && !PyBool_Check(obj)) {
        v = PyLong_AsLong(obj);
    }
    if (v < 0 || v >= EV_DIST_OP_COUNT) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s(): op must be an eagervm.distributed.ReduceOp "
                     "(SUM, AVG, PRODUCT, MIN, MAX), not %R", fn, obj);
        return -1;
    }
    *op = (int)v;
    return 0;
}

/* A contiguous tensor for an input the collective only reads: t itself, or a
 * copy issued on ex (a new reference in *out either way). */
static int read_input(const ev_exec *ex, ev_tensor *t, ev_tensor **out)
{
    int rc = ev_contiguous(ex, t, out);
    return rc ? evpy_raise_int(rc) : 0;
}

static PyObject *py_all_reduce(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    static const char fn[] = "all_reduce";
    static const char *const names[] = {"tensor", "op", "group", "async_op", NULL};
    PyObject *a[4];
    ev_tensor *t;
    int op, async_op;
    ev_pg *pg;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 4, 1, a) != 0 ||
        !(t = evpy_need_tensor(fn, a[0])) || parse_op(fn, a[1], &op) != 0 ||
        need_default_group(fn, a[2]) != 0 || (async_op = evpy_parse_bool(a[3], 0)) < 0 ||
        !(pg = need_pg(fn))) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_dist_work *w = NULL;
    int rc = ev_all_reduce_(&ex, pg, t, op, &w);
    return finish_one(mod, rc, w, async_op, a[0]);
}

static PyObject *py_broadcast(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    static const char fn[] = "broadcast";
    static const char *const names[] = {"tensor", "src", "group", "async_op", NULL};
    PyObject *a[4];
    ev_tensor *t;
    long src;
    int async_op;
    ev_pg *pg;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 4, 2, a) != 0 ||
        !(t = evpy_need_tensor(fn, a[0])) || evpy_parse_int(fn, "src", a[1], &src) != 0 ||
        need_default_group(fn, a[2]) != 0 || (async_op = evpy_parse_bool(a[3], 0)) < 0 ||
        !(pg = need_pg(fn))) {
        return NULL;
    }
    if (src < INT32_MIN || src > INT32_MAX) {
        src = -1; /* out of range either way: the library says so */
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_dist_work *w = NULL;
    int rc = ev_broadcast_(&ex, pg, t, (int)src, &w);
    return finish_one(mod, rc, w, async_op, a[0]);
}

/* all_gather_into_tensor and reduce_scatter_tensor: (output, input[, op]). */
static PyObject *gather_scatter(PyObject *mod, int scatter, PyObject *const *args,
                                Py_ssize_t nargs, PyObject *kwnames)
{
    const char *fn = scatter ? "reduce_scatter_tensor" : "all_gather_into_tensor";
    static const char *const gnames[] = {"output_tensor", "input_tensor", "group", "async_op",
                                         NULL};
    static const char *const snames[] = {"output", "input", "op", "group", "async_op", NULL};
    PyObject *a[5] = {NULL};
    ev_tensor *out, *in;
    int op = EV_DIST_SUM, async_op;
    ev_pg *pg;
    int k = scatter; /* index shift past op */
    if (evpy_parse_args(fn, args, nargs, kwnames, scatter ? snames : gnames, 4 + k, 2, a) != 0 ||
        !(out = evpy_need_tensor(fn, a[0])) || !(in = evpy_need_tensor(fn, a[1])) ||
        (scatter && parse_op(fn, a[2], &op) != 0) || need_default_group(fn, a[2 + k]) != 0 ||
        (async_op = evpy_parse_bool(a[3 + k], 0)) < 0 || !(pg = need_pg(fn))) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_tensor *src;
    if (read_input(&ex, in, &src) != 0) {
        return NULL;
    }
    ev_dist_work *w = NULL;
    int rc = scatter ? ev_reduce_scatter_into(&ex, pg, out, src, op, &w)
                     : ev_all_gather_into(&ex, pg, out, src, &w);
    ev_tensor_unref(src);
    return finish_one(mod, rc, w, async_op, a[0]);
}

static PyObject *py_all_gather_into_tensor(PyObject *mod, PyObject *const *args,
                                           Py_ssize_t nargs, PyObject *kwnames)
{
    return gather_scatter(mod, 0, args, nargs, kwnames);
}

static PyObject *py_reduce_scatter_tensor(PyObject *mod, PyObject *const *args,
                                          Py_ssize_t nargs, PyObject *kwnames)
{
    return gather_scatter(mod, 1, args, nargs, kwnames);
}

/* all_gather(tensor_list, tensor): one gather into a temporary, then a copy
 * of each rank's block into its list entry (issued on the caller's stream,
 * after the gather by dependency). */
static PyObject *py_all_gather(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    static const char fn[] = "all_gather";
    static const char *const names[] = {"tensor_list", "tensor", "group", "async_op", NULL};
    PyObject *a[4];
    ev_tensor *in;
    int async_op;
    ev_pg *pg;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 4, 2, a) != 0 ||
        !(in = evpy_need_tensor(fn, a[1])) || need_default_group(fn, a[2]) != 0 ||
        (async_op = evpy_parse_bool(a[3], 0)) < 0 || !(pg = need_pg(fn))) {
        return NULL;
    }
    int world = ev_pg_size(pg);
    if (!PyList_Check(a[0]) || PyList_GET_SIZE(a[0]) != world) {
        PyErr_Format(PyExc_ValueError, "all_gather(): tensor_list must be a list of world "
                     "size (%d) Tensors, got %.100s of length %zd", world,
                     Py_TYPE(a[0])->tp_name, PyList_Check(a[0]) ? PyList_GET_SIZE(a[0]) : -1);
        return NULL;
    }
    PyObject *outs = PySequence_Tuple(a[0]);
    if (!outs) {
        return NULL;
    }
    PyObject *result = NULL;
    ev_tensor *src = NULL, *tmp = NULL;
    ev_dist_work *w = NULL;
    for (int i = 0; i < world; i++) {
        ev_tensor *o = evpy_need_tensor(fn, PyTuple_GET_ITEM(outs, i));
        if (!o) {
            goto done;
        }
        const int64_t *s1 = ev_tensor_shape(o), *s2 = ev_tensor_shape(in);
        int same = ev_tensor_ndim(o) == ev_tensor_ndim(in);
        for (int d = 0; same && d < ev_tensor_ndim(o); d++) {
            same = s1[d] == s2[d];
        }
        if (ev_tensor_dtype(o) != ev_tensor_dtype(in)) {
            PyErr_Format(PyExc_TypeError, "all_gather(): tensor_list[%d] is %s but tensor is "
                         "%s (they must match)", i, ev_dtype_name(ev_tensor_dtype(o)),
                         ev_dtype_name(ev_tensor_dtype(in)));
            goto done;
        }
        if (!same) {
            PyErr_Format(PyExc_ValueError, "all_gather(): tensor_list[%d] has another shape "
                         "than tensor (they must match)", i);
            goto done;
        }
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0 || read_input(&ex, in, &src) != 0) {
        goto done;
    }
    int64_t n = ev_tensor_numel(in), total = n * world;
    int rc = ev_empty(&ex, ev_tensor_dtype(in), 1, &total, &tmp);
    if (rc || (rc = ev_all_gather_into(&ex, pg, tmp, src, &w))) {
        evpy_raise(rc);
        goto done;
    }
    for (int i = 0; i < world; i++) {
        ev_tensor *o = evpy_tensor_get(PyTuple_GET_ITEM(outs, i));
        ev_tensor *block = NULL, *shaped = NULL;
        rc = ev_slice(tmp, 0, i * n, (i + 1) * n, 1, &block);
        if (!rc) {
            rc = ev_view(block, ev_tensor_ndim(o), ev_tensor_shape(o), &shaped);
        }
        if (!rc) {
            rc = ev_copy_(&ex, o, shaped);
        }
        ev_tensor_unref(shaped);
        ev_tensor_unref(block);
        if (rc) {
            evpy_raise(rc);
            goto done;
        }
    }
    result = finish(PyModule_GetState(mod), w, async_op, outs);
    w = NULL;
done:
    ev_dist_work_unref(w);
    ev_tensor_unref(tmp);
    ev_tensor_unref(src);
    Py_DECREF(outs);
    return result;
}

static PyObject *py_barrier(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    static const char fn[] = "barrier";
    static const char *const names[] = {"group", "async_op", "device_ids", NULL};
    PyObject *a[3];
    int async_op;
    ev_pg *pg;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 3, 0, a) != 0 ||
        need_default_group(fn, a[0]) != 0 || (async_op = evpy_parse_bool(a[1], 0)) < 0 ||
        !(pg = need_pg(fn))) {
        return NULL;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    /* A token the barrier writes, so waits on it are the runtime's own
     * (spin, then park; woken when it ends; Ctrl-C between slices). */
    evpy_state *st = PyModule_GetState(mod);
    ev_tensor *token = NULL;
    int rc = ev_empty(&ex, EV_UINT8, 0, NULL, &token);
    if (rc) {
        return evpy_raise(rc);
    }
    ev_dist_work *w = NULL;
    rc = ev_barrier(&ex, pg, token, &w);
    if (rc) {
        ev_tensor_unref(token);
        return evpy_raise(rc);
    }
    PyObject *tok = evpy_tensor_wrap(st, token);
    PyObject *outs = tok ? PyTuple_Pack(1, tok) : NULL;
    Py_XDECREF(tok);
    if (!outs) {
        ev_dist_work_unref(w);
        return NULL;
    }
    PyObject *work = finish(st, w, 1, outs);
    Py_DECREF(outs);
    if (!work || async_op) {
        return work;
    }
    /* As PyTorch's: without async_op the host waits for every rank. */
    PyObject *r = work_wait_impl((evpy_work *)work);
    Py_DECREF(work);
    if (!r) {
        return NULL;
    }
    Py_DECREF(r);
    Py_RETURN_NONE;
}

/* ----------------------------------------------------------- registration */

/* Their docs open with the public name's signature (not a text signature:
 * the C names differ, so inspect would reject it). */
#define DIST_FN(name, impl, doc) \
    {name, (PyCFunction)(void (*)(void))impl, METH_FASTCALL | METH_KEYWORDS, doc},

PyMethodDef evpy_distributed_methods[] = {
    {"_dist_available", py_available, METH_NOARGS, "True if this build has MPI."},
    {"_dist_init", (PyCFunction)(void (*)(void))py_init, METH_VARARGS | METH_KEYWORDS,
     "_dist_init(timeout=0, debug=0) -> (rank, world_size): initialises MPI and the default "
     "group (0 takes the environment's value)."},
    {"_dist_destroy", py_destroy, METH_NOARGS, "Destroys the default group, finalising MPI."},
    {"_dist_is_initialized", py_is_initialized, METH_NOARGS, "True while a group exists."},
    {"_dist_rank", py_rank, METH_NOARGS, "This process's rank."},
    {"_dist_world_size", py_size, METH_NOARGS, "The number of ranks."},
    DIST_FN("_dist_all_reduce", py_all_reduce,
            "all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False)\n\n"
            "Reduces tensor across every rank, in place. Returns None, or a Work with "
            "async_op=True.")
    DIST_FN("_dist_broadcast", py_broadcast,
            "broadcast(tensor, src, group=None, async_op=False)\n\n"
            "Copies rank src's tensor into every rank's tensor, in place.")
    DIST_FN("_dist_all_gather", py_all_gather,
            "all_gather(tensor_list, tensor, group=None, async_op=False)\n\n"
            "Fills tensor_list[r] with rank r's tensor, on every rank.")
    DIST_FN("_dist_all_gather_into_tensor", py_all_gather_into_tensor,
            "all_gather_into_tensor(output_tensor, input_tensor, group=None, "
            "async_op=False)\n\nWrites every rank's input_tensor, in rank order, into "
            "output_tensor (world size times its elements).")
    DIST_FN("_dist_reduce_scatter_tensor", py_reduce_scatter_tensor,
            "reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, "
            "async_op=False)\n\nReduces input across ranks and writes block `rank` of the "
            "result (output's element count) into output.")
    DIST_FN("_dist_barrier", py_barrier,
            "barrier(group=None, async_op=False, device_ids=None)\n\n"
            "Waits until every rank reached it (with async_op=True, returns a Work).")
    {NULL},
};

int evpy_distributed_init(PyObject *module, evpy_state *st)
{
    st->dist_work_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &work_spec, NULL);
    if (!st->dist_work_type) {
        return -1;
    }
    return PyModule_AddObjectRef(module, "_DistWork", (PyObject *)st->dist_work_type);
}
