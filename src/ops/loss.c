/* Ops driven by class indices: one_hot and cross_entropy. As in index.c,
 * shapes and dtypes are checked on the issuing thread and the index values
 * are read only by the kernel, so an index out of range fails the
 * instruction with EV_EINDEX (DESIGN rule 6) and poisons the output instead
 * of forcing a sync at the call. */
/* As in unary.c: the cheap vectorizer cost model at -O2, both sides of a
 * float select computed, and a * b + c kept two roundings in every clone,
 * for the float32 log-sum-exp rows below. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap", "no-trapping-math", "fp-contract=off")
#endif

#include <math.h>
#include <string.h>

#include "ops/ops-impl.h"
#include "ops/vmath.h"

/* ---------------------------------------------------------------- helpers */

/* An index of any integer dtype (checked on the issuing side), widened. */
static inline int64_t load_index(const char *p, ev_dtype d)
{
    switch (d) {
    case EV_INT32: return *(const int32_t *)p;
    case EV_UINT8: return *(const uint8_t *)p;
    case EV_INT8: return *(const int8_t *)p;
    case EV_INT16: return *(const int16_t *)p;
    default: return *(const int64_t *)p;
    }
}

static inline double load_float(const char *p, ev_dtype d)
{
    return d == EV_FLOAT32 ? (double)*(const float *)p : *(const double *)p;
}

static int check_class_index(const char *name, const char *what, const ev_tensor *t)
{
    if (ev_dtype_get_info(t->dtype)->kind != EV_KIND_INT) {
        return ev__set_message(EV_ETYPE, "%s: %s must have an integer dtype, not %s", name, what,
                               ev_dtype_name(t->dtype));
    }
    return 0;
}

/* ---------------------------------------------------------------- one_hot */

typedef struct onehot_arg {
    ev_tensor *index, *out; /* both referenced; out is contiguous int64 */
    int64_t classes;
} onehot_arg;
_Static_assert(sizeof(onehot_arg) <= EV_INLINE_ARG_SIZE, "onehot_arg must travel inline");

static void onehot_drop(void *p)
{
    onehot_arg *a = p;
    ev_tensor_unref(a->index);
    ev_tensor_unref(a->out);
}

static int onehot_kernel(void *p, ev_kctx *kc)
{
    onehot_arg *a = p;
    const ev_tensor *ix = a->index;
    if (a->out->numel == 0) {
        return 0;
    }
    int64_t *o = (int64_t *)ev__tensor_ptr(a->out);
    memset(o, 0, (size_t)a->out->numel * sizeof *o);
    int64_t esz = (int64_t)ev__dsize(ix->dtype);
    const char *I = ev__tensor_ptr(ix);
    /* Walks index in C order (any strides) with an odometer; row e of the
     * contiguous output belongs to element e. */
    int64_t idx[EV_MAX_DIMS] = {0}, off = 0;
    for (int64_t e = 0; e < ix->numel; e++) {
        int64_t v = load_index(I + off, ix->dtype);
        if (v < 0 || v >= a->classes) {
            return ev_kctx_fail(kc, EV_EINDEX, "one_hot: index %lld is out of range for "
                                "num_classes %lld", (long long)v, (long long)a->classes);
        }
        o[e * a->classes + v] = 1;
        for (int d = ix->ndim - 1; d >= 0; d--) {
            off += ix->strides[d] * esz;
            if (++idx[d] < ix->shape[d]) {
                break;
            }
            off -= ix->strides[d] * esz * ix->shape[d];
            idx[d] = 0;
        }
    }
    return 0;
}

