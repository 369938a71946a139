/* The fused optimizer updates (ev_sgd_update_, ev_adam_update_) against a
 * scalar reference of PyTorch's single-tensor formulas written out here, in
 * the same order of float operations: every variant, float32 and float64,
 * sizes that are not multiples of the vector width and large enough to be
 * split over the intra-op threads, 0-d, empty and transposed tensors,
 * several steps issued before one sync, and the argument checks. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor_test.h"

/* ------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

/* Uniform in [lo, hi), deterministic. */
static double urand(double lo, double hi)
{
    rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
    return lo + (hi - lo) * (double)(rng_state >> 11) * 0x1p-53;
}

static double *host_rand(int64_t n, double lo, double hi)
{
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    CHECK(v);
    for (int64_t i = 0; i < n; i++) {
        v[i] = urand(lo, hi);
    }
    return v;
}

/* Rounds host values to dtype (what the tensor holds). */
static void round_to(ev_dtype dt, double *v, int64_t n)
{
    for (int64_t i = 0; dt == EV_FLOAT32 && i < n; i++) {
        v[i] = (float)v[i];
    }
}

static ev_tensor *make(ev_dtype dt, int ndim, const int64_t *shape, const double *v)
{
    return tensor_from(dt, ndim, shape, v);
}

/* Checks t's values (C order) against want bit for bit (NaN matches NaN). */
static void check_exact(ev_tensor *t, const double *want, int64_t n, const char *what)
{
    double *got = malloc(sizeof(double) * (size_t)(n ? n : 1));
    CHECK(got);
    read_f64(t, got);
    for (int64_t i = 0; i < n; i++) {
        int same = got[i] == want[i] || (isnan(got[i]) && isnan(want[i]));
        if (!same) {
            fprintf(stderr, "%s element %lld: got %.17g want %.17g\n", what, (long long)i,
                    got[i], want[i]);
            CHECK(0);
        }
    }
    free(got);
}

/* ------------------------------------------------------- the references
 *
 * PyTorch's _single_tensor_sgd and _single_tensor_adam, element by element,
 * each operation rounded to T as the in-place tensor ops round it. */

typedef struct sgd_cfg {
    double lr, momentum, dampening, wd;
    int nesterov, maximize;
} sgd_cfg;

#define REF_SGD(name, T)                                                                  \
    static void name(const sgd_cfg *c, double *p, const double *gr, double *b, int64_t n, \
                     int first)                                                            \
    {                                                                                     \
        for (int64_t i = 0; i < n; i++) {                                                 \
            T g = (T)gr[i];                                                               \
            if (c->maximize) {                                                            \
                g = -g;                                                                   \
            }                                                                             \
            T pv = (T)p[i];                                                               \
            if (c->wd != 0) {                                                             \
                g = g + (T)c->wd * pv;        /* grad.add(param, alpha=wd) */             \
            }                                                                             \
            if (c->momentum != 0) {                                                       \
                T bv;                                                                     \
                if (first) {                                                              \
                    bv = g;                   /* clone(grad) */                           \
                } else {                                                                  \
                    bv = (T)b[i] * (T)c->momentum;       /* buf.mul_(momentum) */         \
                    bv = bv + (T)(1 - c->dampening) * g; /* .add_(g, alpha=1-d) */        \
                }                                                                         \
                b[i] = bv;                                                                \
                g = c->nesterov ? g + (T)c->momentum * bv : bv;                           \
            }                                                                             \
            p[i] = pv + (T)(-c->lr) * g;      /* param.add_(g, alpha=-lr) */              \
        }                                                                                 \
    }
REF_SGD(ref_sgd_f32, float)
REF_SGD(ref_sgd_f64, double)

typedef struct adam_cfg {
    double lr, beta1, beta2, eps, wd;
    int amsgrad, decoupled, maximize;
} adam_cfg;

#define REF_ADAM(name, T, SQRT)                                                           \
    static void name(const adam_cfg *c, double *p, const double *gr, double *m, double *v, \
                     double *x, int64_t n, int64_t step)                                  \
    {                                                                                     \
        double bc1 = 1 - pow(c->beta1, (double)step);                                     \
        double bc2 = 1 - pow(c->beta2, (double)step);                                     \
        double step_size = c->lr / bc1;                                                   \
        double bc2_sqrt = pow(bc2, 0.5);                                                  \
        T w = (T)(1 - c->beta1);                                                          \
        for (int64_t i = 0; i < n; i++) {                                                 \
            T g = (T)gr[i];                                                               \
            if (c->maximize) {                                                            \
                g = -g;                                                                   \
            }                                                                             \
            T pv = (T)p[i];                                                               \
            if (c->wd != 0) {                                                             \
                if (c->decoupled) {                                                       \
                    pv = pv * (T)(1 - c->lr * c->wd);                                     \
                } else {                                                                  \
                    g = g + (T)c->wd * pv;                                                \
                }                                                                         \
            }                                                                             \
            T mv = (T)m[i];                                                               \
            /* exp_avg.lerp_(grad, 1 - beta1), as ATen's scalar lerp */                   \
            mv = fabs((double)w) < 0.5 ? mv + w * (g - mv) : g - (g - mv) * ((T)1 - w);   \
            m[i] = mv;                                                                    \
            /* exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2) */            \
            T vv = (T)v[i] * (T)c->beta2;                                                 \
            vv = vv + (T)(1 - c->beta2) * g * g;                                          \
            v[i] = vv;                                                                    \
            T src = vv;                                                                   \
            if (c->amsgrad) {                                                             \
                T xm = (T)x[i];                                                           \
                src = isnan(xm) || isnan(vv) ? (T)NAN : xm > vv ? xm : vv;                \
                x[i] = src;                                                               \
            }                                                                             \
            T denom = SQRT(src) / (T)bc2_sqrt;                                            \
            denom = denom + (T)c->eps;                                                    \
            /* param.addcdiv_(exp_avg, denom, value=-step_size) */                        \
            p[i] = pv + (T)(-step_size) * mv / denom;                                     \
        }                                                                                 \
    }
