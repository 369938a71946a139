/* Sync points: waits for a tensor or for everything with the GIL released,
 * interruptible by Ctrl-C, raising kernel failures as Python exceptions.
 *
 * Only the main thread receives KeyboardInterrupt, so it waits on the engine
 * directly in slices (ev_wait_obj_timeout / ev_synchronize_timeout of
 * SLICE_MS), checking for signals with the GIL between two slices. A wait
 * that is already satisfied returns from the first slice without sleeping.
 * Other Python threads cannot receive KeyboardInterrupt and wait without a
 * timeout. */
#include <stdint.h>

#include "evpy.h"

/* How long the main thread sleeps between two checks for Ctrl-C. */
#define SLICE_MS 20

static unsigned long main_ident;
static int main_ident_set;

void evpy_wait_atfork_prepare(void)
{
}

void evpy_wait_atfork_parent(void)
{
}

void evpy_wait_atfork_child(void)
{
    /* The forking thread is the child's main thread. */
    main_ident = PyThread_get_thread_ident();
    main_ident_set = 1;
}

static int is_main_thread(void)
{
    if (!main_ident_set) {
        PyObject *threading = PyImport_ImportModule("threading");
        PyObject *mt = threading ? PyObject_CallMethod(threading, "main_thread", NULL) : NULL;
        PyObject *ident = mt ? PyObject_GetAttrString(mt, "ident") : NULL;
        if (ident && PyLong_Check(ident)) {
            main_ident = PyLong_AsUnsignedLong(ident);
            main_ident_set = 1;
        }
        Py_XDECREF(ident);
        Py_XDECREF(mt);
        Py_XDECREF(threading);
        PyErr_Clear();
        if (!main_ident_set) {
            return 0;
        }
    }
    return PyThread_get_thread_ident() == main_ident;
}

/* Waits for t (NULL: for everything, as synchronize) in slices, so that the
 * main thread sees Ctrl-C between them; raises the failure found. */
static int wait_in_slices(ev_tensor *t)
{
    ev_vm *vm = evpy_vm();
    if (!vm) {
        return -1;
    }
    ev_error *err = NULL;
    /* A poll first, with the GIL held: a wait that is already satisfied (a
     * sync point after the work ended) then skips the GIL's hand-off, which
     * costs more than the poll. */
    int rc = t ? ev_wait_obj_timeout(vm, ev_tensor_obj(t), 0, &err)
               : ev_synchronize_timeout(vm, 0, &err);
    uint32_t slice = rc == EV_ETIMEDOUT && is_main_thread() ? SLICE_MS : UINT32_MAX;
    while (rc == EV_ETIMEDOUT) {
        Py_BEGIN_ALLOW_THREADS
        rc = t ? ev_wait_obj_timeout(vm, ev_tensor_obj(t), slice, &err)
               : ev_synchronize_timeout(vm, slice, &err);
        Py_END_ALLOW_THREADS
        if (rc == EV_ETIMEDOUT && PyErr_CheckSignals() != 0) {
            return -1;
        }
    }
    if (err) {
        evpy_raise_error(err);
        return -1;
    }
    return 0;
}

int evpy_wait_tensor(ev_tensor *t)
{
    return wait_in_slices(t);
}

int evpy_synchronize(void)
{
    return wait_in_slices(NULL);
}
