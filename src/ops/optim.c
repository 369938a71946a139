/* Fused optimizer updates (SGD, Adam, AdamW): the checks on the issuing
 * thread, and one instruction per parameter whose loop reads grad and
 * rewrites param and the state buffers in one pass, in the order of float
 * operations of PyTorch's single-tensor optimizers (see ops.h). */
/* As in unary.c: vectorize with the "cheap" cost model (GCC's -O2 default
 * leaves these loops scalar), no-trapping-math so that the selects (lerp's
 * two forms, maximum) become blends, and fp-contract=off so that every CPU
 * computes the same bits (see EV__SIMD_CLONES). The build adds
 * -fno-math-errno for this file: sqrt is then the instruction. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap", "no-trapping-math", \
                     "fp-contract=off")
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/ops-impl.h"

/* ------------------------------------------------------------- arguments */

/* The tensors of an update, by role: [0] param, [1] grad, then the state
 * buffers (SGD: the momentum buffer; Adam: exp_avg, exp_avg_sq and
 * max_exp_avg_sq). */
#define OPT_MAX_TENSORS 5

typedef struct opt_arg opt_arg;
/* A loop over elements [lo, hi) of an update. */
typedef void (*opt_range_fn)(const opt_arg *a, int64_t lo, int64_t hi);

/* What the kernel needs: pointers only (the engine keeps the storages alive
 * until the instruction has run, as for the dense elementwise ops), so the
 * worker never reads a tensor struct. */
struct opt_arg {
    opt_range_fn range;         /* the loop of the update's dtype */
    char *ptr[OPT_MAX_TENSORS]; /* borrowed; NULL for an unused buffer */
    int64_t numel;
    int variant;                /* which loop (SGD_* or ADAM_* codes) */
    double s[8];                /* scalar parameters, converted in the loop */
};
_Static_assert(sizeof(opt_arg) <= EV_INLINE_ARG_SIZE, "opt_arg must travel inline");

/* Checks the tensors of an update: names[k] names ts[k] in messages; NULL
 * entries of ts are skipped (ts[0], the param, and ts[1] are required). */
static int check_tensors(const char *fn, ev_tensor *const *ts, const char *const *names, int n)
{
    for (int k = 0; k < 2; k++) {
        int rc = ev__check_tensor(fn, names[k], ts[k]);
        if (rc) {
            return rc;
        }
    }
    const ev_tensor *p = ts[0];
    if (p->dtype != EV_FLOAT32 && p->dtype != EV_FLOAT64) {
        return ev__set_message(EV_ETYPE, "%s: param must be float32 or float64, not %s", fn,
                               ev_dtype_name(p->dtype));
    }
    for (int k = 1; k < n; k++) {
        const ev_tensor *t = ts[k];
        char sa[EV__SHAPE_STR_SIZE], sb[EV__SHAPE_STR_SIZE];
        if (!t) {
            continue;
        }
        if (t->dtype != p->dtype) {
            return ev__set_message(EV_ETYPE, "%s: %s has dtype %s, expected param's %s", fn,
                                   names[k], ev_dtype_name(t->dtype), ev_dtype_name(p->dtype));
        }
        if (t->ndim != p->ndim ||
            memcmp(t->shape, p->shape, (size_t)p->ndim * sizeof(int64_t)) != 0) {
            return ev__set_message(EV_EINVAL, "%s: %s has shape %s, expected param's %s", fn,
                                   names[k], ev__shape_str(t->ndim, t->shape, sa, sizeof sa),
                                   ev__shape_str(p->ndim, p->shape, sb, sizeof sb));
        }
    }
    if (p->numel == 0) {
        return 0; /* nothing is read or written: layouts do not matter */
    }
    if (!ev__tensor_is_dense(p)) {
        return ev__set_message(EV_EINVAL, "%s: param must be dense (contiguous, or a "
                               "permutation of a contiguous layout such as a transpose)", fn);
    }
    for (int k = 1; k < n; k++) {
        if (ts[k] && !ev__same_strides(ts[k], p)) {
            return ev__set_message(EV_EINVAL, "%s: %s must be laid out as param (the same "
                                   "strides)", fn, names[k]);
        }
    }
    for (int j = 0; j < n; j++) {
        for (int k = j + 1; k < n; k++) {
            if (ts[j] && ts[k] && ev__may_overlap(ts[j], ts[k])) {
                return ev__set_message(EV_EINVAL, "%s: %s and %s share memory (each must be "
                                       "a tensor of its own)", fn, names[j], names[k]);
            }
        }
    }
    return 0;
}

