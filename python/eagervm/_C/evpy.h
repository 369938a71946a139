/* Shared declarations of the eagervm._C extension: the module state, the
 * Tensor handle, the process-wide runtime, and the helpers each file exports.
 * Only the public CPython API is used (STYLE 29). */
#ifndef EAGERVM_PY_EVPY_H
#define EAGERVM_PY_EVPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "eagervm/autograd.h"
#include "eagervm/ops.h"
#include "eagervm/tensor.h"
#include "eagervm/vm.h"

/* ------------------------------------------------------------ module state */

/* Per module instance: the heap types and the dtype objects. Every pointer is
 * a strong reference owned by the state (visited and cleared by the module's
 * GC slots). */
typedef struct evpy_state {
    PyTypeObject *tensor_type;
    PyTypeObject *dtype_type;
    PyTypeObject *thread_type;      /* asyncs.Thread */
    PyTypeObject *thread_ctx_type;  /* asyncs.thread */
    PyTypeObject *thread_func_type; /* what @asyncs.thread(t) returns */
    PyObject *dtypes[EV_DTYPE_COUNT];
    PyObject *format_fn;            /* eagervm._repr.format_tensor, loaded lazily */
    PyObject *numpy;                /* the numpy module, loaded lazily; Py_None if absent */
    PyTypeObject *generator_type;   /* eagervm.Generator (random.c) */
    PyObject *default_generator;    /* the Generator of the default ev_generator */
    PyTypeObject *dist_work_type;   /* eagervm.distributed.Work (distributed.c) */
} evpy_state;

extern PyModuleDef evpy_module_def;

/* ------------------------------------------------------------------ tensor */

/* A Python Tensor: a thin handle to a C tensor. `t` is a strong reference
 * owned by the object. `gen` is the runtime generation it belongs to: after a
 * fork the child's runtime is new, and tensors of the parent are adopted on
 * first use (see evpy_tensor_get). */
typedef struct {
    PyObject_HEAD
    ev_tensor *t;
    uint64_t gen;
} evpy_tensor;

#define EvTensor_CAST(op) ((evpy_tensor *)(op))

void evpy_tensor_dealloc(PyObject *self);

/* 1 if op is an eagervm Tensor (the type is final, so its dealloc names it). */
static inline int evpy_tensor_check(PyObject *op)
{
    return Py_TYPE(op)->tp_dealloc == evpy_tensor_dealloc;
}

/* The state of the module that made a Tensor's type. */
static inline evpy_state *evpy_state_of_type(PyTypeObject *tp)
{
    return (evpy_state *)PyType_GetModuleState(tp);
}

/* Wraps a new reference to a C tensor (stolen, also on failure). */
PyObject *evpy_tensor_wrap(evpy_state *st, ev_tensor *t);
/* The C tensor of a Tensor (borrowed), adopting a parent's tensor into this
 * process's runtime after a fork. NULL with an exception set on failure. */
ev_tensor *evpy_tensor_get(PyObject *op);

/* Converts data (nested sequences, scalars, buffers, Tensors) into a new C
 * tensor; dtype < 0 infers it. */
int evpy_tensor_from_data(evpy_state *st, PyObject *data, int dtype, ev_tensor **out);
/* Parses a dtype argument (DType, name, Python type, NumPy dtype). None gives
 * *out = -1. Returns 0, or -1 with TypeError set. */
int evpy_parse_dtype(evpy_state *st, PyObject *obj, int *out);
/* Parses a shape given as a tuple/list or as separate integers. */
int evpy_parse_shape(PyObject *const *args, Py_ssize_t nargs, int *ndim, int64_t *shape);

int evpy_tensor_init_type(PyObject *module, evpy_state *st);

/* ----------------------------------------------------------------- runtime */

/* The process-wide runtime, created at import and re-created lazily in a fork
 * child. NULL with RuntimeError set if it cannot be created. */
ev_vm *evpy_vm(void);
/* Bumped in every fork child: objects of an older generation belong to the
 * parent's runtime. */
uint64_t evpy_generation(void);
/* EAGERVM_SYNC=1: every op waits for its output before returning. */
extern int evpy_sync_mode;

/* The thread uid ops issued by the calling Python thread run on. Each Python
 * thread is one OS thread, so a C thread-local is exactly "per Python
 * thread"; it is cheaper than the thread-state dict on the hot path. */
extern _Thread_local uint32_t evpy_current_uid;

/* Fills an exec for an op issued now: the runtime, the current uid and the
 * caller's site. Returns 0, or -1 with an exception set. */
int evpy_exec(ev_exec *ex);

/* ------------------------------------------------------------------ errors */

/* Raises the exception fitting an EV_E* code returned by a call, with the
 * calling thread's last message. Returns NULL (for `return evpy_raise(rc)`). */