REF_ADAM(ref_adam_f32, float, sqrtf)
REF_ADAM(ref_adam_f64, double, sqrt)

/* ------------------------------------------------------------------- SGD */

/* steps SGD updates of one param of n elements (ndim 1, or 0-d for n ==
 * -1), issued back to back before one sync, against the reference. */
static void sgd_case(ev_dtype dt, int64_t n, const sgd_cfg *c, int steps)
{
    int ndim = n < 0 ? 0 : 1;
    n = n < 0 ? 1 : n;
    int64_t shape[1] = {n};
    double *p = host_rand(n, -1, 1), *b = host_rand(n, -1, 1);
    round_to(dt, p, n);
    round_to(dt, b, n);
    ev_tensor *tp = make(dt, ndim, shape, p);
    ev_tensor *tb = c->momentum != 0 ? make(dt, ndim, shape, b) : NULL;
    for (int s = 0; s < steps; s++) {
        double *g = host_rand(n, -1, 1);
        round_to(dt, g, n);
        if (s == 1 && n > 3) {
            g[3] = NAN; /* propagates to param (and the buffer) as in PyTorch */
        }
        ev_tensor *tg = make(dt, ndim, shape, g);
        CHECK_OK(ev_sgd_update_(&EX, tp, tg, tb, c->lr, c->momentum, c->dampening, c->wd,
                                c->nesterov, c->maximize, s == 0));
        ev_tensor_unref(tg); /* the update still reads it: the engine keeps it */
        (dt == EV_FLOAT32 ? ref_sgd_f32 : ref_sgd_f64)(c, p, g, b, n, s == 0);
        free(g);
    }
    check_exact(tp, p, n, "param");
    if (tb) {
        check_exact(tb, b, n, "momentum_buf");
    }
    ev_tensor_unref(tp);
    ev_tensor_unref(tb);
    free(p);
    free(b);
}

static void test_sgd_variants(void)
{
    const int64_t sizes[] = {-1, 1, 37, 1000, (int64_t)ev_test_scaled(200003)};
    const ev_dtype dts[] = {EV_FLOAT32, EV_FLOAT64};
    for (int d = 0; d < 2; d++) {
        for (int k = 0; k < 5; k++) {
            for (int v = 0; v < 32; v++) {
                sgd_cfg c = {.lr = 0.05,
                             .momentum = (v & 1) ? 0.9 : 0,
                             .dampening = (v & 2) && !(v & 4) ? 0.25 : 0,
                             .wd = (v & 8) ? 1e-2 : 0,
                             .nesterov = (v & 1) && (v & 4),
                             .maximize = (v & 16) != 0};
                int big = sizes[k] > 100000;
                if (big && v % 5 != 0 && v != 31) {
                    continue; /* a few variants suffice at the size that splits */
                }
                sgd_case(dts[d], sizes[k], &c, 3);
            }
        }
    }
}

/* lr = 0 leaves param as it is; momentum 0 never touches the buffer. */
static void test_sgd_edges(void)
{
    double p[3] = {1, -2, 3}, g[3] = {0.5, 0.5, 0.5};
    ev_tensor *tp = make(EV_FLOAT32, 1, SHAPE(3), p);
    ev_tensor *tg = make(EV_FLOAT32, 1, SHAPE(3), g);
    ev_tensor *tb = make(EV_FLOAT32, 1, SHAPE(3), VALS(7, 7, 7));
    CHECK_OK(ev_sgd_update_(&EX, tp, tg, NULL, 0.0, 0, 0, 0, 0, 0, 1));
    check_exact(tp, p, 3, "param");
    CHECK_OK(ev_sgd_update_(&EX, tp, tg, tb, 1.0, 0, 0, 0, 0, 0, 0));
    check_exact(tp, VALS(0.5, -2.5, 2.5), 3, "param");
    check_exact(tb, VALS(7, 7, 7), 3, "momentum_buf");
    /* Empty: nothing to do, but the arguments are still checked. */
    ev_tensor *e1, *e2;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT64, 2, SHAPE(0, 4), &e1));
    CHECK_OK(ev_zeros(&EX, EV_FLOAT64, 2, SHAPE(0, 4), &e2));
    CHECK_OK(ev_sgd_update_(&EX, e1, e2, NULL, 0.1, 0, 0, 0, 0, 0, 1));
    CHECK_EQ(ev_sgd_update_(&EX, e1, e2, NULL, -0.1, 0, 0, 0, 0, 0, 1), EV_EINVAL);
    ev_tensor_unref(e1);
    ev_tensor_unref(e2);
    ev_tensor_unref(tp);
    ev_tensor_unref(tg);
    ev_tensor_unref(tb);
}