int ev_one_hot(const ev_exec *ex, ev_tensor *index, int64_t num_classes, ev_tensor **out)
{
    const char *name = "one_hot";
    int rc;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "index", index)) ||
        (rc = check_class_index(name, "index", index))) {
        return rc;
    }
    if (!out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", name);
    }
    if (num_classes <= 0) {
        return ev__set_message(EV_EINVAL, "%s: num_classes must be > 0, not %lld (infer it "
                               "from max(index) + 1 before the call)", name,
                               (long long)num_classes);
    }
    if (index->ndim + 1 > EV_MAX_DIMS) {
        return ev__set_message(EV_EINVAL, "%s: index has %d dimensions; the result would "
                               "exceed the maximum of %d", name, index->ndim, EV_MAX_DIMS);
    }
    int64_t shape[EV_MAX_DIMS];
    memcpy(shape, index->shape, sizeof(int64_t) * (size_t)index->ndim);
    shape[index->ndim] = num_classes;
    ev_tensor *dst;
    if ((rc = ev__check_shape(name, index->ndim + 1, shape)) ||
        (rc = ev__tensor_new(name, ex, EV_INT64, index->ndim + 1, shape, &dst))) {
        return rc;
    }
    onehot_arg a = {ev_tensor_ref(index), ev_tensor_ref(dst), num_classes};
    rc = ev__submit(ex, name, onehot_kernel, &a, sizeof a, onehot_drop, &a.index, 1, &a.out,
                    1);
    if (rc) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

/* ---------------------------------------------------------- cross_entropy */

static const char *const reduction_names[EV_REDUCTION_COUNT] = {
#define EV_REDUCTION_STR(id, name) #name,
    EV_REDUCTION_MAP(EV_REDUCTION_STR)
#undef EV_REDUCTION_STR
};

const char *ev_reduction_name(int reduction)
{
    return reduction >= 0 && reduction < EV_REDUCTION_COUNT ? reduction_names[reduction]
                                                            : "invalid";
}

/* The checks cross_entropy and its backward share (shapes apart). */
static int check_xent_args(const char *name, const ev_exec *ex, const ev_tensor *logits,
                           const ev_tensor *target, int reduction, ev_tensor *const *out)
{
    int rc;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "logits", logits)) ||
        (rc = ev__check_tensor(name, "target", target))) {
        return rc;
    }
    if (!out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", name);
    }
    if (reduction < 0 || reduction >= EV_REDUCTION_COUNT) {
        return ev__set_message(EV_EINVAL, "%s: invalid reduction %d (expected none, mean or "
                               "sum)", name, reduction);
    }
    if (!ev_dtype_is_float(logits->dtype)) {
        return ev__set_message(EV_ETYPE, "%s: logits must be float32 or float64, not %s",
                               name, ev_dtype_name(logits->dtype));
    }
    return check_class_index(name, "target", target);
}

/* Keeps in *bad the smallest sample with an invalid target (lines run on
 * several threads; the error names the first). */
static void note_bad_sample(_Atomic int64_t *bad, int64_t i)
{
    int64_t cur = atomic_load(bad);
    while (i < cur && !atomic_compare_exchange_weak(bad, &cur, i)) {
    }
}

typedef struct xent_arg {
    ev_tensor *logits, *target, *out; /* referenced */
    int reduction;
} xent_arg;
_Static_assert(sizeof(xent_arg) <= EV_INLINE_ARG_SIZE, "xent_arg must travel inline");

static void xent_drop(void *p)
{
    xent_arg *a = p;
    ev_tensor_unref(a->logits);
    ev_tensor_unref(a->target);
    ev_tensor_unref(a->out);
}

/* log(sum(exp(x))) of a dense float32 row, computed as m + log(sum(exp(x -
 * m))) with m the row's max (NaN if the row has one, which makes the sum
 * NaN), exp_f32 a block at a time, the sum in float64 lanes.
 * An infinite max makes x - m NaN somewhere, so the loss NaN, as the
 * float64 formula below gives. Like reduce.c's logsumexp, whose lane
 * helpers are static there. */
#define LSE_LANES 32
#define LSE_BLOCK 1024
EV__SIMD_CLONES
static double lse_row_f32(const float *x, int64_t n)
{
    float m = ev__extreme_f32(x, n, 1); /* NaN if x has one: so is the loss */
    double r[LSE_LANES] = {0};
    double s = 0;
    float e[LSE_BLOCK];
    for (int64_t b = 0; b < n; b += LSE_BLOCK) {
        int64_t len = n - b < LSE_BLOCK ? n - b : LSE_BLOCK;
        for (int64_t k = 0; k < len; k++) {
            e[k] = exp_f32(x[b + k] - m);
        }
        int64_t k = 0;
        for (; k + LSE_LANES <= len; k += LSE_LANES) {
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 64
#endif
            for (int j = 0; j < LSE_LANES; j++) {
                r[j] += (double)e[k + j];
            }
        }
        for (; k < len; k++) {
            s += (double)e[k];
        }
    }
    for (int j = 0; j < LSE_LANES; j++) {
        s += r[j];
    }
    return (double)m + log(s);
}