/* x must be >= 0 (and not NaN); what names it as torch.optim does. */
static int check_nonneg(const char *fn, const char *what, double x)
{
    if (!(x >= 0)) {
        return ev__set_message(EV_EINVAL, "%s: invalid %s: %g (expected >= 0)", fn, what, x);
    }
    return 0;
}

static void opt_chunk(int64_t lo, int64_t hi, void *p)
{
    const opt_arg *a = p;
    a->range(a, lo, hi);
}

static int opt_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    const opt_arg *a = p;
    ev__parallel_for(a->numel, EV__PARALLEL_GRAIN, opt_chunk, (void *)a);
    return 0;
}

/* Issues the update a (prepared): reads grad (ts[1]), writes param and the
 * buffers. */
static int opt_submit(const ev_exec *ex, const char *name, opt_arg *a, ev_tensor *const *ts,
                      int n)
{
    ev_tensor *writes[OPT_MAX_TENSORS];
    int nw = 0;
    writes[nw++] = ts[0];
    for (int k = 2; k < n; k++) {
        writes[nw++] = ts[k]; /* NULL entries are skipped */
    }
    return ev__submit(ex, name, opt_kernel, a, sizeof *a, NULL, &ts[1], 1, writes, nw);
}

/* ------------------------------------------------------------------- SGD */

/* The variant: which terms the loop has, so that each loop is branch-free. */
enum { SGD_WD = 1, SGD_MOM_FIRST = 2, SGD_MOM_RUN = 4, SGD_NESTEROV = 8 };
/* s[]: 0 -lr, 1 momentum, 2 1 - dampening, 3 weight_decay, 4 -1 or 1 */

/* One loop of SGD over [0, n), its variant fixed by constants WD, MOM
 * (0 none, 1 first step, 2 running) and NEST, so each case of the switch
 * below compiles to its own vectorised loop. */
#define SGD_LOOP(T, WD, MOM, NEST)                                         \
    for (int64_t i = 0; i < n; i++) {                                      \
        T g = gr[i] * sgn;                                                 \
        if (WD) {                                                          \
            g = g + wd * p[i];                                             \
        }                                                                  \
        if ((MOM) == 1) {                                                  \
            b[i] = g;                                                      \
        } else if ((MOM) == 2) {                                           \
            b[i] = b[i] * mom + damp1 * g;                                 \
        }                                                                  \
        if ((MOM) != 0) {                                                  \
            g = (NEST) ? g + mom * b[i] : b[i];                            \
        }                                                                  \
        p[i] = p[i] + nlr * g;                                             \
    }

#define SGD_CASES(T)                                                                  \
    switch (a->variant) {                                                            \
    case 0: SGD_LOOP(T, 0, 0, 0) break;                                              \
    case SGD_WD: SGD_LOOP(T, 1, 0, 0) break;                                         \
    case SGD_MOM_FIRST: SGD_LOOP(T, 0, 1, 0) break;                                  \
    case SGD_MOM_FIRST | SGD_WD: SGD_LOOP(T, 1, 1, 0) break;                         \
    case SGD_MOM_FIRST | SGD_NESTEROV: SGD_LOOP(T, 0, 1, 1) break;                   \
    case SGD_MOM_FIRST | SGD_NESTEROV | SGD_WD: SGD_LOOP(T, 1, 1, 1) break;          \
    case SGD_MOM_RUN: SGD_LOOP(T, 0, 2, 0) break;                                    \
    case SGD_MOM_RUN | SGD_WD: SGD_LOOP(T, 1, 2, 0) break;                           \
    case SGD_MOM_RUN | SGD_NESTEROV: SGD_LOOP(T, 0, 2, 1) break;                     \
    default: SGD_LOOP(T, 1, 2, 1) break; /* SGD_MOM_RUN | SGD_NESTEROV | SGD_WD */  \
    }

