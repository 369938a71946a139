/* The ops of the op table (include/eagervm/ops.def) for Python, all made
 * from it: module functions and their NumPy aliases, Tensor methods and
 * in-place methods, their docstrings, the operators (number slots and rich
 * comparisons), and eagervm._C._op_table(), which hands the rows to Python
 * (eagervm.__all__, the .pyi stub, the op tests and bench/ops.py are built
 * from it). The elementwise impls live here; the reductions' in ops.c. */
#include <string.h>

#include "evpy.h"

PyObject *evpy_binary(evpy_state *st, int op, PyObject *a, PyObject *b)
{
    ev_tensor *ta = NULL, *tb = NULL;
    int own_a = 0, own_b = 0;
    PyObject *res = NULL;
    /* The tensor side decides a scalar's dtype, so convert it first. */
    if (evpy_tensor_check(a) || !evpy_tensor_check(b)) {
        if (evpy_operand(st, a, NULL, &ta, &own_a) != 0 ||
            evpy_operand(st, b, ta, &tb, &own_b) != 0) {
            goto done;
        }
    } else if (evpy_operand(st, b, NULL, &tb, &own_b) != 0 ||
               evpy_operand(st, a, tb, &ta, &own_a) != 0) {
        goto done;
    }
    ev_exec ex;
    if (evpy_exec(&ex) != 0) {
        goto done;
    }
    ev_tensor *out;
    int rc = ev_ag_binary(&ex, op, ta, tb, &out);
    res = evpy_finish(st, rc, out);
done:
    if (own_a) {
        ev_tensor_unref(ta);
    }
    if (own_b) {
        ev_tensor_unref(tb);
    }
    return res;
}

/* a op= b in place; returns a new reference to self. */
static PyObject *binary_inplace(evpy_state *st, int op, PyObject *self, PyObject *b)
{
    ev_tensor *ta = evpy_tensor_get(self), *tb;
    int own_b;
    if (!ta || evpy_operand(st, b, ta, &tb, &own_b) != 0) {
        return NULL;
    }
    ev_exec ex;
    int rc = evpy_exec(&ex) == 0 ? ev_ag_binary_(&ex, op, ta, tb) : 1;
    if (own_b) {
        ev_tensor_unref(tb);
    }
    if (rc == 1) {
        return NULL;
    }
    if (rc) {
        return evpy_raise(rc);
    }
    if (evpy_maybe_sync(ta) != 0) {
        return NULL;
    }
    return Py_NewRef(self);
}


static PyObject *binary_fn(evpy_state *st, int op, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    static const char *const names[] = {"input", "other", NULL};
    PyObject *a[2];
    if (evpy_parse_args(ev_binary_op_name(op), args, nargs, kwnames, names, 2, 2, a) != 0) {
        return NULL;
    }
    return evpy_binary(st, op, a[0], a[1]);
}

static PyObject *binary_inplace_fn(evpy_state *st, int op, PyObject *const *args,
                                   Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"input", "other", NULL};
    PyObject *a[2];
    if (evpy_parse_args(ev_binary_op_name(op), args, nargs, kwnames, names, 2, 2, a) != 0 ||
        !evpy_need_tensor(ev_binary_op_name(op), a[0])) {
        return NULL;
    }
    return binary_inplace(st, op, a[0], a[1]);
}

/* ------------------------------------------------------------------- unary */

static PyObject *unary_fn(evpy_state *st, int op, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames)
{
    static const char *const names[] = {"input", NULL};
    PyObject *a[1];
    const char *fn = ev_unary_op_name(op);
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 1, 1, a) != 0) {
        return NULL;
    }
    ev_tensor *x;
    int own;
    if (evpy_operand(st, a[0], NULL, &x, &own) != 0) {
        return NULL;
    }
    ev_exec ex;
    PyObject *res = NULL;
    if (evpy_exec(&ex) == 0) {
        ev_tensor *out;
        int rc = ev_ag_unary(&ex, op, x, &out);
        res = evpy_finish(st, rc, out);
    }
    if (own) {
        ev_tensor_unref(x);
    }
    return res;
}

static PyObject *unary_inplace_fn(evpy_state *st, int op, PyObject *const *args,
                                  Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"input", NULL};
    PyObject *a[1];
    const char *fn = ev_unary_op_name(op);
    ev_tensor *x;
    ev_exec ex;
    if (evpy_parse_args(fn, args, nargs, kwnames, names, 1, 1, a) != 0 ||
        !(x = evpy_need_tensor(fn, a[0])) || evpy_exec(&ex) != 0) {
        return NULL;
    }
    int rc = ev_ag_unary_(&ex, op, x);
    if (rc) {
        return evpy_raise(rc);
    }
    if (evpy_maybe_sync(x) != 0) {
        return NULL;
    }
    return Py_NewRef(a[0]);
}