/* ------------------------------------------------------------------ Adam */

static void adam_case(ev_dtype dt, int64_t n, const adam_cfg *c, int steps)
{
    int ndim = n < 0 ? 0 : 1;
    n = n < 0 ? 1 : n;
    int64_t shape[1] = {n};
    double *p = host_rand(n, -1, 1);
    double *m = calloc((size_t)n, sizeof(double)), *v = calloc((size_t)n, sizeof(double));
    double *x = calloc((size_t)n, sizeof(double));
    CHECK(m && v && x);
    round_to(dt, p, n);
    ev_tensor *tp = make(dt, ndim, shape, p);
    ev_tensor *tm = make(dt, ndim, shape, m), *tv = make(dt, ndim, shape, v);
    ev_tensor *tx = c->amsgrad ? make(dt, ndim, shape, x) : NULL;
    for (int s = 1; s <= steps; s++) {
        double *g = host_rand(n, -1, 1);
        round_to(dt, g, n);
        if (s == 2 && n > 5) {
            g[5] = NAN;
        }
        ev_tensor *tg = make(dt, ndim, shape, g);
        CHECK_OK(ev_adam_update_(&EX, tp, tg, tm, tv, tx, s, c->lr, c->beta1, c->beta2, c->eps,
                                 c->wd, c->decoupled, c->maximize));
        ev_tensor_unref(tg);
        (dt == EV_FLOAT32 ? ref_adam_f32 : ref_adam_f64)(c, p, g, m, v, x, n, s);
        free(g);
    }
    check_exact(tp, p, n, "param");
    check_exact(tm, m, n, "exp_avg");
    check_exact(tv, v, n, "exp_avg_sq");
    if (tx) {
        check_exact(tx, x, n, "max_exp_avg_sq");
    }
    if (n > 5 && steps >= 2) {
        double got;
        ev_tensor *e;
        CHECK_OK(ev_slice(tp, 0, 5, 6, 1, &e));
        read_f64(e, &got);
        CHECK(isnan(got));
        ev_tensor_unref(e);
    }
    ev_tensor_unref(tp);
    ev_tensor_unref(tm);
    ev_tensor_unref(tv);
    ev_tensor_unref(tx);
    free(p);
    free(m);
    free(v);
    free(x);
}

static void test_adam_variants(void)
{
    const int64_t sizes[] = {-1, 3, 37, 1001, (int64_t)ev_test_scaled(150001)};
    const ev_dtype dts[] = {EV_FLOAT32, EV_FLOAT64};
    for (int d = 0; d < 2; d++) {
        for (int k = 0; k < 5; k++) {
            for (int vv = 0; vv < 24; vv++) {
                int wdm = vv % 3; /* 0 none, 1 L2, 2 decoupled */
                adam_cfg c = {.lr = 1e-3,
                              /* beta1 <= 0.5 takes lerp's other form */
                              .beta1 = (vv / 3) & 1 ? 0.3 : 0.9,
                              .beta2 = 0.999,
                              .eps = 1e-8,
                              .wd = wdm ? 1e-2 : 0,
                              .amsgrad = ((vv / 6) & 1) != 0,
                              .decoupled = wdm == 2,
                              .maximize = ((vv / 12) & 1) != 0};
                if (sizes[k] > 100000 && vv % 5 != 0) {
                    continue;
                }
                adam_case(dts[d], sizes[k], &c, 4);
            }
        }
    }
    /* decoupled without weight decay is plain Adam; beta1 = 0 and beta2 = 0 */
    adam_cfg c = {.lr = 0.1, .beta1 = 0, .beta2 = 0, .eps = 0.5, .wd = 0, .decoupled = 1};
    adam_case(EV_FLOAT32, 64, &c, 3);
}

/* Many steps: the bias corrections go to 1 as in torch.optim (a float64
 * step count), and amsgrad keeps the running maximum. */
static void test_adam_long(void)
{
    adam_cfg c = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-6, .wd = 0.1,
                  .amsgrad = 1, .decoupled = 1};
    adam_case(EV_FLOAT32, 129, &c, 60);
}