/* The loops take their arrays as restrict parameters (GCC drops restrict
 * on locals loaded from memory, and would then test every pair of arrays for
 * overlap at run time, or give up); always inlined, so each clone below has
 * its own copy, built for its CPU. */
#define OPT_INLINE static inline __attribute__((always_inline))

#define SGD_RANGE(fname, T)                                                           \
    OPT_INLINE void fname##_loops(const opt_arg *a, T *restrict p, const T *restrict gr, \
                                  T *restrict b, int64_t n)                           \
    {                                                                                 \
        const T nlr = (T)a->s[0], mom = (T)a->s[1], damp1 = (T)a->s[2];               \
        const T wd = (T)a->s[3], sgn = (T)a->s[4];                                    \
        SGD_CASES(T)                                                                  \
    }                                                                                 \
    EV__SIMD_CLONES                                                                   \
    static void fname(const opt_arg *a, int64_t lo, int64_t hi)                       \
    {                                                                                 \
        /* The buffer is NULL without momentum (and never used then). */              \
        fname##_loops(a, (T *)(void *)a->ptr[0] + lo, (const T *)(const void *)a->ptr[1] + lo, \
                      a->ptr[2] ? (T *)(void *)a->ptr[2] + lo : NULL, hi - lo);        \
    }

SGD_RANGE(sgd_range_f32, float)
SGD_RANGE(sgd_range_f64, double)

static int sgd_check_hyper(const char *fn, double lr, double momentum, double dampening,
                           double weight_decay, int nesterov)
{
    int rc;
    if ((rc = check_nonneg(fn, "learning rate", lr)) ||
        (rc = check_nonneg(fn, "momentum value", momentum)) ||
        (rc = check_nonneg(fn, "weight_decay value", weight_decay))) {
        return rc;
    }
    if (isnan(dampening)) {
        return ev__set_message(EV_EINVAL, "%s: invalid dampening value: nan", fn);
    }
    if (nesterov && (momentum <= 0 || dampening != 0)) {
        return ev__set_message(EV_EINVAL, "%s: Nesterov momentum requires a momentum and zero "
                               "dampening (momentum %g, dampening %g)", fn, momentum,
                               dampening);
    }
    return 0;
}

/* Checks one parameter's tensors and fills its loop's argument a (a->numel
 * 0: nothing to do) and ts (param, grad, the buffer or NULL). */
static int sgd_prepare(const char *fn, ev_tensor *param, ev_tensor *grad, ev_tensor *buf,
                       double lr, double momentum, double dampening, double weight_decay,
                       int nesterov, int maximize, int first_step, opt_arg *a, ev_tensor **ts)
{
    static const char *const names[] = {"param", "grad", "momentum_buf"};
    if (momentum != 0 && !buf) {
        return ev__set_message(EV_EINVAL, "%s: momentum_buf is NULL but momentum is %g", fn,
                               momentum);
    }
    /* Without momentum the buffer takes no part, whatever it is. */
    ts[0] = param;
    ts[1] = grad;
    ts[2] = momentum != 0 ? buf : NULL;
    int rc = check_tensors(fn, ts, names, 3);
    if (rc) {
        return rc;
    }
    a->numel = param->numel;
    a->range = param->dtype == EV_FLOAT32 ? sgd_range_f32 : sgd_range_f64;
    a->variant = (weight_decay != 0 ? SGD_WD : 0) |
                 (momentum == 0 ? 0 : first_step ? SGD_MOM_FIRST : SGD_MOM_RUN) |
                 (nesterov ? SGD_NESTEROV : 0);
    a->s[0] = -lr;
    a->s[1] = momentum;
    a->s[2] = 1 - dampening;
    a->s[3] = weight_decay;
    a->s[4] = maximize ? -1.0 : 1.0;
    for (int k = 0; k < OPT_MAX_TENSORS; k++) {
        a->ptr[k] = k < 3 && ts[k] ? ev__tensor_ptr(ts[k]) : NULL;
    }
    return 0;
}

