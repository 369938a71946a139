/* The eagervm._C module: multi-phase init, the module state, the dtype
 * objects, the process-wide runtime with its fork and exit handling, and the
 * private helpers the tests use to observe the runtime. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "evpy.h"
#include "eagervm/config.h"

/* ---------------------------------------------------------------- runtime
 *
 * One runtime per process, shared by every module instance: the runtime is a
 * process resource like the allocator under it, not a Python object. It is
 * created at the first import. A fork child cannot use it (the parent's
 * worker threads do not exist there), so the child handler forgets it and
 * the next op creates a fresh one; the parent's runtime is leaked in the
 * child, never touched. Everything here runs with the GIL held, except the
 * fork handlers, which run in the forking thread. */

static ev_vm *rt_vm;
static uint64_t rt_gen = 1;
int evpy_sync_mode;
_Thread_local uint32_t evpy_current_uid;

uint64_t evpy_generation(void)
{
    return rt_gen;
}

ev_vm *evpy_vm(void)
{
    if (rt_vm) {
        return rt_vm;
    }
    int rc = ev_vm_create(NULL, &rt_vm);
    if (rc) {
        rt_vm = NULL;
        evpy_raise(rc);
        return NULL;
    }
    return rt_vm;
}

int evpy_exec(ev_exec *ex)
{
    ex->vm = rt_vm ? rt_vm : evpy_vm();
    if (!ex->vm) {
        return -1;
    }
    ex->thread_uid = evpy_current_uid;
    ex->site = evpy_capture_site();
    return 0;
}

/* Before fork: drain the runtime if it has work in flight, so the child's
 * copy of every tensor holds its final bytes and no worker holds a lock of
 * the allocator at the moment of the fork. ev_wait_all takes no failure: one
 * that happened stays with the runtime for the parent's next sync point. */
/* The engine's (src/core/services.h; the module does not include it). */
bool ev__on_worker_thread(void);

static void atfork_prepare(void)
{
    /* A kernel that forks (MPI's singleton init starts its daemon so) would
     * wait for itself: the child it makes execs at once and needs nothing. */
    if (rt_vm && !ev__on_worker_thread()) {
        ev_wait_all(rt_vm, UINT32_MAX);
    }
    evpy_wait_atfork_prepare();
}

static void atfork_parent(void)
{
    evpy_wait_atfork_parent();
}

