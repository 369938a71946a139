/* Errors and issue sites: EV_E* codes to Python exceptions, and the capture
 * of the caller's file, line and function for every op (DESIGN rule 6),
 * through the public frame API only. */
#include <stdlib.h>
#include <string.h>

#include "evpy.h"

/* ------------------------------------------------------------- exceptions */

PyObject *evpy_exc_type(int code)
{
    switch (code) {
    case EV_ETYPE:
        return PyExc_TypeError;
    case EV_EINVAL:
    case EV_EVALUE:
        return PyExc_ValueError;
    case EV_EINDEX:
        return PyExc_IndexError;
    case EV_ENOMEM:
        return PyExc_MemoryError;
    default:
        return PyExc_RuntimeError;
    }
}

PyObject *evpy_raise(int rc)
{
    PyErr_SetString(evpy_exc_type(rc), ev_last_message());
    return NULL;
}

int evpy_raise_int(int rc)
{
    evpy_raise(rc);
    return -1;
}

PyObject *evpy_raise_error(ev_error *err)
{
    ev_error_info info;
    ev_error_get(err, &info);
    char buf[1024];
    ev_error_format(err, buf, sizeof buf);
    PyErr_SetString(evpy_exc_type(info.code), buf);
    ev_error_unref(err);
    return NULL;
}

/* ------------------------------------------------------------------ sites
 *
 * Sites are interned by (code object, instruction offset): both are read
 * in O(1) (evpy_caller), while the line number needs a walk of the line
 * table, so it is computed only on a miss. The table holds a strong reference
 * to each code object so its address cannot be reused by another code object
 * while the key lives. Entries live for the process: the engine borrows sites
 * forever. The table is touched only with the GIL held, which serialises it. */

typedef struct site_entry {
    PyObject *code; /* strong reference; NULL marks an empty slot */
    int lasti;
    ev_site *site;  /* owned by the table, never freed */
} site_entry;

static site_entry *sites;
static size_t sites_cap; /* a power of two */
static size_t sites_len;

static size_t site_hash(PyObject *code, int lasti)
{
    uint64_t h = (uint64_t)(uintptr_t)code * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)(uint32_t)lasti * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h ^ (h >> 29));
}

static int sites_grow(void)
{
    size_t cap = sites_cap ? sites_cap * 2 : 1024;
    site_entry *fresh = calloc(cap, sizeof *fresh);
    if (!fresh) {
        return -1;
    }
    for (size_t i = 0; i < sites_cap; i++) {
        if (sites[i].code) {
            size_t j = site_hash(sites[i].code, sites[i].lasti) & (cap - 1);
            while (fresh[j].code) {
                j = (j + 1) & (cap - 1);
            }
            fresh[j] = sites[i];
        }
    }
    free(sites);
    sites = fresh;
    sites_cap = cap;
    return 0;
}

static char *utf8_dup(PyObject *obj, const char *attr)
{
    PyObject *s = PyObject_GetAttrString(obj, attr);
    const char *u = s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
    char *out = strdup(u ? u : "?");
    Py_XDECREF(s);
    PyErr_Clear();
    return out;
}

static const ev_site *site_make(PyFrameObject *frame, PyObject *code, int lasti)
{
    if (sites_len * 2 >= sites_cap && sites_grow() != 0) {
        return NULL;
    }
    ev_site *site = malloc(sizeof *site);
    if (!site) {
        return NULL;
    }
    site->file = utf8_dup(code, "co_filename");
    site->function = utf8_dup(code, "co_name");
    site->line = PyFrame_GetLineNumber(frame);
    size_t j = site_hash(code, lasti) & (sites_cap - 1);
    while (sites[j].code) {
        j = (j + 1) & (sites_cap - 1);
    }
    sites[j].code = Py_NewRef(code);
    sites[j].lasti = lasti;
    sites[j].site = site;
    sites_len++;
    return site;
}

const ev_site *evpy_capture_site(void)
{
    PyObject *code; /* borrowed */
    int lasti;
    if (!evpy_caller(&code, &lasti)) {
        return NULL;
    }
    if (sites_cap) {
        size_t j = site_hash(code, lasti) & (sites_cap - 1);
        while (sites[j].code) {
            if (sites[j].code == code && sites[j].lasti == lasti) {
                return sites[j].site;
            }
            j = (j + 1) & (sites_cap - 1);
        }
    }
    /* A new site: the line number needs the frame object. Out of memory
     * only loses the attribution, never the op. */
    PyFrameObject *frame = PyEval_GetFrame(); /* borrowed */
    return frame ? site_make(frame, code, lasti) : NULL;
}
