/* The profiler's bridge to Python: reads the runtime's instruction records
 * with every field of their stream, for eagervm.profiler. Recording itself is
 * switched by _profile_enable (module.c); this file only reads. */
#include "evpy.h"

/* _profile_records() -> list of tuples
 *   (name, device, stream_type, stream_index, thread_uid, seq,
 *    file, line, function, issue_ns, start_ns, end_ns, failed)
 * Waits for all work issued so far (not a sync point: no error is raised)
 * and moves the records out of the runtime, sorted by issue time. Times are
 * CLOCK_MONOTONIC nanoseconds, the clock of Python's time.monotonic_ns(). */
static PyObject *py_profile_records(PyObject *mod, PyObject *Py_UNUSED(ignored))
{
    ev_vm *vm = evpy_vm();
    if (!vm) {
        return NULL;
    }
    ev_prof_record *recs = NULL;
    size_t n = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ev_vm_profile_take(vm, &recs, &n);
    Py_END_ALLOW_THREADS
    if (rc) {
        return evpy_raise(rc);
    }
    /* Stream type and device names are interned once per call. */
    PyObject *type_names[EV_STREAM_TYPE_COUNT] = {NULL};
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (int i = 0; list && i < EV_STREAM_TYPE_COUNT; i++) {
        const char *s = ev_stream_type_name(i);
        type_names[i] = PyUnicode_FromString(s ? s : "stream");
        if (!type_names[i]) {
            Py_CLEAR(list);
        }
    }
    for (size_t i = 0; list && i < n; i++) {
        const ev_prof_record *r = &recs[i];
        char dev[32];
        if (r->stream.device_type == EV_DEVICE_CPU) {
            snprintf(dev, sizeof dev, "cpu");
        } else {
            snprintf(dev, sizeof dev, "cuda:%u", (unsigned)r->stream.device_index);
        }
        PyObject *tname = r->stream.type < EV_STREAM_TYPE_COUNT ? type_names[r->stream.type]
                                                                : type_names[0];
        PyObject *item = Py_BuildValue(
            "(ssOIIKzizLLLi)", r->name ? r->name : "instruction", dev, tname,
            (unsigned int)r->stream.index, (unsigned int)r->stream.thread_uid,
            (unsigned long long)r->seq, r->site ? r->site->file : NULL,
            r->site ? r->site->line : 0, r->site ? r->site->function : NULL,
            (long long)r->issue_ns, (long long)r->start_ns, (long long)r->end_ns, r->failed);
        if (!item) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    for (int i = 0; i < EV_STREAM_TYPE_COUNT; i++) {
        Py_XDECREF(type_names[i]);
    }
    ev_free(recs);
    return list;
}

PyMethodDef evpy_profile_methods[] = {
    {"_profile_records", py_profile_records, METH_NOARGS,
     "Waits for all work and moves the profile records out of the runtime as tuples "
     "(name, device, stream_type, stream_index, thread_uid, seq, file, line, function, "
     "issue_ns, start_ns, end_ns, failed), sorted by issue time (eagervm.profiler)."},
    {NULL},
};