static void atfork_child(void)
{
    /* The parent's runtime, its errors and its uids stay behind, untouched. */
    rt_vm = NULL;
    rt_gen++;
    evpy_wait_atfork_child();
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_register(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* Registered with atexit: finish queued work before the interpreter (and
 * libraries such as OpenBLAS, whose destructors run at exit) goes away, so
 * exit never tears down memory a kernel still uses. Failures nobody asked
 * about are dropped quietly. */
static PyObject *py_atexit(PyObject *mod, PyObject *Py_UNUSED(ignored))
{
    if (rt_vm) {
        Py_BEGIN_ALLOW_THREADS
        ev_wait_all(rt_vm, UINT32_MAX);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ dtypes */

typedef struct {
    PyObject_HEAD
    int dtype;
} evpy_dtype;

static PyObject *dtype_repr(PyObject *self)
{
    return PyUnicode_FromFormat("eagervm.%s", ev_dtype_name(((evpy_dtype *)self)->dtype));
}

static PyObject *dtype_get_name(PyObject *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(ev_dtype_name(((evpy_dtype *)self)->dtype));
}

static PyObject *dtype_get_itemsize(PyObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(ev_dtype_size(((evpy_dtype *)self)->dtype));
}

static PyObject *dtype_get_is_float(PyObject *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(ev_dtype_is_float(((evpy_dtype *)self)->dtype));
}

static void dtype_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static int dtype_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    return 0;
}

static PyObject *dtype_reduce(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    /* Pickles as the module attribute, so identity survives a round trip. */
    return PyUnicode_FromString(ev_dtype_name(((evpy_dtype *)self)->dtype));
}

static PyGetSetDef dtype_getset[] = {
    {"name", dtype_get_name, NULL, "the dtype's name, e.g. 'float32'", NULL},
    {"itemsize", dtype_get_itemsize, NULL, "bytes per element", NULL},
    {"is_floating_point", dtype_get_is_float, NULL, "True for float dtypes", NULL},
    {NULL},
};

static PyMethodDef dtype_methods[] = {
    {"__reduce__", dtype_reduce, METH_NOARGS, NULL},
    {NULL},
};

static PyType_Slot dtype_slots[] = {
    {Py_tp_repr, dtype_repr},
    {Py_tp_str, dtype_get_name},
    {Py_tp_dealloc, dtype_dealloc},
    {Py_tp_traverse, dtype_traverse},
    {Py_tp_getset, dtype_getset},
    {Py_tp_methods, dtype_methods},
    {Py_tp_doc, "An element type of eagervm tensors (eagervm.float32, ...)."},
    {0, NULL},
};

static PyType_Spec dtype_spec = {
    .name = "eagervm.dtype",
    .basicsize = sizeof(evpy_dtype),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION |
             Py_TPFLAGS_IMMUTABLETYPE,
    .slots = dtype_slots,
};

int evpy_parse_dtype(evpy_state *st, PyObject *obj, int *out)
{
    if (obj == NULL || obj == Py_None) {
        *out = -1;
        return 0;
    }
    if (Py_IS_TYPE(obj, st->dtype_type)) {
        *out = ((evpy_dtype *)obj)->dtype;
        return 0;
    }
    if (obj == (PyObject *)&PyBool_Type) {
        *out = EV_BOOL;
        return 0;
    }
    if (obj == (PyObject *)&PyLong_Type) {
        *out = EV_INT64;
        return 0;
    }
    if (obj == (PyObject *)&PyFloat_Type) {
        *out = EV_FLOAT64;
        return 0;
    }
    /* A name, a NumPy dtype (its .name) or a NumPy scalar type (its __name__). */
    PyObject *name = NULL;
    if (PyUnicode_Check(obj)) {
        name = Py_NewRef(obj);
    } else if (PyType_Check(obj)) {
        name = PyObject_GetAttrString(obj, "__name__");
    } else {
        name = PyObject_GetAttrString(obj, "name");
    }
    if (name && PyUnicode_Check(name)) {
        const char *s = PyUnicode_AsUTF8(name);
        ev_dtype d;
        if (s && strcmp(s, "bool_") == 0) {
            s = "bool";
        }
        if (s && ev_dtype_from_name(s, &d) == 0) {
            Py_DECREF(name);
            *out = (int)d;
            return 0;
        }
    }
    Py_XDECREF(name);
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError,
                 "dtype must be an eagervm dtype (eagervm.float32, ...) or its name, not %R",
                 obj);
    return -1;
}

/* ------------------------------------------------------------- functions */

static PyObject *py_synchronize(PyObject *mod, PyObject *Py_UNUSED(ignored))
{
    if (evpy_synchronize() != 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* A probe kernel writes the uid of the worker that runs it: the tests use it
 * to observe where ops issued in the current context run. */
static int probe_kernel(void *arg, ev_kctx *kc)
{
    int64_t *dst = *(int64_t **)arg;
    *dst = (int64_t)ev_kctx_thread_uid(kc);
    return 0;
}

static PyObject *py_probe_uid(PyObject *mod, PyObject *Py_UNUSED(ignored))
{
    evpy_state *st = PyModule_GetState(mod);
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        return NULL;
    }
    ev_tensor *t;
    int rc = ev_empty(&ex, EV_INT64, 0, NULL, &t);
    if (rc) {
        return evpy_raise(rc);
    }
    int64_t *data = ev_tensor_data(t);
    ev_operand op = {ev_tensor_obj(t), EV_WRITE};
    ev_instr_desc d = {
        .kernel = probe_kernel,
        .arg = &data,
        .arg_size = sizeof data,
        .stream = ev_cpu_stream(ex.thread_uid),
        .operands = &op,
        .n_operands = 1,
        .name = "probe_uid",
        .site = ex.site,
    };
    rc = ev_submit(ex.vm, &d, NULL);
    if (rc) {
        ev_tensor_unref(t);
        return evpy_raise(rc);
    }
    return evpy_tensor_wrap(st, t);
}

static PyObject *py_current_uid(PyObject *mod, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromUnsignedLong(evpy_current_uid);
}

static PyObject *py_profile_enable(PyObject *mod, PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0) {
        return NULL;
    }
    ev_vm *vm = evpy_vm();
    if (!vm) {
        return NULL;
    }
    ev_vm_profile_enable(vm, on);
    Py_RETURN_NONE;
}

static PyObject *py_stats(PyObject *mod, PyObject *Py_UNUSED(ignored))
{
    ev_vm *vm = evpy_vm();
    if (!vm) {
        return NULL;
    }
    ev_vm_stats s;
    ev_vm_get_stats(vm, &s);
    ev_allocator_stats a;
    ev_allocator_get_stats(EV_DEVICE_CPU, 0, &a);
    return Py_BuildValue(
        "{sKsKsKsKsKsKsKsIsIsKsKsKsKsKsKsKsK}", "submitted", (unsigned long long)s.submitted,
        "completed", (unsigned long long)s.completed, "failed", (unsigned long long)s.failed,
        "skipped", (unsigned long long)s.skipped, "cross_edges",
        (unsigned long long)s.cross_edges, "stream_edges", (unsigned long long)s.stream_edges,
        "pending", (unsigned long long)s.pending, "workers_started", s.workers_started,
        "thread_limit", ev_vm_thread_limit(vm), "alloc_in_use", (unsigned long long)a.in_use,
        "alloc_reserved", (unsigned long long)a.reserved, "generation",
        (unsigned long long)rt_gen, "worker_wakes", (unsigned long long)s.worker_wakes,
        "alloc_peak", (unsigned long long)a.peak_in_use, "alloc_stream_reuses",
        (unsigned long long)a.n_stream_reuses, "cpu_moves", (unsigned long long)s.cpu_moves,
        "ran_here", (unsigned long long)s.ran_here);
}

/* Sets whether the calling thread may run cheap ops itself while their
 * worker is parked (ev_vm_set_run_here); returns the previous setting. */
static PyObject *py_set_run_here(PyObject *mod, PyObject *arg)
{
    ev_vm *vm = evpy_vm();
    if (!vm) {
        return NULL;
    }
    int on = PyObject_IsTrue(arg);
    if (on < 0) {
        return NULL;
    }
    int was = ev_vm_set_run_here(vm, on);
    if (was < 0) {
        return evpy_raise(was);
    }
    return PyBool_FromLong(was);
}

/* How large ops shared the cores (ev_intraop_get_stats); with reset=True
 * the "since reset" maxima start again first. */
static PyObject *py_intraop_stats(PyObject *mod, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"reset", NULL};
    int reset = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p:_intraop_stats", kwlist, &reset)) {
        return NULL;
    }
    if (reset) {
        ev_intraop_reset_peak();
    }
    ev_intraop_stats s;
    ev_intraop_get_stats(&s);
    return Py_BuildValue("{sisisisisisisisisKsK}", "threads", s.threads, "helpers", s.helpers,
                         "running", s.running, "granted", s.granted, "peak_granted",
                         s.peak_granted, "last_grant", s.last_grant, "max_grant", s.max_grant,
                         "max_shared_grant", s.max_shared_grant, "large_ops",
                         (unsigned long long)s.large_ops, "shared_ops",
                         (unsigned long long)s.shared_ops);
}