/* NaN in max_exp_avg_sq propagates through maximum (torch.maximum). */
static void test_adam_amsgrad_nan(void)
{
    ev_tensor *tp = make(EV_FLOAT64, 1, SHAPE(2), VALS(1, 1));
    ev_tensor *tg = make(EV_FLOAT64, 1, SHAPE(2), VALS(0.5, 0.5));
    ev_tensor *tm = make(EV_FLOAT64, 1, SHAPE(2), VALS(0, 0));
    ev_tensor *tv = make(EV_FLOAT64, 1, SHAPE(2), VALS(0, 0));
    ev_tensor *tx = make(EV_FLOAT64, 1, SHAPE(2), VALS(NAN, 100));
    CHECK_OK(ev_adam_update_(&EX, tp, tg, tm, tv, tx, 1, 0.1, 0.9, 0.999, 1e-8, 0, 0, 0));
    double x[2], p[2];
    read_f64(tx, x);
    read_f64(tp, p);
    CHECK(isnan(x[0]) && isnan(p[0]));
    CHECK_EQ(x[1], 100);
    CHECK(p[1] < 1 && p[1] > 0.99);
    ev_tensor_unref(tp);
    ev_tensor_unref(tg);
    ev_tensor_unref(tm);
    ev_tensor_unref(tv);
    ev_tensor_unref(tx);
}

/* ------------------------------------------------------------- layouts */

/* Transposed params (and state laid out alike) update as contiguous ones:
 * the update is one flat pass over the block. */
static void test_transposed(void)
{
    const int64_t r = 13, k = 7, n = r * k;
    for (int d = 0; d < 2; d++) {
        ev_dtype dt = d ? EV_FLOAT64 : EV_FLOAT32;
        double *p = host_rand(n, -1, 1), *g = host_rand(n, -1, 1), *b = host_rand(n, -1, 1);
        round_to(dt, p, n);
        round_to(dt, g, n);
        round_to(dt, b, n);
        ev_tensor *bp = make(dt, 2, SHAPE(r, k), p), *bg = make(dt, 2, SHAPE(r, k), g);
        ev_tensor *bb = make(dt, 2, SHAPE(r, k), b);
        ev_tensor *tp, *tg, *tb;
        CHECK_OK(ev_transpose(bp, 0, 1, &tp));
        CHECK_OK(ev_transpose(bg, 0, 1, &tg));
        CHECK_OK(ev_transpose(bb, 0, 1, &tb));
        sgd_cfg c = {.lr = 0.1, .momentum = 0.5, .wd = 0.01};
        CHECK_OK(ev_sgd_update_(&EX, tp, tg, tb, c.lr, c.momentum, 0, c.wd, 0, 0, 0));
        (dt == EV_FLOAT32 ? ref_sgd_f32 : ref_sgd_f64)(&c, p, g, b, n, 0);
        check_exact(bp, p, n, "param");
        check_exact(bb, b, n, "momentum_buf");
        /* A contiguous grad for a transposed param is laid out otherwise. */
        ev_tensor *cg;
        CHECK_OK(ev_contiguous(&EX, tg, &cg));
        CHECK_EQ(ev_sgd_update_(&EX, tp, cg, NULL, 0.1, 0, 0, 0, 0, 0, 0), EV_EINVAL);
        CHECK_STR_CONTAINS(ev_last_message(), "grad must be laid out as param");
        ev_tensor_unref(cg);
        ev_tensor_unref(tp);
        ev_tensor_unref(tg);
        ev_tensor_unref(tb);
        ev_tensor_unref(bp);
        ev_tensor_unref(bg);
        ev_tensor_unref(bb);
        free(p);
        free(g);
        free(b);
    }
}

/* ------------------------------------------------------------- checks */