int ev_sgd_update_(const ev_exec *ex, ev_tensor *param, ev_tensor *grad,
                   ev_tensor *momentum_buf, double lr, double momentum, double dampening,
                   double weight_decay, int nesterov, int maximize, int first_step)
{
    static const char fn[] = "sgd_update_";
    opt_arg a;
    ev_tensor *ts[3];
    int rc = ev__check_exec(fn, ex);
    if (rc || (rc = sgd_check_hyper(fn, lr, momentum, dampening, weight_decay, nesterov)) ||
        (rc = sgd_prepare(fn, param, grad, momentum_buf, lr, momentum, dampening,
                          weight_decay, nesterov, maximize, first_step, &a, ts)) ||
        a.numel == 0) {
        return rc;
    }
    return opt_submit(ex, fn, &a, ts, 3);
}

/* ------------------------------------------------------------------ Adam */

enum { ADAM_L2 = 1, ADAM_DECOUPLED = 2, ADAM_AMSGRAD = 4 };
/* s[]: 0 -step_size, 1 1 - beta1, 2 beta2, 3 1 - beta2, 4 bc2_sqrt, 5 eps,
 * 6 weight_decay (L2) or 1 - lr * weight_decay (decoupled), 7 -1 or 1 */

/* One loop of Adam over [0, n), its variant fixed by constants WD (0 none,
 * 1 L2, 2 decoupled) and AMS. lerp(m, g, w) is PyTorch's: m + w (g - m) for
 * |w| < 0.5, else g - (g - m)(1 - w), written here as base + c (g - m) with
 * (base, c) = (m, w) or (g, w - 1): the same roundings, one blend. */
#define ADAM_LOOP(T, WD, AMS, SQRT)                                            \
    for (int64_t i = 0; i < n; i++) {                                      \
        T g = gr[i] * sgn;                                                 \
        T pv = p[i];                                                       \
        if ((WD) == 1) {                                                   \
            g = g + wd * pv;                                               \
        } else if ((WD) == 2) {                                            \
            pv = pv * wd;                                                  \
        }                                                                  \
        T mv = m[i];                                                       \
        T base = small != 0 ? mv : g;                                      \
        mv = base + lc * (g - mv);                                         \
        m[i] = mv;                                                         \
        T vv = v[i] * beta2 + (c2 * g) * g;                                \
        v[i] = vv;                                                         \
        if (AMS) {                                                         \
            T xm = x[i];                                                   \
            /* torch.maximum: NaN if either is NaN. */                     \
            vv = (xm > vv || xm != xm) ? xm : vv;                          \
            x[i] = vv;                                                     \
        }                                                                  \
        T denom = SQRT(vv) / bc2s + eps;                                   \
        p[i] = pv + (nss * mv) / denom;                                    \
    }

#define ADAM_CASES(T, SQ)                                                     \
    switch (a->variant) {                                                   \
    case 0: ADAM_LOOP(T, 0, 0, SQ) break;                                       \
    case ADAM_L2: ADAM_LOOP(T, 1, 0, SQ) break;                                 \
    case ADAM_DECOUPLED: ADAM_LOOP(T, 2, 0, SQ) break;                          \
    case ADAM_AMSGRAD: ADAM_LOOP(T, 0, 1, SQ) break;                            \
    case ADAM_AMSGRAD | ADAM_L2: ADAM_LOOP(T, 1, 1, SQ) break;                  \
    default: ADAM_LOOP(T, 2, 1, SQ) break; /* ADAM_AMSGRAD | ADAM_DECOUPLED */ \
    }