/* The engine's fault-injection hook, exported for tests (src/core/internal.h
 * documents it; the module does not include the engine's internals). */
void ev__fail_alloc_after(long n);

static PyObject *py_fail_alloc_after(PyObject *mod, PyObject *arg)
{
    (void)mod;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) {
        return NULL;
    }
    ev__fail_alloc_after(n);
    Py_RETURN_NONE;
}

static PyObject *py_config(PyObject *mod, PyObject *Py_UNUSED(ignored))
{
    ev_vm *vm = evpy_vm();
    if (!vm) {
        return NULL;
    }
    ev_config c;
    ev_config_get(&c);
    return Py_BuildValue("{sssssssssssOsOsssssisssisI}", "version", c.version, "build_type",
                         c.build_type, "compiler", c.compiler, "c_flags", c.c_flags,
                         "sanitizers", c.sanitizers, "blas", c.blas ? Py_True : Py_False,
                         "blas_off_on_purpose", c.blas_off_on_purpose ? Py_True : Py_False,
                         "blas_library", c.blas_library, "blas_runtime", c.blas_runtime,
                         "blas_threads", c.blas_threads, "simd", c.simd, "intraop_threads",
                         c.intraop_threads, "worker_thread_limit", ev_vm_thread_limit(vm));
}

static PyMethodDef module_methods[] = {
    {"synchronize", py_synchronize, METH_NOARGS,
     "synchronize()\n--\n\nWaits for every op issued so far (by any thread) and raises the "
     "earliest kernel failure that no sync point has reported yet."},
    {"_probe_uid", py_probe_uid, METH_NOARGS,
     "Issues a probe op in the current context; the 0-d int64 result is the uid of the "
     "worker thread that ran it (tests only)."},
    {"_current_uid", py_current_uid, METH_NOARGS, "The calling thread's current uid."},
    {"_profile_enable", py_profile_enable, METH_O, "Turns instruction recording on/off."},
    {"_stats", py_stats, METH_NOARGS, "Runtime and allocator counters."},
    {"_set_run_here", py_set_run_here, METH_O,
     "Whether the issuing thread may run cheap ops itself while their worker is parked; "
     "returns the previous setting."},
    {"_intraop_stats", (PyCFunction)(void (*)(void))py_intraop_stats,
     METH_VARARGS | METH_KEYWORDS,
     "How large ops shared the cores (threads granted); reset=True restarts the maxima."},
    {"_config", py_config, METH_NOARGS,
     "The library's build and load-time configuration (eagervm.config() formats it)."},
    {"_fail_alloc_after", py_fail_alloc_after, METH_O,
     "Test hook: the allocation after n more succeed fails, and every one after it, "
     "until called with n < 0."},
    {"_atexit", py_atexit, METH_NOARGS, "Finishes queued work at interpreter exit."},
    {NULL},
};