static void test_errors(void)
{
    ev_tensor *p = make(EV_FLOAT32, 1, SHAPE(4), VALS(1, 2, 3, 4));
    ev_tensor *g = make(EV_FLOAT32, 1, SHAPE(4), VALS(1, 1, 1, 1));
    ev_tensor *m = make(EV_FLOAT32, 1, SHAPE(4), VALS(0, 0, 0, 0));
    ev_tensor *v = make(EV_FLOAT32, 1, SHAPE(4), VALS(0, 0, 0, 0));
    ev_tensor *g64 = make(EV_FLOAT64, 1, SHAPE(4), VALS(1, 1, 1, 1));
    ev_tensor *g3 = make(EV_FLOAT32, 1, SHAPE(3), VALS(1, 1, 1));
    ev_tensor *pi = make(EV_INT32, 1, SHAPE(4), VALS(1, 2, 3, 4));
    ev_tensor *gi = make(EV_INT32, 1, SHAPE(4), VALS(1, 2, 3, 4));
    ev_tensor *big = make(EV_FLOAT32, 1, SHAPE(8), VALS(1, 2, 3, 4, 5, 6, 7, 8));
    ev_tensor *strided, *half, *quarter;
    CHECK_OK(ev_slice(big, 0, 0, 8, 2, &strided));
    CHECK_OK(ev_slice(big, 0, 2, 6, 1, &half));
    CHECK_OK(ev_slice(big, 0, 0, 4, 1, &quarter));

    CHECK_EQ(ev_sgd_update_(NULL, p, g, NULL, 0.1, 0, 0, 0, 0, 0, 1), EV_EINVAL);
    CHECK_EQ(ev_sgd_update_(&EX, NULL, g, NULL, 0.1, 0, 0, 0, 0, 0, 1), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "param is NULL");
    CHECK_EQ(ev_sgd_update_(&EX, p, NULL, NULL, 0.1, 0, 0, 0, 0, 0, 1), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "grad is NULL");
    CHECK_EQ(ev_sgd_update_(&EX, p, g, NULL, -1, 0, 0, 0, 0, 0, 1), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "invalid learning rate: -1");
    CHECK_EQ(ev_sgd_update_(&EX, p, g, NULL, NAN, 0, 0, 0, 0, 0, 1), EV_EINVAL);
    CHECK_EQ(ev_sgd_update_(&EX, p, g, m, 0.1, -0.5, 0, 0, 0, 0, 1), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "invalid momentum value");
    CHECK_EQ(ev_sgd_update_(&EX, p, g, NULL, 0.1, 0, 0, -1e-3, 0, 0, 1), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "invalid weight_decay value");
    CHECK_EQ(ev_sgd_update_(&EX, p, g, NULL, 0.1, 0, 0, 0, 1, 0, 1), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "Nesterov momentum requires");
    CHECK_EQ(ev_sgd_update_(&EX, p, g, m, 0.1, 0.9, 0.1, 0, 1, 0, 1), EV_EINVAL);
    CHECK_EQ(ev_sgd_update_(&EX, p, g, NULL, 0.1, 0.9, 0, 0, 0, 0, 1), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "momentum_buf is NULL");
    CHECK_EQ(ev_sgd_update_(&EX, pi, gi, NULL, 0.1, 0, 0, 0, 0, 0, 1), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "param must be float32 or float64, not int32");
    CHECK_EQ(ev_sgd_update_(&EX, p, g64, NULL, 0.1, 0, 0, 0, 0, 0, 1), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "grad has dtype float64, expected param's float32");
    CHECK_EQ(ev_sgd_update_(&EX, p, g3, NULL, 0.1, 0, 0, 0, 0, 0, 1), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "grad has shape [3], expected param's [4]");
    CHECK_EQ(ev_sgd_update_(&EX, strided, g, NULL, 0.1, 0, 0, 0, 0, 0, 1), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "param must be dense");
    CHECK_EQ(ev_sgd_update_(&EX, p, p, NULL, 0.1, 0, 0, 0, 0, 0, 1), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "param and grad share memory");
    CHECK_EQ(ev_sgd_update_(&EX, half, g, quarter, 0.1, 0.9, 0, 0, 0, 0, 1), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "param and momentum_buf share memory");

    CHECK_EQ(ev_adam_update_(&EX, p, g, m, v, NULL, 1, -1e-3, 0.9, 0.999, 1e-8, 0, 0, 0),
             EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "adam_update_: invalid learning rate");
    CHECK_EQ(ev_adam_update_(&EX, p, g, m, v, NULL, 1, 1e-3, 1.0, 0.999, 1e-8, 0, 1, 0),
             EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "adamw_update_: invalid beta parameter at index 0");
    CHECK_EQ(ev_adam_update_(&EX, p, g, m, v, NULL, 1, 1e-3, 0.9, -0.1, 1e-8, 0, 0, 0),
             EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "invalid beta parameter at index 1");
    CHECK_EQ(ev_adam_update_(&EX, p, g, m, v, NULL, 1, 1e-3, 0.9, 0.999, -1e-8, 0, 0, 0),
             EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "invalid epsilon value");
    CHECK_EQ(ev_adam_update_(&EX, p, g, m, v, NULL, 1, 1e-3, 0.9, 0.999, 1e-8, -1, 0, 0),
             EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "invalid weight_decay value");
    CHECK_EQ(ev_adam_update_(&EX, p, g, m, v, NULL, 0, 1e-3, 0.9, 0.999, 1e-8, 0, 0, 0),
             EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "step is 0, expected >= 1");
    CHECK_EQ(ev_adam_update_(&EX, p, g, NULL, v, NULL, 1, 1e-3, 0.9, 0.999, 1e-8, 0, 0, 0),
             EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "exp_avg is NULL");
    CHECK_EQ(ev_adam_update_(&EX, p, g, m, m, NULL, 1, 1e-3, 0.9, 0.999, 1e-8, 0, 0, 0),
             EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "exp_avg and exp_avg_sq share memory");
    CHECK_EQ(ev_adam_update_(&EX, p, g, m, v, g3, 1, 1e-3, 0.9, 0.999, 1e-8, 0, 0, 0),
             EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "max_exp_avg_sq has shape [3]");

    /* Nothing was issued by a failed call: the values are as they were. */
    check_exact(p, VALS(1, 2, 3, 4), 4, "param");
    check_exact(m, VALS(0, 0, 0, 0), 4, "exp_avg");
    /* momentum 0: the buffer takes no part, so it is not checked either */
    CHECK_OK(ev_sgd_update_(&EX, p, g, g3, 0.5, 0, 0, 0, 0, 0, 1));
    check_exact(p, VALS(0.5, 1.5, 2.5, 3.5), 4, "param");

    ev_tensor *all[] = {p, g, m, v, g64, g3, pi, gi, big, strided, half, quarter};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        ev_tensor_unref(all[i]);
    }
}