/* log(sum(exp(x))) of a row of c elements c_stride bytes apart, in
 * float64 with libm (float64 logits, or a strided float32 row). */
static double lse_row_any(const char *row, int64_t c, int64_t cs, ev_dtype dt)
{
    double m = -INFINITY;
    for (int64_t j = 0; j < c; j++) {
        double v = load_float(row + j * cs, dt);
        /* NaN wins, so a NaN logit gives a NaN loss. */
        m = v > m || v != v ? v : m;
    }
    double s = 0;
    for (int64_t j = 0; j < c; j++) {
        s += exp(load_float(row + j * cs, dt) - m);
    }
    return m + log(s);
}

/* Rows [lo, hi) of a cross-entropy: each sample's loss into loss[i] (in
 * float64), the first invalid target kept in bad. */
typedef struct xent_job {
    const xent_arg *a;
    double *loss;
    _Atomic int64_t bad; /* the smallest sample with an invalid target, or INT64_MAX */
} xent_job;

static void xent_rows(int64_t lo, int64_t hi, void *p)
{
    xent_job *j = p;
    const ev_tensor *x = j->a->logits, *t = j->a->target;
    int64_t c = x->shape[1];
    int64_t xsz = (int64_t)ev__dsize(x->dtype), tsz = (int64_t)ev__dsize(t->dtype);
    int64_t rs = x->strides[0] * xsz, cs = x->strides[1] * xsz, ts = t->strides[0] * tsz;
    const char *X = ev__tensor_ptr(x), *T = ev__tensor_ptr(t);
    int dense = x->dtype == EV_FLOAT32 && (cs == xsz || c == 1);
    for (int64_t i = lo; i < hi; i++) {
        int64_t k = load_index(T + i * ts, t->dtype);
        if (k < 0 || k >= c) {
            note_bad_sample(&j->bad, i);
            return;
        }
        const char *row = X + i * rs;
        double lse = dense ? lse_row_f32((const float *)row, c) : lse_row_any(row, c, cs, x->dtype);
        j->loss[i] = lse - load_float(row + k * cs, x->dtype);
    }
}

/* Rows are read in place through their strides; dense float32 rows by the
 * vectorized lse_row_f32. Rows split over the intra-op threads, each loss
 * kept, then stored or summed in order (the same total whatever the
 * split). */
static int xent_kernel(void *p, ev_kctx *kc)
{
    xent_arg *a = p;
    const ev_tensor *x = a->logits, *t = a->target, *o = a->out;
    int64_t n = x->shape[0], c = x->shape[1];
    char *O = ev__tensor_ptr(o);
    double *loss = n ? ev__malloc(sizeof(double) * (size_t)n) : NULL;
    if (n && !loss) {
        return ev_kctx_fail(kc, EV_ENOMEM, "cross_entropy: cannot allocate a buffer");
    }
    xent_job j = {a, loss, INT64_MAX};
    /* Rows of at least EV__PARALLEL_GRAIN / 8 elements a chunk: exp makes
     * each element dearer than a copy. */
    int64_t grain = (EV__PARALLEL_GRAIN / 8 + c) / (c + 1);
    ev__parallel_for(n, grain, xent_rows, &j);
    int64_t bad = atomic_load(&j.bad);
    if (bad != INT64_MAX) {
        int64_t tsz = (int64_t)ev__dsize(t->dtype);
        int64_t k = load_index(ev__tensor_ptr(t) + bad * t->strides[0] * tsz, t->dtype);
        ev__free(loss);
        return ev_kctx_fail(kc, EV_EINDEX, "cross_entropy: target %lld is out of range "
                            "for %lld classes (sample %lld)", (long long)k, (long long)c,
                            (long long)bad);
    }
    if (a->reduction == EV_REDUCTION_NONE) {
        int64_t osz = (int64_t)ev__dsize(o->dtype);
        ev__cast_strided(O, o->dtype, o->strides[0] * osz, loss, EV_FLOAT64, sizeof(double), n);
    } else {
        double total = 0;
        for (int64_t i = 0; i < n; i++) {
            total += loss[i];
        }
        /* 0/0 gives NaN for the mean of no samples, as PyTorch. */
        double r = a->reduction == EV_REDUCTION_MEAN ? total / (double)n : total;
        ev__cast_strided(O, o->dtype, 0, &r, EV_FLOAT64, 0, 1);
    }
    ev__free(loss);
    return 0;
}