#define ADAM_RANGE(fname, T, SQRT_FN)                                                 \
    OPT_INLINE void fname##_loops(const opt_arg *a, T *restrict p, const T *restrict gr,  \
                                  T *restrict m, T *restrict v, T *restrict x, int64_t n) \
    {                                                                                 \
        const T nss = (T)a->s[0], w1 = (T)a->s[1], beta2 = (T)a->s[2];                \
        const T c2 = (T)a->s[3], bc2s = (T)a->s[4], eps = (T)a->s[5];                 \
        const T wd = (T)a->s[6], sgn = (T)a->s[7];                                    \
        /* PyTorch tests |w| < 0.5 and computes 1 - w in the tensor's type. small \
         * is a T, not an int: a blend mask must be as wide as the values. */         \
        const T small = (w1 < 0 ? -w1 : w1) < (T)0.5 ? (T)1 : (T)0;                   \
        const T lc = small != 0 ? w1 : w1 - (T)1;                                     \
        ADAM_CASES(T, SQRT_FN)                                                        \
    }                                                                                 \
    EV__SIMD_CLONES                                                                   \
    static void fname(const opt_arg *a, int64_t lo, int64_t hi)                       \
    {                                                                                 \
        /* max_exp_avg_sq is NULL without amsgrad (and never used then). */           \
        fname##_loops(a, (T *)(void *)a->ptr[0] + lo, (const T *)(const void *)a->ptr[1] + lo, \
                      (T *)(void *)a->ptr[2] + lo, (T *)(void *)a->ptr[3] + lo,        \
                      a->ptr[4] ? (T *)(void *)a->ptr[4] + lo : NULL, hi - lo);        \
    }

ADAM_RANGE(adam_range_f32, float, sqrtf)
ADAM_RANGE(adam_range_f64, double, sqrt)

static int adam_check_hyper(const char *fn, double lr, double beta1, double beta2, double eps,
                            double weight_decay)
{
    int rc;
    if ((rc = check_nonneg(fn, "learning rate", lr)) ||
        (rc = check_nonneg(fn, "epsilon value", eps)) ||
        (rc = check_nonneg(fn, "weight_decay value", weight_decay))) {
        return rc;
    }
    if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1)) {
        int k = !(beta1 >= 0 && beta1 < 1) ? 0 : 1;
        return ev__set_message(EV_EINVAL, "%s: invalid beta parameter at index %d: %g "
                               "(expected 0 <= beta < 1)", fn, k, k ? beta2 : beta1);
    }
    return 0;
}

/* As sgd_prepare, for Adam: ts gets param, grad, exp_avg, exp_avg_sq and
 * max_exp_avg_sq (or NULL). */
static int adam_prepare(const char *fn, ev_tensor *param, ev_tensor *grad, ev_tensor *exp_avg,
                        ev_tensor *exp_avg_sq, ev_tensor *max_exp_avg_sq, int64_t step,
                        double lr, double beta1, double beta2, double eps, double weight_decay,
                        int decoupled, int maximize, opt_arg *a, ev_tensor **ts)
{
    static const char *const names[] = {"param", "grad", "exp_avg", "exp_avg_sq",
                                        "max_exp_avg_sq"};
    int rc;
    if (step < 1) {
        return ev__set_message(EV_EINVAL, "%s: step is %lld, expected >= 1 (the number of "
                               "updates, this one included)", fn, (long long)step);
    }
    if ((rc = ev__check_tensor(fn, names[2], exp_avg)) ||
        (rc = ev__check_tensor(fn, names[3], exp_avg_sq))) {
        return rc;
    }
    ts[0] = param;
    ts[1] = grad;
    ts[2] = exp_avg;
    ts[3] = exp_avg_sq;
    ts[4] = max_exp_avg_sq;
    if ((rc = check_tensors(fn, ts, names, 5))) {
        return rc;
    }
    /* The host side of torch.optim's step, in float64: step is a float
     * there (a tensor's item()), and ** is pow. */
    double t = (double)step;
    double bc1 = 1 - pow(beta1, t), bc2 = 1 - pow(beta2, t);
    double step_size = lr / bc1;
    double bc2_sqrt = pow(bc2, 0.5);
    a->numel = param->numel;
    a->range = param->dtype == EV_FLOAT32 ? adam_range_f32 : adam_range_f64;
    a->variant = (weight_decay == 0 ? 0 : decoupled ? ADAM_DECOUPLED : ADAM_L2) |
                 (max_exp_avg_sq ? ADAM_AMSGRAD : 0);
    a->s[0] = -step_size;
    a->s[1] = 1 - beta1;
    a->s[2] = beta2;
    a->s[3] = 1 - beta2;
    a->s[4] = bc2_sqrt;
    a->s[5] = eps;
    a->s[6] = decoupled ? 1 - lr * weight_decay : weight_decay;
    a->s[7] = maximize ? -1.0 : 1.0;
    for (int k = 0; k < OPT_MAX_TENSORS; k++) {
        a->ptr[k] = ts[k] ? ev__tensor_ptr(ts[k]) : NULL;
    }
    return 0;
}