/* Views of one storage that do not overlap are separate tensors: a flat
 * buffer holding param and grad side by side. */
static void test_views_of_one_storage(void)
{
    ev_tensor *flat = make(EV_FLOAT32, 1, SHAPE(8), VALS(1, 2, 3, 4, 1, 1, 1, 1));
    ev_tensor *p, *g;
    CHECK_OK(ev_slice(flat, 0, 0, 4, 1, &p));
    CHECK_OK(ev_slice(flat, 0, 4, 8, 1, &g));
    CHECK_OK(ev_sgd_update_(&EX, p, g, NULL, 0.5, 0, 0, 0, 0, 0, 1));
    check_exact(flat, VALS(0.5, 1.5, 2.5, 3.5, 1, 1, 1, 1), 8, "flat");
    ev_tensor_unref(p);
    ev_tensor_unref(g);
    ev_tensor_unref(flat);
}

/* ----------------------------------------------------- many parameters */

#define NMULTI 6

/* Sizes of the parameters of a multi-tensor call: 0-d, empty, small, odd,
 * and one large enough to be split (alone it would be). */
static const int64_t multi_sizes[NMULTI] = {-1, 0, 5, 37, 1000, 70001};

typedef struct multi_set {
    ev_tensor *t[NMULTI][5]; /* param, grad, buffers */
} multi_set;

/* Two identical sets of tensors (a and b) of dtype dt, nbuf buffers each. */
static void multi_make(ev_dtype dt, int nbuf, multi_set *a, multi_set *b)
{
    for (int i = 0; i < NMULTI; i++) {
        int ndim = multi_sizes[i] < 0 ? 0 : 1;
        int64_t n = multi_sizes[i] < 0 ? 1 : multi_sizes[i];
        for (int k = 0; k < 5; k++) {
            a->t[i][k] = b->t[i][k] = NULL;
            if (k >= 2 + nbuf) {
                continue;
            }
            /* Adam's second moments must not be negative. */
            double *v = host_rand(n, k == 3 || k == 4 ? 0 : -1, 1);
            a->t[i][k] = make(dt, ndim, SHAPE(n), v);
            b->t[i][k] = make(dt, ndim, SHAPE(n), v);
            free(v);
        }
    }
}

static void multi_check_same(multi_set *a, multi_set *b)
{
    for (int i = 0; i < NMULTI; i++) {
        for (int k = 0; k < 5; k++) {
            if (!a->t[i][k]) {
                continue;
            }
            int64_t n = ev_tensor_numel(a->t[i][k]);
            double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
            CHECK(want);
            read_f64(b->t[i][k], want);
            check_exact(a->t[i][k], want, n, "multi");
            free(want);
            ev_tensor_unref(a->t[i][k]);
            ev_tensor_unref(b->t[i][k]);
        }
    }
}

/* The multi-tensor forms give the one-parameter forms' results, bit for bit. */
static void test_multi_matches_single(void)
{
    for (int d = 0; d < 2; d++) {
        ev_dtype dt = d ? EV_FLOAT64 : EV_FLOAT32;
        multi_set a, b;
        multi_make(dt, 1, &a, &b);
        for (int s = 0; s < 3; s++) {
            ev_tensor *ps[NMULTI], *gs[NMULTI], *bs[NMULTI];
            int first[NMULTI];
            for (int i = 0; i < NMULTI; i++) {
                ps[i] = a.t[i][0];
                gs[i] = a.t[i][1];
                bs[i] = a.t[i][2];
                first[i] = s == 0 && i % 2 == 0; /* some buffers start, others run */
                CHECK_OK(ev_sgd_update_(&EX, b.t[i][0], b.t[i][1], b.t[i][2], 0.1, 0.9, 0.1,
                                        0.01, 0, s == 1, first[i]));
            }
            CHECK_OK(ev_sgd_update_multi_(&EX, NMULTI, ps, gs, bs, first, 0.1, 0.9, 0.1, 0.01,
                                          0, s == 1));
        }
        multi_check_same(&a, &b);

        multi_make(dt, 3, &a, &b);
        for (int s = 1; s <= 3; s++) {
            ev_tensor *ps[NMULTI], *gs[NMULTI], *ms[NMULTI], *vs[NMULTI], *xs[NMULTI];
            int64_t steps[NMULTI];
            for (int i = 0; i < NMULTI; i++) {
                ps[i] = a.t[i][0];
                gs[i] = a.t[i][1];
                ms[i] = a.t[i][2];
                vs[i] = a.t[i][3];
                xs[i] = a.t[i][4];
                steps[i] = s + i; /* per parameter */
                CHECK_OK(ev_adam_update_(&EX, b.t[i][0], b.t[i][1], b.t[i][2], b.t[i][3],
                                         b.t[i][4], steps[i], 1e-2, 0.9, 0.99, 1e-8, 0.05, s == 2,
                                         s == 3));
            }
            /* decoupled at step 2, maximize at step 3 */
            CHECK_OK(ev_adam_update_multi_(&EX, NMULTI, ps, gs, ms, vs, xs, steps, 1e-2, 0.9,
                                           0.99, 1e-8, 0.05, s == 2, s == 3));
        }
        multi_check_same(&a, &b);
    }
}