PyObject *evpy_raise(int rc);
/* Same, returning -1. */
int evpy_raise_int(int rc);
/* Raises the exception fitting a kernel failure; consumes the reference. */
PyObject *evpy_raise_error(ev_error *err);
/* The Python exception type for an EV_E* code. */
PyObject *evpy_exc_type(int code);

/* The interned site of the calling Python frame, or NULL outside any frame.
 * Sites live for the process (the engine borrows them forever). GIL held. */
const ev_site *evpy_capture_site(void);
/* The calling Python frame's code object (borrowed) and instruction offset
 * in bytes (caller.c); 0 outside any frame. GIL held. */
int evpy_caller(PyObject **code, int *lasti);

/* ------------------------------------------------------------------- waits */

/* A sync point: waits until t is ready for reading, with the GIL released, in
 * slices so that Ctrl-C raises KeyboardInterrupt promptly. Raises the kernel
 * failure that poisoned t. Returns 0 or -1 with an exception set. */
int evpy_wait_tensor(ev_tensor *t);
/* Waits for everything issued so far; raises the earliest unreported
 * failure once. */
int evpy_synchronize(void);
/* Fork handlers of the waits (the child's main thread is the forking one). */
void evpy_wait_atfork_prepare(void);
void evpy_wait_atfork_parent(void);
void evpy_wait_atfork_child(void);

/* ------------------------------------------------------------- ops, asyncs */

extern PyType_Slot evpy_tensor_op_slots[];   /* @ and unary +, from ops.c */

/* op_table.c: every op of the op table (include/eagervm/ops.def) as
 * functions (with the NumPy aliases and _op_table), as Tensor methods, and
 * as operators. */
extern PyMethodDef evpy_table_methods[];
extern PyMethodDef evpy_tensor_table_methods[];
extern PyType_Slot evpy_tensor_table_slots[];

/* The bindings the op table's EV_FUNC rows name (ops.c; codes select a
 * variant): each takes (input, ...) as a function takes them. */
#define EV_FUNC(name, binding, ...) \
    PyObject *binding(evpy_state *st, int code, PyObject *const *args, Py_ssize_t nargs, \
                      PyObject *kwnames);
#include "eagervm/ops.def"
enum { EVPY_V_VIEW, EVPY_V_RESHAPE, EVPY_V_EXPAND, EVPY_V_PERMUTE };

/* sum(input, dim=None, keepdim=False) and the other reductions of the op
 * table (op: enum ev_reduce_op). (ops.c) */
PyObject *evpy_reduce_fn(evpy_state *st, int op, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames);

/* Binary op on Python operands (Tensors or scalars), used by operators. */
PyObject *evpy_binary(evpy_state *st, int op, PyObject *a, PyObject *b);
/* Converts obj to a tensor operand; a Python scalar takes its dtype from
 * `like` (NumPy's weak scalars). *owned says whether *out must be unref'd. */
int evpy_operand(evpy_state *st, PyObject *obj, ev_tensor *like, ev_tensor **out, int *owned);

int evpy_asyncs_init_types(PyObject *module, evpy_state *st);

/* random.c: evpy_random_init adds the Generator type, default_generator and
 * manual_seed to the module (the random ops come from the op table). */
int evpy_random_init(PyObject *module, evpy_state *st);
/* export.c: __dlpack__, __dlpack_device__ and the buffer protocol. */
extern PyMethodDef evpy_tensor_export_methods[];
extern PyType_Slot evpy_tensor_export_slots[];
enum { EVPY_SEL_INDEX_SELECT, EVPY_SEL_GATHER, EVPY_SEL_TAKE, EVPY_SEL_SCATTER_ADD,
       EVPY_SEL_SCATTER_ADD_ };
/* indexing.c: indexing with index tensors and masks, and a sync point that
 * reads an integer tensor's values into a PyMem_Malloc'd int64 array (n
 * entries, C order), NULL with an exception set on failure. */
int64_t *evpy_host_int64(ev_tensor *t, int64_t *n);
int evpy_is_advanced_key(PyObject *key);
PyObject *evpy_getitem_advanced(PyObject *self, PyObject *key);
int evpy_setitem_advanced(PyObject *self, PyObject *key, PyObject *value);
extern PyMethodDef evpy_asyncs_methods[];

/* distributed.c: the process group, the collectives and their Work type. */
int evpy_distributed_init(PyObject *module, evpy_state *st);
extern PyMethodDef evpy_distributed_methods[];

/* autograd.c: the Node type, grad mode and the backward functions of the
 * module, the Tensor methods, and the Tensor attributes tensor.c lists. */
