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

/* Issues the update: reads grad (ts[1]), writes param and the buffers. */
static int opt_submit(const ev_exec *ex, const char *name, opt_arg *a, ev_tensor *const *ts,
                      int n)
{
    ev_tensor *writes[OPT_MAX_TENSORS];
    int nw = 0;
    writes[nw++] = ts[0];
    for (int k = 2; k < n; k++) {
        writes[nw++] = ts[k]; /* NULL entries are skipped */
    }
    a->numel = ts[0]->numel;
    for (int k = 0; k < OPT_MAX_TENSORS; k++) {
        a->ptr[k] = k < n && ts[k] ? ev__tensor_ptr(ts[k]) : NULL;
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

int ev_sgd_update_(const ev_exec *ex, ev_tensor *param, ev_tensor *grad,
                   ev_tensor *momentum_buf, double lr, double momentum, double dampening,
                   double weight_decay, int nesterov, int maximize, int first_step)
{
    static const char fn[] = "sgd_update_";
    static const char *const names[] = {"param", "grad", "momentum_buf"};
    int rc = ev__check_exec(fn, ex);
    if (rc || (rc = check_nonneg(fn, "learning rate", lr)) ||
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
    if (momentum != 0 && !momentum_buf) {
        return ev__set_message(EV_EINVAL, "%s: momentum_buf is NULL but momentum is %g", fn,
                               momentum);
    }
    /* Without momentum the buffer takes no part, whatever it is. */
    ev_tensor *ts[3] = {param, grad, momentum != 0 ? momentum_buf : NULL};
    if ((rc = check_tensors(fn, ts, names, 3)) || param->numel == 0) {
        return rc;
    }
    opt_arg a;
    a.range = param->dtype == EV_FLOAT32 ? sgd_range_f32 : sgd_range_f64;
    a.variant = (weight_decay != 0 ? SGD_WD : 0) |
                (momentum == 0 ? 0 : first_step ? SGD_MOM_FIRST : SGD_MOM_RUN) |
                (nesterov ? SGD_NESTEROV : 0);
    a.s[0] = -lr;
    a.s[1] = momentum;
    a.s[2] = 1 - dampening;
    a.s[3] = weight_decay;
    a.s[4] = maximize ? -1.0 : 1.0;
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

int ev_adam_update_(const ev_exec *ex, ev_tensor *param, ev_tensor *grad, ev_tensor *exp_avg,
                    ev_tensor *exp_avg_sq, ev_tensor *max_exp_avg_sq, int64_t step, double lr,
                    double beta1, double beta2, double eps, double weight_decay, int decoupled,
                    int maximize)
{
    const char *fn = decoupled ? "adamw_update_" : "adam_update_";
    static const char *const names[] = {"param", "grad", "exp_avg", "exp_avg_sq",
                                        "max_exp_avg_sq"};
    int rc = ev__check_exec(fn, ex);
    if (rc || (rc = check_nonneg(fn, "learning rate", lr)) ||
        (rc = check_nonneg(fn, "epsilon value", eps)) ||
        (rc = check_nonneg(fn, "weight_decay value", weight_decay))) {
        return rc;
    }
    if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1)) {
        int k = !(beta1 >= 0 && beta1 < 1) ? 0 : 1;
        return ev__set_message(EV_EINVAL, "%s: invalid beta parameter at index %d: %g "
                               "(expected 0 <= beta < 1)", fn, k, k ? beta2 : beta1);
    }
    if (step < 1) {
        return ev__set_message(EV_EINVAL, "%s: step is %lld, expected >= 1 (the number of "
                               "updates, this one included)", fn, (long long)step);
    }
    for (int k = 2; k < 4; k++) {
        ev_tensor *t = k == 2 ? exp_avg : exp_avg_sq;
        if ((rc = ev__check_tensor(fn, names[k], t))) {
            return rc;
        }
    }
    ev_tensor *ts[5] = {param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq};
    if ((rc = check_tensors(fn, ts, names, 5)) || param->numel == 0) {
        return rc;
    }
    /* The host side of torch.optim's step, in float64: step is a float
     * there (a tensor's item()), and ** is pow. */
    double t = (double)step;
    double bc1 = 1 - pow(beta1, t), bc2 = 1 - pow(beta2, t);
    double step_size = lr / bc1;
    double bc2_sqrt = pow(bc2, 0.5);
    opt_arg a;
    a.range = param->dtype == EV_FLOAT32 ? adam_range_f32 : adam_range_f64;
    a.variant = (weight_decay == 0 ? 0 : decoupled ? ADAM_DECOUPLED : ADAM_L2) |
                (max_exp_avg_sq ? ADAM_AMSGRAD : 0);
    a.s[0] = -step_size;
    a.s[1] = 1 - beta1;
    a.s[2] = beta2;
    a.s[3] = 1 - beta2;
    a.s[4] = bc2_sqrt;
    a.s[5] = eps;
    a.s[6] = decoupled ? 1 - lr * weight_decay : weight_decay;
    a.s[7] = maximize ? -1.0 : 1.0;
    return opt_submit(ex, fn, &a, ts, 5);
}
