/* eagervm.asyncs (DESIGN rule 8): Thread, a handle to a worker thread uid
 * taken from the runtime's pool; thread(t), a context manager and decorator
 * that makes the ops the calling Python thread issues run on t. The choice is
 * a C thread-local (one per Python thread), saved on a per-thread stack at
 * each entry, so blocks nest, the same object may be re-entered, and exits
 * restore the previous choice even when the block raises. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "evpy.h"
#include <structmember.h>

/* ------------------------------------------------------------------ Thread */

typedef struct {
    PyObject_HEAD
    uint32_t uid;
    uint64_t gen; /* the runtime generation the uid was taken from */
} evpy_thread;

static PyObject *thread_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "Thread() takes no arguments");
        return NULL;
    }
    ev_vm *vm = evpy_vm();
    if (!vm) {
        return NULL;
    }
    uint32_t uid;
    int rc = ev_vm_thread_acquire(vm, &uid);
    if (rc) {
        /* EV_ELIMIT's message names EAGERVM_WORKER_THREAD_LIMIT. */
        PyErr_SetString(PyExc_RuntimeError, ev_last_message());
        return NULL;
    }
    evpy_thread *self = (evpy_thread *)type->tp_alloc(type, 0);
    if (!self) {
        ev_vm_thread_release(vm, uid);
        return NULL;
    }
    self->uid = uid;
    self->gen = evpy_generation();
    return (PyObject *)self;
}

static void thread_dealloc(PyObject *op)
{
    evpy_thread *self = (evpy_thread *)op;
    PyTypeObject *tp = Py_TYPE(op);
    /* The uid goes back to the pool; work already issued on it still runs
     * (the engine allows it). A parent's uid is not ours to give back. */
    if (self->gen == evpy_generation()) {
        ev_vm *vm = evpy_vm();
        if (vm) {
            ev_vm_thread_release(vm, self->uid);
        } else {
            PyErr_Clear();
        }
    }
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyObject *thread_repr(PyObject *op)
{
    return PyUnicode_FromFormat("<eagervm.asyncs.Thread uid=%u>", ((evpy_thread *)op)->uid);
}

static PyObject *thread_get_uid(PyObject *op, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLong(((evpy_thread *)op)->uid);
}

static PyGetSetDef thread_getset[] = {
    {"uid", thread_get_uid, NULL, "the worker thread's uid (1..EAGERVM_WORKER_THREAD_LIMIT)",
     NULL},
    {NULL},
};

static PyType_Slot thread_slots[] = {
    {Py_tp_new, thread_new},
    {Py_tp_dealloc, thread_dealloc},
    {Py_tp_repr, thread_repr},
    {Py_tp_getset, thread_getset},
    {Py_tp_doc, "Thread()\n--\n\nA worker thread of the runtime. Each Thread takes a free uid "
                "from a pool limited by EAGERVM_WORKER_THREAD_LIMIT and gives it back when it "
                "is garbage collected (work issued on it still finishes). Use it with "
                "eagervm.asyncs.thread(t)."},
    {0, NULL},
};

static PyType_Spec thread_spec = {
    .name = "eagervm.asyncs.Thread",
    .basicsize = sizeof(evpy_thread),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = thread_slots,
};

/* ----------------------------------------------------- the per-thread stack */

/* Saved uids of the entered blocks of this OS (= Python) thread. A small
 * inline part covers usual nesting; deeper nesting (a decorated recursive
 * function) grows a heap part that a key destructor frees at thread exit. */
#define INLINE_DEPTH 32

static _Thread_local struct {
    uint32_t inline_part[INLINE_DEPTH];
    uint32_t *heap;
    size_t len, cap;
} saved;

static pthread_key_t heap_key;
static pthread_once_t heap_key_once = PTHREAD_ONCE_INIT;

static void heap_key_make(void)
{
    pthread_key_create(&heap_key, free);
}

static int push_uid(uint32_t uid)
{
    if (saved.len < INLINE_DEPTH) {
        saved.inline_part[saved.len++] = uid;
        return 0;
    }
    size_t i = saved.len - INLINE_DEPTH;
    if (i >= saved.cap) {
        size_t cap = saved.cap ? saved.cap * 2 : 64;
        uint32_t *p = realloc(saved.heap, cap * sizeof *p);
        if (!p) {
            PyErr_NoMemory();
            return -1;
        }
        pthread_once(&heap_key_once, heap_key_make);
        pthread_setspecific(heap_key, p);
        saved.heap = p;
        saved.cap = cap;
    }
    saved.heap[i] = uid;
    saved.len++;
    return 0;
}

static int pop_uid(uint32_t *uid)
{
    if (saved.len == 0) {
        return -1;
    }
    saved.len--;
    *uid = saved.len < INLINE_DEPTH ? saved.inline_part[saved.len]
                                    : saved.heap[saved.len - INLINE_DEPTH];
    return 0;
}

/* ----------------------------------------------------------- thread(t) */

typedef struct {
    PyObject_HEAD
    PyObject *thread; /* strong: keeps the uid taken while the context lives */
} evpy_ctx;

static int ctx_check_thread(PyTypeObject *type, PyObject *t)
{
    evpy_state *st = evpy_state_of_type(type);
    if (!Py_IS_TYPE(t, st->thread_type)) {
        PyErr_Format(PyExc_TypeError, "asyncs.thread() expects an eagervm.asyncs.Thread, got "
                                      "%.100s",
                     Py_TYPE(t)->tp_name);
        return -1;
    }
    return 0;
}

static PyObject *ctx_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"thread", NULL};
    PyObject *t;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:thread", kwlist, &t) ||
        ctx_check_thread(type, t) != 0) {
        return NULL;
    }
    evpy_ctx *self = (evpy_ctx *)type->tp_alloc(type, 0);
    if (!self) {
        return NULL;
    }
    self->thread = Py_NewRef(t);
    return (PyObject *)self;
}