int ev_adam_update_(const ev_exec *ex, ev_tensor *param, ev_tensor *grad, ev_tensor *exp_avg,
                    ev_tensor *exp_avg_sq, ev_tensor *max_exp_avg_sq, int64_t step, double lr,
                    double beta1, double beta2, double eps, double weight_decay, int decoupled,
                    int maximize)
{
    const char *fn = decoupled ? "adamw_update_" : "adam_update_";
    opt_arg a;
    ev_tensor *ts[5];
    int rc = ev__check_exec(fn, ex);
    if (rc || (rc = adam_check_hyper(fn, lr, beta1, beta2, eps, weight_decay)) ||
        (rc = adam_prepare(fn, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr,
                           beta1, beta2, eps, weight_decay, decoupled, maximize, &a, ts)) ||
        a.numel == 0) {
        return rc;
    }
    return opt_submit(ex, fn, &a, ts, 5);
}

/* ----------------------------------------------------- many parameters
 *
 * The multi-tensor forms: one instruction for a list of parameters, each
 * with its own prepared loop argument. The chunks of the intra-op split run
 * over the parameters' elements end to end, so small parameters share the
 * cores as one large one would. */

/* Parameters one instruction may take: its operands (at most 5 each) must
 * fit the engine's 16-bit count. */
#define OPT_MULTI_MAX 13000

typedef struct multi_arg {
    opt_arg *items;  /* owned (one ev__malloc block with start); non-empty params */
    int64_t *start;  /* start[i]: item i's first element end to end; start[n]: all */
    int n;
} multi_arg;

static void multi_drop(void *p)
{
    ev__free(((multi_arg *)p)->items);
}

static void multi_chunk(int64_t lo, int64_t hi, void *p)
{
    const multi_arg *m = p;
    int a = 0, b = m->n - 1; /* the last item that starts at or before lo */
    while (a < b) {
        int mid = a + (b - a + 1) / 2;
        if (m->start[mid] <= lo) {
            a = mid;
        } else {
            b = mid - 1;
        }
    }
    for (int i = a; i < m->n && m->start[i] < hi; i++) {
        int64_t s = lo > m->start[i] ? lo - m->start[i] : 0;
        int64_t e = (hi < m->start[i + 1] ? hi : m->start[i + 1]) - m->start[i];
        m->items[i].range(&m->items[i], s, e);
    }
}

static int multi_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    multi_arg *m = p;
    ev__parallel_for(m->start[m->n], EV__PARALLEL_GRAIN, multi_chunk, m);
    return 0;
}

/* The memory one tensor of an update spans (dense: from its first element). */
typedef struct span {
    uintptr_t lo, hi;
    int write;
} span;

static int span_cmp(const void *a, const void *b)
{
    uintptr_t x = ((const span *)a)->lo, y = ((const span *)b)->lo;
    return x < y ? -1 : x > y;
}

/* 1 if a tensor written by one parameter's update overlaps any tensor of
 * another's (the updates of a call run at once). The tensors of one
 * parameter are known not to overlap, so any overlap found is between two
 * parameters; it matters when one side is written. */
static int spans_conflict(span *sp, size_t n)
{
    qsort(sp, n, sizeof *sp, span_cmp);
    uintptr_t end_any = 0, end_write = 0; /* the furthest ends seen so far */
    for (size_t i = 0; i < n; i++) {
        if (sp[i].lo < (sp[i].write ? end_any : end_write)) {
            return 1;
        }
        end_any = sp[i].hi > end_any ? sp[i].hi : end_any;
        if (sp[i].write) {
            end_write = sp[i].hi > end_write ? sp[i].hi : end_write;
        }
    }
    return 0;
}