int evpy_autograd_init(PyObject *module);
extern PyMethodDef evpy_autograd_methods[];
extern PyMethodDef evpy_tensor_autograd_methods[];
PyObject *evpy_tensor_get_requires_grad(PyObject *self, void *closure);
int evpy_tensor_set_requires_grad(PyObject *self, PyObject *value, void *closure);
PyObject *evpy_tensor_get_grad(PyObject *self, void *closure);
int evpy_tensor_set_grad(PyObject *self, PyObject *value, void *closure);
PyObject *evpy_tensor_get_is_leaf(PyObject *self, void *closure);
PyObject *evpy_tensor_get_grad_fn(PyObject *self, void *closure);

/* Calls a creation op's binding without its requires_grad= keyword, then
 * marks the result as requiring grad if it was true. (autograd.c) */
typedef PyObject *(*evpy_binding_fn)(evpy_state *st, int code, PyObject *const *args,
                                     Py_ssize_t nargs, PyObject *kwnames);
PyObject *evpy_call_creation(evpy_binding_fn binding, evpy_state *st, int code,
                             PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);

/* Raises RuntimeError naming what (an op without a derivative yet) when grad
 * mode is on and one of the n objects is a Tensor that requires grad;
 * returns -1 then, else 0. (autograd.c) */
int evpy_ag_refuse(const char *what, Py_ssize_t n, PyObject *const *objs);

/* Wait for an op's output under EAGERVM_SYNC=1; -1 with the error raised. */
static inline int evpy_maybe_sync(ev_tensor *t)
{
    return evpy_sync_mode ? evpy_wait_tensor(t) : 0;
}

/* Matches positional and keyword arguments to `names` (NULL-terminated);
 * out[i] is a borrowed reference or NULL when absent. The first `npos`
 * names may be given by position, the first `nreq` are required. Raises
 * TypeError and returns -1 on a mismatch. (ops.c) */
int evpy_parse_args(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                    const char *const *names, int npos, int nreq, PyObject **out);

/* Argument helpers shared by the op bindings (ops.c). Each raises and
 * returns NULL/-1 on a bad argument; fn names the Python function. */
ev_tensor *evpy_need_tensor(const char *fn, PyObject *obj);
int evpy_parse_int(const char *fn, const char *what, PyObject *obj, long *out);
/* obj as a truth value (dflt when NULL or None); -1 with an exception set. */
int evpy_parse_bool(PyObject *obj, int dflt);
/* A dim argument: None (*all set), an int, or a sequence of ints. */
int evpy_parse_dims(const char *fn, PyObject *obj, int *ndims, int *dims, int *all);
int evpy_is_py_scalar(PyObject *obj);
/* 1 if obj could be an operator's operand (else NotImplemented). */
int evpy_operand_like(PyObject *obj);
/* The module state of whichever of a, b is a Tensor. */
evpy_state *evpy_state_of_pair(PyObject *a, PyObject *b);
/* An op's result: raises for rc != 0, waits under EAGERVM_SYNC, wraps out. */
PyObject *evpy_finish(evpy_state *st, int rc, ev_tensor *out);

/* ------------------------------------------------ function/method tables */

/* Most arguments any binding takes (positional and keyword). */
#define EVPY_MAX_ARGS 8

/* An op binding: defined once taking (input, ...), bound as a module
 * function and, through evpy_call_method, as a method that puts self in
 * front. code selects a variant (an op number, in place or not). */
typedef PyObject *(*evpy_impl_fn)(evpy_state *st, int code, PyObject *const *args,
                                  Py_ssize_t nargs, PyObject *kwnames);
/* Calls impl with self prepended to args. (ops.c) */
PyObject *evpy_call_method(evpy_impl_fn impl, int code, PyObject *self, PyObject *const *args,
                           Py_ssize_t nargs, PyObject *kwnames);

#define EVPY_FN(pyname, impl, code)                                                          \
    static PyObject *fn_##pyname(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,    \
                                 PyObject *kwnames)                                         \
    {                                                                                       \
        return impl(PyModule_GetState(mod), code, args, nargs, kwnames);                    \
    }
#define EVPY_METH(pyname, impl, code)                                                        \
    static PyObject *meth_##pyname(PyObject *self, PyObject *const *args, Py_ssize_t nargs, \
                                   PyObject *kwnames)                                       \
    {                                                                                       \
        return evpy_call_method(impl, code, self, args, nargs, kwnames);                    \
    }
#define EVPY_BOTH(pyname, impl, code) EVPY_FN(pyname, impl, code) EVPY_METH(pyname, impl, code)
#define EVPY_FASTKW METH_FASTCALL | METH_KEYWORDS
#define EVPY_FN_ENTRY(pyname, doc) \
    {#pyname, (PyCFunction)(void (*)(void))fn_##pyname, EVPY_FASTKW, doc},
#define EVPY_METH_ENTRY(pyname, doc) \
    {#pyname, (PyCFunction)(void (*)(void))meth_##pyname, EVPY_FASTKW, doc},

#endif