static int ctx_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(((evpy_ctx *)op)->thread);
    return 0;
}

static int ctx_clear(PyObject *op)
{
    Py_CLEAR(((evpy_ctx *)op)->thread);
    return 0;
}

static void ctx_dealloc(PyObject *op)
{
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    ctx_clear(op);
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyObject *ctx_enter(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    evpy_ctx *self = (evpy_ctx *)op;
    if (push_uid(evpy_current_uid) != 0) {
        return NULL;
    }
    evpy_current_uid = ((evpy_thread *)self->thread)->uid;
    return Py_NewRef(self->thread);
}

static PyObject *ctx_exit(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    uint32_t prev;
    if (pop_uid(&prev) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "asyncs.thread: __exit__ without __enter__");
        return NULL;
    }
    evpy_current_uid = prev;
    Py_RETURN_FALSE; /* never swallows the block's exception */
}

static PyObject *ctx_repr(PyObject *op)
{
    return PyUnicode_FromFormat("eagervm.asyncs.thread(%R)", ((evpy_ctx *)op)->thread);
}

/* ------------------------------------------------- @thread(t) on a function */

typedef struct {
    PyObject_HEAD
    PyObject *thread; /* strong */
    PyObject *func;   /* strong */
    PyObject *dict;   /* strong or NULL: attributes copied like functools.wraps */
    vectorcallfunc vectorcall;
} evpy_tfunc;

static PyObject *tfunc_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames);

static PyObject *ctx_call(PyObject *op, PyObject *args, PyObject *kwds)
{
    evpy_ctx *self = (evpy_ctx *)op;
    PyObject *fn;
    if (kwds && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "asyncs.thread(t)(fn) takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O:thread.__call__", &fn)) {
        return NULL;
    }
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "asyncs.thread(t) decorates a callable, not %.100s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    evpy_state *st = evpy_state_of_type(Py_TYPE(op));
    evpy_tfunc *f = (evpy_tfunc *)st->thread_func_type->tp_alloc(st->thread_func_type, 0);
    if (!f) {
        return NULL;
    }
    f->thread = Py_NewRef(self->thread);
    f->func = Py_NewRef(fn);
    f->dict = NULL;
    f->vectorcall = tfunc_vectorcall;
    /* functools.wraps: __name__, __doc__, __wrapped__ ... */
    PyObject *functools = PyImport_ImportModule("functools");
    PyObject *r = functools ? PyObject_CallMethod(functools, "update_wrapper", "OO", f, fn)
                            : NULL;
    Py_XDECREF(functools);
    if (!r) {
        Py_DECREF(f);
        return NULL;
    }
    Py_DECREF(r);
    return (PyObject *)f;
}

static PyObject *tfunc_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames)
{
    evpy_tfunc *self = (evpy_tfunc *)op;
    uint32_t prev = evpy_current_uid;
    evpy_current_uid = ((evpy_thread *)self->thread)->uid;
    PyObject *r = PyObject_Vectorcall(self->func, args, nargsf, kwnames);
    evpy_current_uid = prev;
    return r;
}