static void test_multi_errors(void)
{
    ev_tensor *flat = make(EV_FLOAT32, 1, SHAPE(12), VALS(1, 2, 3, 4, 5, 6, 1, 1, 1, 1, 1, 1));
    ev_tensor *p0, *p1, *g0, *g1, *mid;
    CHECK_OK(ev_slice(flat, 0, 0, 3, 1, &p0));
    CHECK_OK(ev_slice(flat, 0, 3, 6, 1, &p1));
    CHECK_OK(ev_slice(flat, 0, 6, 9, 1, &g0));
    CHECK_OK(ev_slice(flat, 0, 9, 12, 1, &g1));
    CHECK_OK(ev_slice(flat, 0, 2, 5, 1, &mid));
    ev_tensor *g3 = make(EV_FLOAT32, 1, SHAPE(4), VALS(1, 1, 1, 1));

    /* Views of one storage side by side; one grad read by both: fine. */
    CHECK_OK(ev_sgd_update_multi_(&EX, 2, (ev_tensor *[]){p0, p1}, (ev_tensor *[]){g0, g0},
                                  NULL, NULL, 0.5, 0, 0, 0, 0, 0));
    check_exact(flat, VALS(0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 1, 1, 1, 1, 1, 1), 12, "flat");

    CHECK_EQ(ev_sgd_update_multi_(&EX, 2, (ev_tensor *[]){p0, p0}, (ev_tensor *[]){g0, g1},
                                  NULL, NULL, 0.5, 0, 0, 0, 0, 0), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "each parameter must be listed once");
    CHECK_EQ(ev_sgd_update_multi_(&EX, 2, (ev_tensor *[]){p0, mid}, (ev_tensor *[]){g0, g1},
                                  NULL, NULL, 0.5, 0, 0, 0, 0, 0), EV_EINVAL);
    /* Parameter 1's grad is parameter 0 (written): refused. */
    CHECK_EQ(ev_sgd_update_multi_(&EX, 2, (ev_tensor *[]){p0, p1}, (ev_tensor *[]){g0, p0},
                                  NULL, NULL, 0.5, 0, 0, 0, 0, 0), EV_EINVAL);
    CHECK_EQ(ev_sgd_update_multi_(&EX, 2, (ev_tensor *[]){p0, p1}, (ev_tensor *[]){g0, g3},
                                  NULL, NULL, 0.5, 0, 0, 0, 0, 0), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "grad has shape [4], expected param's [3] "
                                          "(parameter 1)");
    CHECK_EQ(ev_sgd_update_multi_(&EX, -1, NULL, NULL, NULL, NULL, 0.5, 0, 0, 0, 0, 0),
             EV_EINVAL);
    CHECK_EQ(ev_sgd_update_multi_(&EX, 1, (ev_tensor *[]){p0}, NULL, NULL, NULL, 0.5, 0, 0, 0,
                                  0, 0), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "grads is NULL");
    CHECK_EQ(ev_sgd_update_multi_(&EX, 1, (ev_tensor *[]){p0}, (ev_tensor *[]){g0}, NULL, NULL,
                                  0.5, 0.9, 0, 0, 0, 0), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "momentum_bufs is NULL");
    CHECK_EQ(ev_sgd_update_multi_(&EX, 1, (ev_tensor *[]){p0}, (ev_tensor *[]){g0}, NULL, NULL,
                                  -0.5, 0, 0, 0, 0, 0), EV_EINVAL);
    CHECK_EQ(ev_adam_update_multi_(&EX, 1, (ev_tensor *[]){p0}, (ev_tensor *[]){g0}, NULL,
                                   NULL, NULL, (int64_t[]){1}, 1e-3, 0.9, 0.999, 1e-8, 0, 0, 0),
             EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "exp_avgs is NULL");
    CHECK_EQ(ev_adam_update_multi_(&EX, 2, (ev_tensor *[]){p0, p1}, (ev_tensor *[]){g0, g1},
                                   (ev_tensor *[]){g0, g1}, (ev_tensor *[]){p1, g1}, NULL,
                                   (int64_t[]){1, 0}, 1e-3, 0.9, 0.999, 1e-8, 0, 0, 0),
             EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "grad and exp_avg share memory (each must be a "
                                          "tensor of its own) (parameter 0)");
    /* n == 0 is nothing to do. */
    CHECK_OK(ev_adam_update_multi_(&EX, 0, NULL, NULL, NULL, NULL, NULL, NULL, 1e-3, 0.9,
                                   0.999, 1e-8, 0, 0, 0));
    /* Nothing was issued by the failed calls. */
    check_exact(flat, VALS(0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 1, 1, 1, 1, 1, 1), 12, "flat");
    ev_tensor *all[] = {flat, p0, p1, g0, g1, mid, g3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        ev_tensor_unref(all[i]);
    }
}