/* Adds " (parameter i)" to the message of the failed call. */
static int at_index(int rc, int i)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ev_last_message());
    return ev__set_message(rc, "%s (parameter %d)", msg, i);
}

/* The part of a multi-tensor call after the per-parameter checks: ts holds
 * nt tensors per item (grad at 1; NULL entries unused), items[0..n) the
 * prepared loops of the non-empty ones. Takes items (freed on failure). */
static int multi_submit(const ev_exec *ex, const char *fn, opt_arg *items, int64_t *start,
                        int n, ev_tensor *const *ts, int nt)
{
    int rc = 0;
    size_t nops = 0;
    span *sp = ev__malloc(sizeof *sp * (size_t)(n * nt + 1));
    ev_operand *ops = ev__malloc(sizeof *ops * (size_t)(n * nt + 1));
    if (!sp || !ops) {
        rc = ev__set_message(EV_ENOMEM, "%s: out of memory for %d parameters", fn, n);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < nt; k++) {
            const ev_tensor *t = ts[(size_t)i * (size_t)nt + (size_t)k];
            if (!t) {
                continue;
            }
            uintptr_t lo = (uintptr_t)ev__tensor_ptr(t);
            sp[nops] = (span){lo, lo + (uintptr_t)t->numel * ev__dsize(t->dtype), k != 1};
            ops[nops] = (ev_operand){t->storage->obj, k == 1 ? EV_READ : EV_WRITE};
            nops++;
        }
    }
    if (spans_conflict(sp, nops)) {
        rc = ev__set_message(EV_EINVAL, "%s: a tensor one parameter's update writes shares "
                             "memory with another parameter's tensors (each parameter must "
                             "be listed once, with tensors of its own)", fn);
        goto done;
    }
    multi_arg m = {items, start, n};
    ev_instr_desc d = {
        .kernel = multi_kernel,
        .arg = &m,
        .arg_size = sizeof m,
        .arg_drop = multi_drop,
        .stream = ev_cpu_stream(ex->thread_uid),
        .operands = ops,
        .n_operands = nops,
        .name = fn,
        .site = ex->site,
    };
    rc = ev_submit(ex->vm, &d, NULL);
    if (rc == 0) {
        items = NULL; /* the instruction owns them now */
        /* As ev__submit does: each storage written gets a new version. */
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < nt; k++) {
                const ev_tensor *t = ts[(size_t)i * (size_t)nt + (size_t)k];
                if (t && k != 1) {
                    ev__storage_written(t->storage, fn, ex->site);
                }
            }
        }
    }
done:
    ev__free(sp);
    ev__free(ops);
    ev__free(items);
    return rc;
}

/* Room for n prepared loops and their n + 1 starts, in one block. */
static opt_arg *multi_alloc(const char *fn, int n, int64_t **start)
{
    opt_arg *items = ev__malloc(sizeof(opt_arg) * (size_t)n + sizeof(int64_t) * (size_t)(n + 1));
    if (!items) {
        ev__set_message(EV_ENOMEM, "%s: out of memory for %d parameters", fn, n);
        return NULL;
    }
    *start = (int64_t *)(void *)(items + n);
    return items;
}

static int multi_check_n(const char *fn, int n, const void *params, const void *grads)
{
    if (n < 0 || n > OPT_MULTI_MAX) {
        return ev__set_message(EV_EINVAL, "%s: n is %d, expected 0 to %d parameters", fn, n,
                               OPT_MULTI_MAX);
    }
    if (n > 0 && (!params || !grads)) {
        return ev__set_message(EV_EINVAL, "%s: %s is NULL", fn, !params ? "params" : "grads");
    }
    return 0;
}