static PyObject *tfunc_descr_get(PyObject *op, PyObject *obj, PyObject *type)
{
    if (!obj || obj == Py_None) {
        return Py_NewRef(op);
    }
    return PyMethod_New(op, obj);
}

static int tfunc_traverse(PyObject *op, visitproc visit, void *arg)
{
    evpy_tfunc *self = (evpy_tfunc *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(self->thread);
    Py_VISIT(self->func);
    Py_VISIT(self->dict);
    return 0;
}

static int tfunc_clear(PyObject *op)
{
    evpy_tfunc *self = (evpy_tfunc *)op;
    Py_CLEAR(self->thread);
    Py_CLEAR(self->func);
    Py_CLEAR(self->dict);
    return 0;
}

static void tfunc_dealloc(PyObject *op)
{
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    tfunc_clear(op);
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyObject *tfunc_repr(PyObject *op)
{
    evpy_tfunc *self = (evpy_tfunc *)op;
    return PyUnicode_FromFormat("<%R on %R>", self->func, self->thread);
}

static PyMemberDef tfunc_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(evpy_tfunc, dict), READONLY},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(evpy_tfunc, vectorcall), READONLY},
    {"thread", T_OBJECT, offsetof(evpy_tfunc, thread), READONLY, "the Thread calls run on"},
    {NULL},
};

static PyGetSetDef tfunc_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL},
};

static PyType_Slot tfunc_slots[] = {
    {Py_tp_getset, tfunc_getset},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, tfunc_descr_get},
    {Py_tp_traverse, tfunc_traverse},
    {Py_tp_clear, tfunc_clear},
    {Py_tp_dealloc, tfunc_dealloc},
    {Py_tp_repr, tfunc_repr},
    {Py_tp_members, tfunc_members},
    {Py_tp_doc, "A function whose calls issue their ops on an asyncs.Thread."},
    {0, NULL},
};

static PyType_Spec tfunc_spec = {
    .name = "eagervm.asyncs.ThreadFunction",
    .basicsize = sizeof(evpy_tfunc),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
             Py_TPFLAGS_DISALLOW_INSTANTIATION | Py_TPFLAGS_IMMUTABLETYPE |
             Py_TPFLAGS_METHOD_DESCRIPTOR,
    .slots = tfunc_slots,
};

static PyMethodDef ctx_methods[] = {
    {"__enter__", ctx_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))ctx_exit, METH_FASTCALL, NULL},
    {NULL},
};

static PyMemberDef ctx_members[] = {
    {"thread", T_OBJECT, offsetof(evpy_ctx, thread), READONLY, "the Thread ops run on"},
    {NULL},
};

static PyType_Slot ctx_slots[] = {
    {Py_tp_new, ctx_new},
    {Py_tp_call, ctx_call},
    {Py_tp_traverse, ctx_traverse},
    {Py_tp_clear, ctx_clear},
    {Py_tp_dealloc, ctx_dealloc},
    {Py_tp_repr, ctx_repr},
    {Py_tp_methods, ctx_methods},
    {Py_tp_members, ctx_members},
    {Py_tp_doc, "thread(t)\n--\n\nA context manager: ops issued inside the block by this "
                "Python thread run on worker thread t (other Python threads are not "
                "affected). Blocks nest; the previous choice comes back on exit, also when "
                "the block raises. Also a decorator: @thread(t) runs each call's ops on t."},
    {0, NULL},
};

static PyType_Spec ctx_spec = {
    .name = "eagervm.asyncs.thread",
    .basicsize = sizeof(evpy_ctx),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = ctx_slots,
};

PyMethodDef evpy_asyncs_methods[] = {
    {NULL},
};

int evpy_asyncs_init_types(PyObject *module, evpy_state *st)
{
    st->thread_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &thread_spec, NULL);
    st->thread_ctx_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &ctx_spec, NULL);
    st->thread_func_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &tfunc_spec, NULL);
    if (!st->thread_type || !st->thread_ctx_type || !st->thread_func_type) {
        return -1;
    }
    /* Private names in _C; eagervm.asyncs publishes them (nothing at top level). */
    if (PyModule_AddObjectRef(module, "_asyncs_Thread", (PyObject *)st->thread_type) < 0 ||
        PyModule_AddObjectRef(module, "_asyncs_thread", (PyObject *)st->thread_ctx_type) < 0) {
        return -1;
    }
    return 0;
}