/* Many small parameters in one instruction, split over the threads. */
static void test_multi_many(void)
{
    enum { N = 300 };
    ev_tensor *ps[N], *gs[N], *ms[N], *vs[N], *qs[N], *hs[N], *ns[N], *ws[N];
    int64_t steps[N];
    for (int i = 0; i < N; i++) {
        int64_t n = 1 + (i * 97) % 1500;
        double *p = host_rand(n, -1, 1), *g = host_rand(n, -1, 1);
        double *z = calloc((size_t)n, sizeof(double));
        CHECK(z);
        ps[i] = make(EV_FLOAT32, 1, SHAPE(n), p);
        qs[i] = make(EV_FLOAT32, 1, SHAPE(n), p);
        gs[i] = make(EV_FLOAT32, 1, SHAPE(n), g);
        ms[i] = make(EV_FLOAT32, 1, SHAPE(n), z);
        vs[i] = make(EV_FLOAT32, 1, SHAPE(n), z);
        hs[i] = make(EV_FLOAT32, 1, SHAPE(n), z);
        ns[i] = make(EV_FLOAT32, 1, SHAPE(n), z);
        ws[i] = NULL;
        steps[i] = 1;
        free(p);
        free(g);
        free(z);
    }
    for (int s = 0; s < 3; s++) {
        CHECK_OK(ev_adam_update_multi_(&EX, N, ps, gs, ms, vs, NULL, steps, 1e-2, 0.9, 0.999,
                                       1e-8, 0.01, 1, 0));
        for (int i = 0; i < N; i++) {
            CHECK_OK(ev_adam_update_(&EX, qs[i], gs[i], hs[i], ns[i], ws[i], steps[i], 1e-2, 0.9,
                                     0.999, 1e-8, 0.01, 1, 0));
            steps[i]++;
        }
    }
    for (int i = 0; i < N; i++) {
        int64_t n = ev_tensor_numel(ps[i]);
        double *want = malloc(sizeof(double) * (size_t)n);
        CHECK(want);
        read_f64(qs[i], want);
        check_exact(ps[i], want, n, "param");
        free(want);
        ev_tensor *all[] = {ps[i], qs[i], gs[i], ms[i], vs[i], hs[i], ns[i]};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
            ev_tensor_unref(all[k]);
        }
    }
}

/* Every update is an in-place write: it bumps the version of each tensor it
 * writes (not of the grad it reads) and names itself as the last writer. */
static void test_versions(void)
{
    ev_tensor *p = make(EV_FLOAT32, 1, SHAPE(3), VALS(1, 2, 3));
    ev_tensor *g = make(EV_FLOAT32, 1, SHAPE(3), VALS(1, 1, 1));
    ev_tensor *m = make(EV_FLOAT32, 1, SHAPE(3), VALS(0, 0, 0));
    ev_tensor *v = make(EV_FLOAT32, 1, SHAPE(3), VALS(0, 0, 0));
    uint64_t p0 = ev_tensor_version(p), g0 = ev_tensor_version(g), m0 = ev_tensor_version(m);
    CHECK_OK(ev_sgd_update_(&EX, p, g, m, 0.1, 0.9, 0, 0, 0, 0, 1));
    CHECK_EQ(ev_tensor_version(p), p0 + 1);
    CHECK_EQ(ev_tensor_version(m), m0 + 1);
    CHECK_EQ(ev_tensor_version(g), g0);
    CHECK_OK(ev_adam_update_multi_(&EX, 1, &p, &g, &m, &v, NULL, (int64_t[]){1}, 1e-3, 0.9,
                                   0.999, 1e-8, 0, 0, 0));
    CHECK_EQ(ev_tensor_version(p), p0 + 2);
    CHECK_EQ(ev_tensor_version(m), m0 + 2);
    CHECK_EQ(ev_tensor_version(g), g0);
    const char *name;
    const ev_site *site;
    ev_tensor_last_write(v, &name, &site);
    CHECK_STR_CONTAINS(name, "adam_update_multi_");
    CHECK(site == &test_site);
    ev_tensor_unref(p);
    ev_tensor_unref(g);
    ev_tensor_unref(m);
    ev_tensor_unref(v);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_sgd_variants);
    RUN_TEST(test_sgd_edges);
    RUN_TEST(test_adam_variants);
    RUN_TEST(test_adam_long);
    RUN_TEST(test_adam_amsgrad_nan);
    RUN_TEST(test_transposed);
    RUN_TEST(test_errors);
    RUN_TEST(test_views_of_one_storage);
    RUN_TEST(test_multi_matches_single);
    RUN_TEST(test_multi_errors);
    RUN_TEST(test_multi_many);
    RUN_TEST(test_versions);
    test_teardown();
    return 0;
}