int ev_sgd_update_multi_(const ev_exec *ex, int n, ev_tensor *const *params,
                         ev_tensor *const *grads, ev_tensor *const *momentum_bufs,
                         const int *first_steps, double lr, double momentum, double dampening,
                         double weight_decay, int nesterov, int maximize)
{
    static const char fn[] = "sgd_update_multi_";
    int rc = ev__check_exec(fn, ex);
    if (rc || (rc = sgd_check_hyper(fn, lr, momentum, dampening, weight_decay, nesterov)) ||
        (rc = multi_check_n(fn, n, params, grads))) {
        return rc;
    }
    if (momentum != 0 && n > 0 && !momentum_bufs) {
        return ev__set_message(EV_EINVAL, "%s: momentum_bufs is NULL but momentum is %g", fn,
                               momentum);
    }
    if (n == 0) {
        return 0;
    }
    int64_t *start;
    opt_arg *items = multi_alloc(fn, n, &start);
    ev_tensor **ts = ev__malloc(sizeof *ts * 3 * (size_t)n);
    if (!items || !ts) {
        ev__free(items);
        ev__free(ts);
        return ev__set_message(EV_ENOMEM, "%s: out of memory for %d parameters", fn, n);
    }
    int m = 0;
    start[0] = 0;
    for (int i = 0; i < n; i++) {
        rc = sgd_prepare(fn, params[i], grads[i], momentum_bufs ? momentum_bufs[i] : NULL, lr,
                         momentum, dampening, weight_decay, nesterov, maximize,
                         first_steps ? first_steps[i] : 0, &items[m], &ts[3 * m]);
        if (rc) {
            rc = at_index(rc, i);
            ev__free(items);
            ev__free(ts);
            return rc;
        }
        if (items[m].numel > 0) {
            start[m + 1] = start[m] + items[m].numel;
            m++;
        }
    }
    rc = m ? multi_submit(ex, fn, items, start, m, ts, 3) : (ev__free(items), 0);
    ev__free(ts);
    return rc;
}

int ev_adam_update_multi_(const ev_exec *ex, int n, ev_tensor *const *params,
                          ev_tensor *const *grads, ev_tensor *const *exp_avgs,
                          ev_tensor *const *exp_avg_sqs, ev_tensor *const *max_exp_avg_sqs,
                          const int64_t *steps, double lr, double beta1, double beta2,
                          double eps, double weight_decay, int decoupled, int maximize)
{
    const char *fn = decoupled ? "adamw_update_multi_" : "adam_update_multi_";
    int rc = ev__check_exec(fn, ex);
    if (rc || (rc = adam_check_hyper(fn, lr, beta1, beta2, eps, weight_decay)) ||
        (rc = multi_check_n(fn, n, params, grads))) {
        return rc;
    }
    if (n > 0 && (!exp_avgs || !exp_avg_sqs || !steps)) {
        return ev__set_message(EV_EINVAL, "%s: %s is NULL", fn,
                               !exp_avgs ? "exp_avgs" : !exp_avg_sqs ? "exp_avg_sqs" : "steps");
    }
    if (n == 0) {
        return 0;
    }
    int64_t *start;
    opt_arg *items = multi_alloc(fn, n, &start);
    ev_tensor **ts = ev__malloc(sizeof *ts * 5 * (size_t)n);
    if (!items || !ts) {
        ev__free(items);
        ev__free(ts);
        return ev__set_message(EV_ENOMEM, "%s: out of memory for %d parameters", fn, n);
    }
    int m = 0;
    start[0] = 0;
    for (int i = 0; i < n; i++) {
        rc = adam_prepare(fn, params[i], grads[i], exp_avgs[i], exp_avg_sqs[i],
                          max_exp_avg_sqs ? max_exp_avg_sqs[i] : NULL, steps[i], lr, beta1,
                          beta2, eps, weight_decay, decoupled, maximize, &items[m], &ts[5 * m]);
        if (rc) {
            rc = at_index(rc, i);
            ev__free(items);
            ev__free(ts);
            return rc;
        }
        if (items[m].numel > 0) {
            start[m + 1] = start[m] + items[m].numel;
            m++;
        }
    }
    rc = m ? multi_submit(ex, fn, items, start, m, ts, 5) : (ev__free(items), 0);
    ev__free(ts);
    return rc;
}
