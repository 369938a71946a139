/* The calling Python frame's code object and instruction offset, which key
 * the interned sites (errors.c). On CPython 3.11 they are read from its
 * interpreter frame: the public way, PyEval_GetFrame(), makes a frame object
 * for a frame that has none yet, which every call of a Python function that
 * issues an op has (a lambda issuing one op paid 35 ns for it, a tenth of
 * the op). Other versions ask PyEval_GetFrame(). */
#include "evpy.h"

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000 && \
    defined(__has_include)
#if __has_include(<internal/pycore_frame.h>)
#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#define EVPY_INTERPRETER_FRAMES 1
#endif
#endif

int evpy_caller(PyObject **code, int *lasti)
{
#ifdef EVPY_INTERPRETER_FRAMES
    /* PyEval_GetFrame's walk: the innermost frame that has begun. */
    _PyInterpreterFrame *f = PyThreadState_Get()->cframe->current_frame;
    while (f && _PyFrame_IsIncomplete(f)) {
        f = f->previous;
    }
    if (!f) {
        return 0;
    }
    *code = (PyObject *)f->f_code;
    /* In bytes, as PyFrame_GetLasti gives it. */
    *lasti = _PyInterpreterFrame_LASTI(f) * (int)sizeof(_Py_CODEUNIT);
    return 1;
#else
    PyFrameObject *frame = PyEval_GetFrame(); /* borrowed */
    if (!frame) {
        return 0;
    }
    PyCodeObject *c = PyFrame_GetCode(frame);
    *code = (PyObject *)c; /* the frame keeps it alive */
    Py_DECREF(c);
    *lasti = PyFrame_GetLasti(frame);
    return 1;
#endif
}