int ev_cross_entropy(const ev_exec *ex, ev_tensor *logits, ev_tensor *target, int reduction,
                     ev_tensor **out)
{
    const char *name = "cross_entropy";
    int rc;
    if ((rc = check_xent_args(name, ex, logits, target, reduction, out))) {
        return rc;
    }
    char sl[EV__SHAPE_STR_SIZE], st[EV__SHAPE_STR_SIZE];
    ev__shape_str(logits->ndim, logits->shape, sl, sizeof sl);
    ev__shape_str(target->ndim, target->shape, st, sizeof st);
    if (logits->ndim != 2 || target->ndim != 1 || target->shape[0] != logits->shape[0]) {
        return ev__set_message(EV_EINVAL, "%s: expected logits (N, C) and target (N,), got "
                               "logits %s and target %s", name, sl, st);
    }
    int none = reduction == EV_REDUCTION_NONE;
    ev_tensor *dst;
    if ((rc = ev__tensor_new(name, ex, logits->dtype, none ? 1 : 0, logits->shape, &dst))) {
        return rc;
    }
    xent_arg a = {ev_tensor_ref(logits), ev_tensor_ref(target), ev_tensor_ref(dst), reduction};
    ev_tensor *reads[2] = {a.logits, a.target};
    rc = ev__submit(ex, name, xent_kernel, &a, sizeof a, xent_drop, reads, 2, &a.out, 1);
    if (rc) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

/* ------------------------------------------- the gradient of cross_entropy */

typedef struct xent_bw_arg {
    ev_tensor *logits, *target, *grad, *out; /* referenced */
    int reduction;
} xent_bw_arg;
_Static_assert(sizeof(xent_bw_arg) <= EV_INLINE_ARG_SIZE, "xent_bw_arg must travel inline");

static void xent_bw_drop(void *p)
{
    xent_bw_arg *a = p;
    ev_tensor_unref(a->logits);
    ev_tensor_unref(a->target);
    ev_tensor_unref(a->grad);
    ev_tensor_unref(a->out);
}

typedef struct xent_bw_job {
    const xent_bw_arg *a;
    _Atomic int64_t bad;
} xent_bw_job;

/* Rows [lo, hi): out = (softmax(x) - onehot(t)) * scale, the softmax as
 * exp(x - m) / sum in float64 (m the row max), rounded once per element. */
static void xent_bw_rows(int64_t lo, int64_t hi, void *p)
{
    xent_bw_job *j = p;
    const xent_bw_arg *a = j->a;
    const ev_tensor *x = a->logits, *t = a->target, *g = a->grad, *o = a->out;
    int64_t n = x->shape[0], c = x->shape[1];
    int64_t xsz = (int64_t)ev__dsize(x->dtype), tsz = (int64_t)ev__dsize(t->dtype);
    int64_t rs = x->strides[0] * xsz, cs = x->strides[1] * xsz, ts = t->strides[0] * tsz;
    int64_t gs = g->ndim ? g->strides[0] * (int64_t)ev__dsize(g->dtype) : 0;
    const char *X = ev__tensor_ptr(x), *T = ev__tensor_ptr(t), *Gp = ev__tensor_ptr(g);
    char *O = ev__tensor_ptr(o);
    int dense = x->dtype == EV_FLOAT32 && (cs == xsz || c == 1);
    for (int64_t i = lo; i < hi; i++) {
        int64_t k = load_index(T + i * ts, t->dtype);
        if (k < 0 || k >= c) {
            note_bad_sample(&j->bad, i);
            return;
        }
        double scale = load_float(Gp + i * gs, g->dtype);
        if (a->reduction == EV_REDUCTION_MEAN) {
            scale /= (double)n;
        }
        const char *row = X + i * rs;
        char *orow = O + i * c * xsz;
        if (dense) {
            const float *xr = (const float *)row;
            float *orf = (float *)orow;
            double lse = lse_row_f32(xr, c);
            for (int64_t q = 0; q < c; q++) {
                orf[q] = (float)(exp((double)xr[q] - lse) * scale);
            }
            orf[k] = (float)((exp((double)xr[k] - lse) - 1.0) * scale);
        } else {
            double lse = lse_row_any(row, c, cs, x->dtype);
            for (int64_t q = 0; q < c; q++) {
                double v = (exp(load_float(row + q * cs, x->dtype) - lse) - (q == k)) * scale;
                ev__cast_strided(orow + q * xsz, o->dtype, 0, &v, EV_FLOAT64, 0, 1);
            }
        }
    }
}

static int xent_bw_kernel(void *p, ev_kctx *kc)
{
    xent_bw_arg *a = p;
    const ev_tensor *x = a->logits, *t = a->target;
    int64_t n = x->shape[0], c = x->shape[1];
    xent_bw_job j = {a, INT64_MAX};
    ev__parallel_for(n, (EV__PARALLEL_GRAIN / 8 + c) / (c + 1), xent_bw_rows, &j);
    int64_t bad = atomic_load(&j.bad);
    if (bad != INT64_MAX) {
        int64_t tsz = (int64_t)ev__dsize(t->dtype);
        int64_t k = load_index(ev__tensor_ptr(t) + bad * t->strides[0] * tsz, t->dtype);
        return ev_kctx_fail(kc, EV_EINDEX, "cross_entropy backward: target %lld is out of "
                            "range for %lld classes (sample %lld)", (long long)k,
                            (long long)c, (long long)bad);
    }
    return 0;
}

int ev_cross_entropy_backward(const ev_exec *ex, ev_tensor *logits, ev_tensor *target,
                              ev_tensor *grad, int reduction, ev_tensor **out)
{
    const char *name = "cross_entropy_backward";
    int rc;
    if ((rc = check_xent_args(name, ex, logits, target, reduction, out)) ||
        (rc = ev__check_tensor(name, "grad", grad))) {
        return rc;
    }
    if (!ev_dtype_is_float(grad->dtype)) {
        return ev__set_message(EV_ETYPE, "%s: grad must be float32 or float64, not %s", name,
                               ev_dtype_name(grad->dtype));
    }
    int none = reduction == EV_REDUCTION_NONE;
    if (logits->ndim != 2 || target->ndim != 1 || target->shape[0] != logits->shape[0] ||
        grad->ndim != (none ? 1 : 0) || (none && grad->shape[0] != logits->shape[0])) {
        char sl[EV__SHAPE_STR_SIZE], st[EV__SHAPE_STR_SIZE], sg[EV__SHAPE_STR_SIZE];
        ev__shape_str(logits->ndim, logits->shape, sl, sizeof sl);
        ev__shape_str(target->ndim, target->shape, st, sizeof st);
        ev__shape_str(grad->ndim, grad->shape, sg, sizeof sg);
        return ev__set_message(EV_EINVAL, "%s: expected logits (N, C), target (N,) and grad %s, "
                               "got %s, %s and %s", name, none ? "(N,)" : "0-d", sl, st, sg);
    }
    ev_tensor *dst;
    if ((rc = ev__tensor_new(name, ex, logits->dtype, 2, logits->shape, &dst))) {
        return rc;
    }
    xent_bw_arg a = {ev_tensor_ref(logits), ev_tensor_ref(target), ev_tensor_ref(grad),
                     ev_tensor_ref(dst), reduction};
    ev_tensor *reads[3] = {a.logits, a.target, a.grad};
    rc = ev__submit(ex, name, xent_bw_kernel, &a, sizeof a, xent_bw_drop, reads, 3, &a.out, 1);
    if (rc) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}