/* ------------------------------------------------------------------ module */

extern PyMethodDef evpy_profile_methods[]; /* profile.c */
extern PyMethodDef evpy_optim_methods[];   /* optim.c */

static int module_exec(PyObject *m)
{
    evpy_state *st = PyModule_GetState(m);
    const char *sync = getenv("EAGERVM_SYNC");
    evpy_sync_mode = sync && *sync && strcmp(sync, "0") != 0;

    st->dtype_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &dtype_spec, NULL);
    if (!st->dtype_type) {
        return -1;
    }
    for (int d = 0; d < EV_DTYPE_COUNT; d++) {
        evpy_dtype *obj = PyObject_GC_New(evpy_dtype, st->dtype_type);
        if (!obj) {
            return -1;
        }
        obj->dtype = d;
        PyObject_GC_Track(obj);
        st->dtypes[d] = (PyObject *)obj;
        if (PyModule_AddObjectRef(m, ev_dtype_name(d), (PyObject *)obj) < 0) {
            return -1;
        }
    }
    if (PyModule_AddObjectRef(m, "dtype", (PyObject *)st->dtype_type) < 0) {
        return -1;
    }
    if (evpy_tensor_init_type(m, st) < 0 || evpy_asyncs_init_types(m, st) < 0 ||
        evpy_random_init(m, st) < 0 || evpy_autograd_init(m) < 0 ||
        evpy_distributed_init(m, st) < 0) {
        return -1;
    }
    if (PyModule_AddFunctions(m, evpy_table_methods) < 0 ||
        PyModule_AddFunctions(m, evpy_autograd_methods) < 0 ||
        PyModule_AddFunctions(m, evpy_asyncs_methods) < 0 ||
        PyModule_AddFunctions(m, evpy_profile_methods) < 0 ||
        PyModule_AddFunctions(m, evpy_optim_methods) < 0 ||
        PyModule_AddFunctions(m, evpy_distributed_methods) < 0) {
        return -1;
    }
    if (!evpy_vm()) {
        return -1;
    }
    pthread_once(&atfork_once, atfork_register);

    PyObject *fn = PyObject_GetAttrString(m, "_atexit");
    PyObject *atexit = fn ? PyImport_ImportModule("atexit") : NULL;
    PyObject *r = atexit ? PyObject_CallMethod(atexit, "register", "O", fn) : NULL;
    Py_XDECREF(fn);
    Py_XDECREF(atexit);
    if (!r) {
        return -1;
    }
    Py_DECREF(r);
    return PyModule_AddIntConstant(m, "_sync_mode", evpy_sync_mode);
}

static int module_traverse(PyObject *m, visitproc visit, void *arg)
{
    evpy_state *st = PyModule_GetState(m);
    if (!st) {
        return 0;
    }
    Py_VISIT(st->tensor_type);
    Py_VISIT(st->dtype_type);
    Py_VISIT(st->thread_type);
    Py_VISIT(st->thread_ctx_type);
    Py_VISIT(st->thread_func_type);
    for (int d = 0; d < EV_DTYPE_COUNT; d++) {
        Py_VISIT(st->dtypes[d]);
    }
    Py_VISIT(st->format_fn);
    Py_VISIT(st->numpy);
    Py_VISIT(st->generator_type);
    Py_VISIT(st->default_generator);
    Py_VISIT(st->dist_work_type);
    return 0;
}

static int module_clear(PyObject *m)
{
    evpy_state *st = PyModule_GetState(m);
    if (!st) {
        return 0;
    }
    Py_CLEAR(st->tensor_type);
    Py_CLEAR(st->dtype_type);
    Py_CLEAR(st->thread_type);
    Py_CLEAR(st->thread_ctx_type);
    Py_CLEAR(st->thread_func_type);
    for (int d = 0; d < EV_DTYPE_COUNT; d++) {
        Py_CLEAR(st->dtypes[d]);
    }
    Py_CLEAR(st->format_fn);
    Py_CLEAR(st->numpy);
    Py_CLEAR(st->generator_type);
    Py_CLEAR(st->default_generator);
    Py_CLEAR(st->dist_work_type);
    return 0;
}

static void module_free(void *m)
{
    module_clear((PyObject *)m);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

PyModuleDef evpy_module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "eagervm._C",
    .m_doc = "The C core of eagervm: tensors, ops, the runtime and the asyncs API.",
    .m_size = sizeof(evpy_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__C(void);

PyMODINIT_FUNC PyInit__C(void)
{
    return PyModuleDef_Init(&evpy_module_def);
}