static PyObject *evpy_op_table(PyObject *mod, PyObject *Py_UNUSED(ignored));

/* ---------------------------------------------------- functions, methods */

#define EV_BINARY(ID, name, rule, inplace, ...)          \
    EVPY_BOTH(name, binary_fn, EV_OP_##ID)               \
    EVPY_INPLACE_##inplace(EVPY_METH(name##_, binary_inplace_fn, EV_OP_##ID))
#define EV_UNARY(ID, name, rule, inplace, ...)           \
    EVPY_BOTH(name, unary_fn, EV_OP_##ID)                \
    EVPY_INPLACE_##inplace(EVPY_METH(name##_, unary_inplace_fn, EV_OP_##ID))
#define EV_REDUCE(ID, name, ...) EVPY_BOTH(name, evpy_reduce_fn, EV_REDUCE_##ID)
#define EV_BINARY_ALIAS(alias, ID, name) EVPY_FN(alias, binary_fn, EV_OP_##ID)
#define EV_UNARY_ALIAS(alias, ID, name) EVPY_FN(alias, unary_fn, EV_OP_##ID)
#define EVPY_BIND_BOTH(name, binding, code) EVPY_BOTH(name, binding, code)
#define EVPY_BIND_FN(name, binding, code) EVPY_FN(name, binding, code)
#define EVPY_BIND_METHOD(name, binding, code) EVPY_METH(name, binding, code)
/* Each EV_FUNC row's impl goes through its grad column: NOT_YET refuses
 * inputs that require grad (no silent wrong gradient), the creation and
 * random rows take requires_grad=; the others call the binding (which
 * calls the autograd layer where the row says FN or VIEW). */
#define EVPY_KIND_clamp 0
#define EVPY_KIND_reduction 0
#define EVPY_KIND_rowwise 0
#define EVPY_KIND_matmul 0
#define EVPY_KIND_view 0
#define EVPY_KIND_copy 0
#define EVPY_KIND_creation 1
#define EVPY_KIND_select 0
#define EVPY_KIND_loss 0
#define EVPY_KIND_random 1
#define EVPY_KIND_interop 0
#define EVPY_KIND_scan 0
#define EVPY_KIND_sort 0
#define EVPY_KIND_reorder 0
#define EVPY_KIND_data_dependent 0
#define EVPY_DIRECT(kind, binding, nm, st, c, a, n, k) binding(st, c, a, n, k)
#define EVPY_DISPATCH_FN(f) EVPY_DIRECT
#define EVPY_DISPATCH_VIEW EVPY_DIRECT
#define EVPY_DISPATCH_NOT_YET(kind, binding, nm, st, c, a, n, k) \
    (evpy_ag_refuse(nm, n + (k ? PyTuple_GET_SIZE(k) : 0), a) ? NULL : binding(st, c, a, n, k))
#define EVPY_DISPATCH_NONDIFF(kind, binding, nm, st, c, a, n, k) \
    (kind ? evpy_call_creation(binding, st, c, a, n, k) : binding(st, c, a, n, k))
#define EV_FUNC(name, binding, code, bound, args, doc, dtypes, ref, example, bench, grad) \
    static PyObject *impl_##name##_##code(evpy_state *st, int c, PyObject *const *a,       \
                                          Py_ssize_t n, PyObject *k)                       \
    {                                                                                      \
        return EVPY_DISPATCH_##grad(EVPY_KIND_##bench, binding, #name, st, c, a, n, k);    \
    }                                                                                      \
    EVPY_BIND_##bound(name, impl_##name##_##code, code)
#define EVPY_INPLACE_INPLACE(x) x
#define EVPY_INPLACE_OUT_OF_PLACE(x)
#include "eagervm/ops.def"

/* What each dtype rule means, for the docstrings (ops.h has the details). */
#define EVPY_RULE_ARITH "the promoted dtype of the inputs (any dtype)"
#define EVPY_RULE_NUMERIC "the (promoted) input dtype; bool is refused"
#define EVPY_RULE_FLOAT "a float: a float input keeps its dtype, integers give float64"
#define EVPY_RULE_INTLIKE "the promoted dtype, bool computed as the smallest integer"
#define EVPY_RULE_COMPARE "bool, comparing in the promoted dtype"
#define EVPY_RULE_LOGICAL "bool, each input taken as x != 0 (NaN counts)"
#define EVPY_RULE_BITWISE "the (promoted) input dtype; bool and integers only"
#define EVPY_RULE_SHIFT "the promoted integer dtype; bool and integers only"
#define EVPY_RULE_SAME "the input's dtype (any dtype)"
#define EVPY_RULE_PREDICATE "bool, testing the input in its own dtype (any dtype)"
#define EVPY_RULE_ACCUMULATE "int64 for bool and integers (wrapping), a float keeps its dtype"
#define EVPY_RULE_FLOAT_ONLY "the input's; a float is required (cast integers first)"
#define EVPY_INPLACE_DOC_INPLACE(name, args) "\nIn place: Tensor." #name "_(" args ")."
#define EVPY_INPLACE_DOC_OUT_OF_PLACE(name, args) "\nNo in-place form."

#define EVPY_DOC(sig, name, rule, inplace, doc, args) \
    #name sig "\n--\n\n" doc "\n\nResult dtype: " EVPY_RULE_##rule "." \
    EVPY_INPLACE_DOC_##inplace(name, args)
#define EVPY_INPLACE_METH_DOC(sig, name) \
    #name "_" sig "\n--\n\nIn place: self = " #name "(self, ...), returning self; the result " \
    "must cast to self's dtype within its kind (bool < integer < float)."

PyMethodDef evpy_table_methods[] = {
#define EV_BINARY(ID, name, rule, inplace, doc, ...) \
    EVPY_FN_ENTRY(name, EVPY_DOC("(input, other)", name, rule, inplace, doc, "other"))
#define EV_UNARY(ID, name, rule, inplace, doc, ...) \
    EVPY_FN_ENTRY(name, EVPY_DOC("(input)", name, rule, inplace, doc, ""))
#define EV_REDUCE(ID, name, rule, doc, ...) \
    EVPY_FN_ENTRY(name, EVPY_DOC("(input, dim=None, keepdim=False)", name, rule, \
                                 OUT_OF_PLACE, doc, ""))
#define EVPY_FN_DOC_BOTH(name, args, doc, dtypes) \
    EVPY_FN_ENTRY(name, #name "(input" args ")\n--\n\n" doc "\n\nResult dtype: " dtypes ".")
#define EVPY_FN_DOC_FN(name, args, doc, dtypes) \
    EVPY_FN_ENTRY(name, #name args "\n--\n\n" doc "\n\nResult dtype: " dtypes ".")
#define EVPY_FN_DOC_METHOD(name, args, doc, dtypes)
#define EV_FUNC(name, binding, code, bound, args, doc, dtypes, ...) \
    EVPY_FN_DOC_##bound(name, args, doc, dtypes)
#define EV_BINARY_ALIAS(alias, ID, name) \
    EVPY_FN_ENTRY(alias, #alias "(input, other)\n--\n\nThe same as " #name ".")
#define EV_UNARY_ALIAS(alias, ID, name) \
    EVPY_FN_ENTRY(alias, #alias "(input)\n--\n\nThe same as " #name ".")
#include "eagervm/ops.def"
    {"_op_table", evpy_op_table, METH_NOARGS,
     "_op_table()\n--\n\nThe op table (include/eagervm/ops.def) as Python data: "
     "{'ops': [row dicts], 'aliases': [(alias, name)], 'operators': [(symbol, name)]}."},
    {NULL},
};

PyMethodDef evpy_tensor_table_methods[] = {
#define EVPY_INPLACE_ENTRY_INPLACE(name, sig) \
    EVPY_METH_ENTRY(name##_, EVPY_INPLACE_METH_DOC(sig, name))
#define EVPY_INPLACE_ENTRY_OUT_OF_PLACE(name, sig)
#define EV_BINARY(ID, name, rule, inplace, doc, ...)                                      \
    EVPY_METH_ENTRY(name, EVPY_DOC("($self, other)", name, rule, inplace, doc, "other")) \
    EVPY_INPLACE_ENTRY_##inplace(name, "($self, other)")
#define EV_UNARY(ID, name, rule, inplace, doc, ...)                             \
    EVPY_METH_ENTRY(name, EVPY_DOC("($self)", name, rule, inplace, doc, "")) \
    EVPY_INPLACE_ENTRY_##inplace(name, "($self)")
#define EV_REDUCE(ID, name, rule, doc, ...)                                           \
    EVPY_METH_ENTRY(name, EVPY_DOC("($self, dim=None, keepdim=False)", name, rule, \
                                   OUT_OF_PLACE, doc, ""))
#define EVPY_METH_DOC_BOTH(name, args, doc, dtypes) \
    EVPY_METH_ENTRY(name, #name "($self" args ")\n--\n\n" doc "\n\nResult dtype: " dtypes ".")
#define EVPY_METH_DOC_FN(name, args, doc, dtypes)
#define EVPY_METH_DOC_METHOD(name, args, doc, dtypes) EVPY_METH_DOC_BOTH(name, args, doc, dtypes)
#define EV_FUNC(name, binding, code, bound, args, doc, dtypes, ...) \
    EVPY_METH_DOC_##bound(name, args, doc, dtypes)
#include "eagervm/ops.def"
    {NULL},
};

/* -------------------------------------------------------------- operators */

#define EVPY_NB_BINARY(slot, ID)                                           \
    static PyObject *nb_##slot(PyObject *a, PyObject *b)                   \
    {                                                                      \
        if (!evpy_operand_like(a) || !evpy_operand_like(b)) {              \
            Py_RETURN_NOTIMPLEMENTED;                                      \
        }                                                                  \
        return evpy_binary(evpy_state_of_pair(a, b), EV_OP_##ID, a, b);    \
    }                                                                      \
    static PyObject *nb_inplace_##slot(PyObject *a, PyObject *b)           \
    {                                                                      \
        if (!evpy_tensor_check(a) || !evpy_operand_like(b)) {              \
            Py_RETURN_NOTIMPLEMENTED;                                      \
        }                                                                  \
        return binary_inplace(evpy_state_of_pair(a, b), EV_OP_##ID, a, b); \
    }
/* The ternary slot (pow): Python passes Py_None when no modulus is given. */
#define EVPY_NB_TERNARY(slot, ID)                                                        \
    static PyObject *nb_##slot(PyObject *a, PyObject *b, PyObject *mod)                  \
    {                                                                                    \
        if (mod != Py_None) {                                                            \
            PyErr_SetString(PyExc_TypeError, #slot "() with a modulus is not supported"); \
            return NULL;                                                                 \
        }                                                                                \
        if (!evpy_operand_like(a) || !evpy_operand_like(b)) {                            \
            Py_RETURN_NOTIMPLEMENTED;                                                    \
        }                                                                                \
        return evpy_binary(evpy_state_of_pair(a, b), EV_OP_##ID, a, b);                  \
    }                                                                                    \
    static PyObject *nb_inplace_##slot(PyObject *a, PyObject *b, PyObject *mod)          \
    {                                                                                    \
        if (mod != Py_None || !evpy_tensor_check(a) || !evpy_operand_like(b)) {          \
            Py_RETURN_NOTIMPLEMENTED;                                                    \
        }                                                                                \
        return binary_inplace(evpy_state_of_pair(a, b), EV_OP_##ID, a, b);               \
    }
#define EVPY_NB_UNARY(slot, ID)                                          \
    static PyObject *nb_##slot(PyObject *self)                           \
    {                                                                    \
        PyObject *args[1] = {self};                                      \
        return unary_fn(evpy_state_of_type(Py_TYPE(self)), EV_OP_##ID, args, 1, NULL); \
    }
#define EV_BINARY_OPERATOR(slot, ID, symbol) EVPY_NB_BINARY(slot, ID)
#define EV_BINARY_OPERATOR3(slot, ID, symbol) EVPY_NB_TERNARY(slot, ID)
#define EV_UNARY_OPERATOR(slot, ID, symbol) EVPY_NB_UNARY(slot, ID)
#include "eagervm/ops.def"

static PyObject *richcompare(PyObject *a, PyObject *b, int op)
{
    static const int ops[] = {
#define EV_COMPARE_OPERATOR(pyop, ID, symbol) [pyop] = EV_OP_##ID,
#include "eagervm/ops.def"
    };
    if (!evpy_operand_like(b)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    return evpy_binary(evpy_state_of_pair(a, b), ops[op], a, b);
}

PyType_Slot evpy_tensor_table_slots[] = {
#define EV_BINARY_OPERATOR(slot, ID, symbol) \
    {Py_nb_##slot, nb_##slot}, {Py_nb_inplace_##slot, nb_inplace_##slot},
#define EV_BINARY_OPERATOR3(slot, ID, symbol) \
    {Py_nb_##slot, nb_##slot}, {Py_nb_inplace_##slot, nb_inplace_##slot},
#define EV_UNARY_OPERATOR(slot, ID, symbol) {Py_nb_##slot, nb_##slot},
#include "eagervm/ops.def"
    {Py_tp_richcompare, richcompare},
    {0, NULL},
};

/* ------------------------------------------------------------- the table */

typedef struct op_row {
    const char *name, *family, *rule, *doc, *ref, *domain, *bench, *grad;
    int inplace;
    const char *bound, *args, *example; /* EV_FUNC rows; "" for the others */
} op_row;

#define EVPY_HAS_INPLACE_INPLACE 1
#define EVPY_HAS_INPLACE_OUT_OF_PLACE 0
static const op_row op_rows[] = {
#define EV_BINARY(ID, name, rule, inplace, doc, ref, domain, bench, grad) \
    {#name, "binary", #rule, doc, ref, #domain, #bench, #grad, EVPY_HAS_INPLACE_##inplace, \
     "", "", ""},
#define EV_UNARY(ID, name, rule, inplace, doc, ref, domain, bench, grad) \
    {#name, "unary", #rule, doc, ref, #domain, #bench, #grad, EVPY_HAS_INPLACE_##inplace, \
     "", "", ""},
#define EV_REDUCE(ID, name, rule, doc, ref, domain, bench, grad) \
    {#name, "reduce", #rule, doc, ref, #domain, #bench, #grad, 0, "", "", ""},
#define EV_FUNC(name, binding, code, bound, args, doc, dtypes, ref, example, bench, grad) \
    {#name, "func", "", doc, ref, "", #bench, #grad, 0, #bound, args, example},
#include "eagervm/ops.def"
};

static const char *const op_aliases[][2] = {
#define EV_BINARY_ALIAS(alias, ID, name) {#alias, #name},
#define EV_UNARY_ALIAS(alias, ID, name) {#alias, #name},
#include "eagervm/ops.def"
};

typedef struct op_operator {
    const char *symbol;
    int unary, op;
} op_operator;

static const op_operator op_operators[] = {
#define EV_BINARY_OPERATOR(slot, ID, symbol) {symbol, 0, EV_OP_##ID},
#define EV_BINARY_OPERATOR3(slot, ID, symbol) {symbol, 0, EV_OP_##ID},
#define EV_COMPARE_OPERATOR(pyop, ID, symbol) {symbol, 0, EV_OP_##ID},
#define EV_UNARY_OPERATOR(slot, ID, symbol) {symbol, 1, EV_OP_##ID},
#include "eagervm/ops.def"
};

#define EVPY_COUNT(a) (sizeof(a) / sizeof((a)[0]))

static PyObject *evpy_op_table(PyObject *mod, PyObject *Py_UNUSED(ignored))
{
    PyObject *ops = PyList_New(0), *aliases = PyList_New(0), *opers = PyList_New(0);
    PyObject *res = NULL;
    if (!ops || !aliases || !opers) {
        goto done;
    }
    for (size_t i = 0; i < EVPY_COUNT(op_rows); i++) {
        const op_row *r = &op_rows[i];
        PyObject *d = Py_BuildValue(
            "{sssssssssssssssssOssssss}", "name", r->name, "family", r->family, "rule",
            r->rule, "doc", r->doc, "ref", r->ref, "domain", r->domain, "bench", r->bench,
            "grad", r->grad, "inplace", r->inplace ? Py_True : Py_False, "bound", r->bound,
            "args", r->args, "example", r->example);
        if (!d || PyList_Append(ops, d) < 0) {
            Py_XDECREF(d);
            goto done;
        }
        Py_DECREF(d);
    }
    for (size_t i = 0; i < EVPY_COUNT(op_aliases); i++) {
        PyObject *t = Py_BuildValue("(ss)", op_aliases[i][0], op_aliases[i][1]);
        if (!t || PyList_Append(aliases, t) < 0) {
            Py_XDECREF(t);
            goto done;
        }
        Py_DECREF(t);
    }
    for (size_t i = 0; i < EVPY_COUNT(op_operators); i++) {
        const op_operator *o = &op_operators[i];
        PyObject *t = Py_BuildValue("(ss)", o->symbol, o->unary ? ev_unary_op_name(o->op)
                                                                 : ev_binary_op_name(o->op));
        if (!t || PyList_Append(opers, t) < 0) {
            Py_XDECREF(t);
            goto done;
        }
        Py_DECREF(t);
    }
    res = Py_BuildValue("{sOsOsO}", "ops", ops, "aliases", aliases, "operators", opers);
done:
    Py_XDECREF(ops);
    Py_XDECREF(aliases);
    Py_XDECREF(opers);
    return res;
}
