/* Random numbers: the Philox4x32-10 counter-based generator, generator
 * objects, and rand/randn/randint/uniform_/normal_/randperm, each one
 * instruction whose values depend only on (seed, offset, element index).
 *
 * Lock order: a generator's lock is a leaf. It is held only to read or move
 * the state, never while allocating or calling into the engine, so it nests
 * inside nothing and nothing nests inside it. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "ops/ops-impl.h"

/* ------------------------------------------------------------------ Philox */

/* Constants of Philox4x32 (Salmon, Moraes, Dror, Shaw: "Parallel random
 * numbers: as easy as 1, 2, 3", SC'11; Random123's philox.h). */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u /* golden ratio */
#define PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

/* One Philox4x32-10 block: 10 rounds of two 32x32->64 multiplies, with the
 * key bumped by the Weyl constants between rounds. Checked against the
 * Random123 known-answer vectors (tests/tensor/test_random.c). */
static void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* A reader of the word stream of one call, caching the last block so the
 * four lanes of a block cost one Philox evaluation. */
typedef struct words {
    uint32_t key[2];
    uint64_t base;     /* first block of the call */
    uint64_t cached;   /* block index (relative to base) held in x */
    int valid;
    uint32_t x[4];
} words;

static const uint32_t *block_at(words *w, uint64_t blk)
{
    if (!w->valid || w->cached != blk) {
        uint64_t c = w->base + blk;
        uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0, 0};
        philox4x32_10(ctr, w->key, w->x);
        w->cached = blk;
        w->valid = 1;
    }
    return w->x;
}

/* Word k of the call. */
static uint32_t word32(words *w, uint64_t k)
{
    return block_at(w, k / 4)[k % 4];
}

/* Words k and k+1 (k even) as one 64-bit value, the lower word first. */
static uint64_t word64(words *w, uint64_t k)
{
    const uint32_t *x = block_at(w, k / 4);
    return (uint64_t)x[k % 4] | (uint64_t)x[k % 4 + 1] << 32;
}

/* The high and low 64 bits of a * b, portably. */
static void mul64(uint64_t a, uint64_t b, uint64_t *hi, uint64_t *lo)
{
    uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (uint32_t)p01 + (uint32_t)p10;
    *hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
    *lo = (mid << 32) | (uint32_t)p00;
}

/* floor(r * n / 2^128) for the 128-bit r = hi:lo. */
static uint64_t mulhi128(uint64_t r_hi, uint64_t r_lo, uint64_t n)
{
    uint64_t h1, l1, h0, l0;
    mul64(r_hi, n, &h1, &l1);
    mul64(r_lo, n, &h0, &l0);
    (void)l0;
    uint64_t s = l1 + h0;
    return h1 + (s < l1);
}

/* ------------------------------------------------------------- generators */

struct ev_generator {
    pthread_mutex_t lock; /* guards seed and offset; a leaf lock */
    uint64_t seed;
    uint64_t offset;      /* 32-bit words consumed; a multiple of 4 */
    int is_default;       /* the static default: never freed */
};

static ev_generator default_gen = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 1};

ev_generator *ev_default_generator(void)
{
    return &default_gen;
}

int ev_generator_create(uint64_t seed, ev_generator **out)
{
    if (!out) {
        return ev__set_message(EV_EINVAL, "generator_create: out is NULL");
    }
    ev_generator *g = ev__malloc(sizeof *g);
    if (!g) {
        return ev__set_message(EV_ENOMEM, "generator_create: out of memory");
    }
    if (pthread_mutex_init(&g->lock, NULL) != 0) {
        ev__free(g);
        return ev__set_message(EV_ENOMEM, "generator_create: cannot create its lock");
    }
    g->seed = seed;
    g->offset = 0;
    g->is_default = 0;
    *out = g;
    return 0;
}

void ev_generator_destroy(ev_generator *gen)
{
    if (!gen || gen->is_default) {
        return;
    }
    pthread_mutex_destroy(&gen->lock);
    ev__free(gen);
}

void ev_generator_manual_seed(ev_generator *gen, uint64_t seed)
{
    ev_generator *g = gen ? gen : &default_gen;
    pthread_mutex_lock(&g->lock);
    g->seed = seed;
    g->offset = 0;
    pthread_mutex_unlock(&g->lock);
}

int ev_generator_get_state(ev_generator *gen, ev_generator_state *out)
{
    if (!out) {
        return ev__set_message(EV_EINVAL, "generator_get_state: out is NULL");
    }
    ev_generator *g = gen ? gen : &default_gen;
    pthread_mutex_lock(&g->lock);
    out->seed = g->seed;
    out->offset = g->offset;
    pthread_mutex_unlock(&g->lock);
    return 0;
}

int ev_generator_set_state(ev_generator *gen, const ev_generator_state *state)
{
    if (!state) {
        return ev__set_message(EV_EINVAL, "generator_set_state: state is NULL");
    }
    if (state->offset % 4 != 0) {
        return ev__set_message(EV_EINVAL, "generator_set_state: offset %llu is not a "
                               "multiple of 4", (unsigned long long)state->offset);
    }
    ev_generator *g = gen ? gen : &default_gen;
    pthread_mutex_lock(&g->lock);
    g->seed = state->seed;
    g->offset = state->offset;
    pthread_mutex_unlock(&g->lock);
    return 0;
}

/* Reserves numel * w words (rounded up to a whole block) on the calling
 * thread and fills the key and first block of w. Program order of calls on
 * one generator decides which call gets which counters. */
static void reserve(ev_generator *gen, int64_t numel, int wpe, words *w)
{
    ev_generator *g = gen ? gen : &default_gen;
    /* numel <= INT64_MAX / 16 (ev__check_shape), so this cannot overflow. */
    uint64_t n = ((uint64_t)numel * (uint64_t)wpe + 3) / 4 * 4;
    pthread_mutex_lock(&g->lock);
    uint64_t seed = g->seed, offset = g->offset;
    g->offset = offset + n;
    pthread_mutex_unlock(&g->lock);
    memset(w, 0, sizeof *w);
    w->key[0] = (uint32_t)seed;
    w->key[1] = (uint32_t)(seed >> 32);
    w->base = offset / 4;
}

/* ------------------------------------------------------------------ kernel */

enum { DIST_UNIFORM, DIST_NORMAL, DIST_INT };

typedef struct rand_arg {
    ev_tensor *t;      /* referenced; the tensor written */
    words w;           /* key and first block, fixed at the call */
    int dist;
    int wpe;           /* words per element */
    double a, b;       /* uniform: lo, hi (rounded to t's dtype); normal: mean, std */
    int64_t low;       /* randint: low and high - low */
    uint64_t range;
} rand_arg;
_Static_assert(sizeof(rand_arg) <= EV_INLINE_ARG_SIZE, "rand_arg must travel inline");

static void rand_drop(void *p)
{
    ev_tensor_unref(((rand_arg *)p)->t);
}

/* Elements per block generated before conversion: stays in L1. */
#define CHUNK 256

typedef struct rand_state {
    rand_arg *a;
    int64_t next; /* C-order index of the next element */
} rand_state;

/* Uniform values in [lo, hi) for elements e0 .. e0+m-1, exact in t's dtype. */
static void gen_uniform(rand_arg *a, int64_t e0, int64_t m, double *buf)
{
    double lo = a->a, hi = a->b, span = hi - lo;
    if (a->t->dtype == EV_FLOAT32) {
        float fhi = (float)hi, below = nextafterf(fhi, -INFINITY);
        for (int64_t j = 0; j < m; j++) {
            uint32_t x = word32(&a->w, (uint64_t)(e0 + j));
            float v = (float)(lo + span * ((double)(x >> 8) * 0x1p-24));
            buf[j] = v >= fhi && lo < hi ? below : v;
        }
        return;
    }
    double below = nextafter(hi, -INFINITY);
    for (int64_t j = 0; j < m; j++) {
        uint64_t r = word64(&a->w, 2 * (uint64_t)(e0 + j));
        double v = lo + span * ((double)(r >> 11) * 0x1p-53);
        buf[j] = v >= hi && lo < hi ? below : v;
    }
}

/* mean + std * z; elements 2j and 2j+1 are the two halves of pair j. */
static void gen_normal(rand_arg *a, int64_t e0, int64_t m, double *buf)
{
    for (int64_t j = 0; j < m; j++) {
        uint64_t e = (uint64_t)(e0 + j);
        const uint32_t *x = block_at(&a->w, e / 2);
        uint64_t r1 = (uint64_t)x[0] | (uint64_t)x[1] << 32;
        uint64_t r2 = (uint64_t)x[2] | (uint64_t)x[3] << 32;
        /* u1 in (0, 1] keeps log finite; u2 in [0, 1). */
        double u1 = (double)((r1 >> 11) + 1) * 0x1p-53;
        double u2 = (double)(r2 >> 11) * 0x1p-53;
        double rad = sqrt(-2.0 * log(u1));
        double th = 2.0 * M_PI * u2;
        double z = e % 2 == 0 ? rad * cos(th) : rad * sin(th);
        buf[j] = a->a + a->b * z;
    }
}

static void gen_int(rand_arg *a, int64_t e0, int64_t m, int64_t *buf)
{
    for (int64_t j = 0; j < m; j++) {
        uint64_t e = (uint64_t)(e0 + j), v;
        if (a->wpe == 2) {
            uint64_t hi, lo;
            mul64(word64(&a->w, 2 * e), a->range, &hi, &lo);
            v = hi;
        } else {
            v = mulhi128(word64(&a->w, 4 * e + 2), word64(&a->w, 4 * e), a->range);
        }
        /* In range by construction; unsigned so the sum cannot overflow. */
        buf[j] = (int64_t)((uint64_t)a->low + v);
    }
}

/* Rows arrive in C order, so a running element index names each value. */
static void rand_row(char **ptrs, const int64_t *strides, int64_t n, void *user)
{
    rand_state *st = user;
    rand_arg *a = st->a;
    double fbuf[CHUNK];
    int64_t ibuf[CHUNK];
    for (int64_t j0 = 0; j0 < n; j0 += CHUNK) {
        int64_t m = n - j0 < CHUNK ? n - j0 : CHUNK;
        char *dst = ptrs[0] + j0 * strides[0];
        if (a->dist == DIST_INT) {
            gen_int(a, st->next, m, ibuf);
            ev__cast_strided(dst, a->t->dtype, strides[0], ibuf, EV_INT64, 8, m);
        } else {
            if (a->dist == DIST_UNIFORM) {
                gen_uniform(a, st->next, m, fbuf);
            } else {
                gen_normal(a, st->next, m, fbuf);
            }
            /* Exact for uniform values (already in the dtype); rounds normal
             * values to float32. */
            ev__cast_strided(dst, a->t->dtype, strides[0], fbuf, EV_FLOAT64, 8, m);
        }
        st->next += m;
    }
}

static int rand_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    rand_arg *a = p;
    ev__iter it;
    ev__iter_init(&it, 1, &a->t);
    rand_state st = {a, 0};
    ev__iter_rows(&it, rand_row, &st);
    return 0;
}

/* --------------------------------------------------------------------- ops */

/* Reserves t's counters from gen and issues the one instruction that writes
 * t. Takes a reference to t for the instruction; the caller keeps its own. */
static int submit(const ev_exec *ex, const char *name, ev_generator *gen, rand_arg *a,
                  ev_tensor *t)
{
    reserve(gen, t->numel, a->wpe, &a->w);
    a->t = ev_tensor_ref(t);
    return ev__submit(ex, name, rand_kernel, a, sizeof *a, rand_drop, NULL, 0, &t, 1);
}

static int check_dtype(const char *fn, ev_dtype dtype, int want_kind)
{
    const ev_dtype_info *info = ev_dtype_get_info(dtype);
    if (!info) {
        return ev__set_message(EV_EINVAL, "%s: invalid dtype %d", fn, (int)dtype);
    }
    if (info->kind != want_kind) {
        return ev__set_message(EV_ETYPE, "%s: dtype %s is not supported (expected %s)", fn,
                               info->name, want_kind == EV_KIND_FLOAT
                                               ? "float32 or float64"
                                               : "an integer dtype");
    }
    return 0;
}

/* Checks the arguments common to the creating ops and allocates the output. */
static int new_output(const char *fn, const ev_exec *ex, ev_dtype dtype, int kind, int ndim,
                      const int64_t *shape, ev_tensor **out, ev_tensor **t)
{
    int rc;
    if ((rc = ev__check_exec(fn, ex)) || (rc = check_dtype(fn, dtype, kind)) ||
        (rc = ev__check_shape(fn, ndim, shape))) {
        return rc;
    }
    if (!out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", fn);
    }
    return ev__tensor_new(fn, ex, dtype, ndim, shape, t);
}

/* Issues a on a new tensor and hands it to *out. */
static int create(const ev_exec *ex, const char *fn, ev_generator *gen, rand_arg *a,
                  ev_dtype dtype, int kind, int ndim, const int64_t *shape, ev_tensor **out)
{
    ev_tensor *t;
    int rc = new_output(fn, ex, dtype, kind, ndim, shape, out, &t);
    if (rc) {
        return rc;
    }
    rc = submit(ex, fn, gen, a, t);
    if (rc) {
        ev_tensor_unref(t);
        return rc;
    }
    *out = t;
    return 0;
}

int ev_rand(const ev_exec *ex, ev_generator *gen, ev_dtype dtype, int ndim,
            const int64_t *shape, ev_tensor **out)
{
    rand_arg a;
    memset(&a, 0, sizeof a);
    a.dist = DIST_UNIFORM;
    a.wpe = dtype == EV_FLOAT32 ? 1 : 2;
    a.a = 0.0;
    a.b = 1.0;
    return create(ex, "rand", gen, &a, dtype, EV_KIND_FLOAT, ndim, shape, out);
}

int ev_randn(const ev_exec *ex, ev_generator *gen, ev_dtype dtype, int ndim,
             const int64_t *shape, ev_tensor **out)
{
    rand_arg a;
    memset(&a, 0, sizeof a);
    a.dist = DIST_NORMAL;
    a.wpe = 2;
    a.a = 0.0;
    a.b = 1.0;
    return create(ex, "randn", gen, &a, dtype, EV_KIND_FLOAT, ndim, shape, out);
}

int ev_randint(const ev_exec *ex, ev_generator *gen, int64_t low, int64_t high,
               ev_dtype dtype, int ndim, const int64_t *shape, ev_tensor **out)
{
    if (high <= low) {
        return ev__set_message(EV_EINVAL, "randint: high (%lld) must be greater than low "
                               "(%lld)", (long long)high, (long long)low);
    }
    int64_t mn, mx;
    if (ev_dtype_get_info(dtype) && ev_dtype_get_info(dtype)->kind == EV_KIND_INT &&
        ev_dtype_int_range(dtype, &mn, &mx) == 0 && (low < mn || high - 1 > mx)) {
        return ev__set_message(EV_EINVAL, "randint: the range [%lld, %lld) does not fit "
                               "dtype %s", (long long)low, (long long)high,
                               ev_dtype_name(dtype));
    }
    rand_arg a;
    memset(&a, 0, sizeof a);
    a.dist = DIST_INT;
    a.low = low;
    a.range = (uint64_t)high - (uint64_t)low;
    /* 64 random bits leave a bias below 2^-32 up to n = 2^32; wider ranges
     * take 128 bits so the bias stays below 2^-64. */
    a.wpe = a.range <= (uint64_t)1 << 32 ? 2 : 4;
    return create(ex, "randint", gen, &a, dtype, EV_KIND_INT, ndim, shape, out);
}

/* Checks an in-place target: a float tensor whose elements do not alias. */
static int check_target(const char *fn, const ev_exec *ex, ev_tensor *t)
{
    int rc;
    if ((rc = ev__check_exec(fn, ex)) || (rc = ev__check_tensor(fn, "t", t)) ||
        (rc = check_dtype(fn, t->dtype, EV_KIND_FLOAT))) {
        return rc;
    }
    if (ev__has_internal_overlap(t)) {
        return ev__set_message(EV_EINVAL, "%s: the tensor is expanded (some elements share "
                               "memory)", fn);
    }
    return 0;
}

int ev_uniform_(const ev_exec *ex, ev_generator *gen, ev_tensor *t, double lo, double hi)
{
    int rc = check_target("uniform_", ex, t);
    if (rc) {
        return rc;
    }
    /* The largest span the dtype holds; converting beyond it is undefined. */
    double max = t->dtype == EV_FLOAT32 ? FLT_MAX : DBL_MAX;
    if (!(fabs(lo) <= max) || !(fabs(hi) <= max) || !(lo <= hi) || !(hi - lo <= max)) {
        return ev__set_message(EV_EINVAL, "uniform_: need finite lo <= hi with a finite "
                               "hi - lo in %s (got lo=%g, hi=%g)", ev_dtype_name(t->dtype),
                               lo, hi);
    }
    if (t->dtype == EV_FLOAT32) {
        /* The bounds of a float32 tensor are float32 values. */
        lo = (float)lo;
        hi = (float)hi;
    }
    rand_arg a;
    memset(&a, 0, sizeof a);
    a.dist = DIST_UNIFORM;
    a.wpe = t->dtype == EV_FLOAT32 ? 1 : 2;
    a.a = lo;
    a.b = hi;
    return submit(ex, "uniform_", gen, &a, t);
}

int ev_normal_(const ev_exec *ex, ev_generator *gen, ev_tensor *t, double mean, double std)
{
    int rc = check_target("normal_", ex, t);
    if (rc) {
        return rc;
    }
    if (!isfinite(mean) || !isfinite(std) || !(std >= 0)) {
        return ev__set_message(EV_EINVAL, "normal_: need a finite mean and a finite std >= 0 "
                               "(got mean=%g, std=%g)", mean, std);
    }
    rand_arg a;
    memset(&a, 0, sizeof a);
    a.dist = DIST_NORMAL;
    a.wpe = 2;
    a.a = mean;
    a.b = std;
    return submit(ex, "normal_", gen, &a, t);
}

/* --------------------------------------------------------------- randperm */

typedef struct perm_arg {
    ev_tensor *t;  /* referenced; contiguous, n elements */
    words w;       /* key and first block, fixed at the call */
} perm_arg;
_Static_assert(sizeof(perm_arg) <= EV_INLINE_ARG_SIZE, "perm_arg must travel inline");

static void perm_drop(void *p)
{
    ev_tensor_unref(((perm_arg *)p)->t);
}

/* The partner of position i: uniform in [0, i], from words 2i and 2i+1
 * whatever happened before, so the permutation is a pure function of the
 * counters reserved at the call (Fisher-Yates from the top). */
static int64_t perm_draw(words *w, int64_t i)
{
    uint64_t hi, lo;
    mul64(word64(w, 2 * (uint64_t)i), (uint64_t)i + 1, &hi, &lo);
    return (int64_t)hi;
}

#define PERM_SHUFFLE(T)                                   \
    do {                                                  \
        T *v = (T *)ev__tensor_ptr(a->t);                 \
        for (int64_t i = 0; i < n; i++) {                 \
            v[i] = (T)i;                                  \
        }                                                 \
        for (int64_t i = n - 1; i > 0; i--) {             \
            int64_t j = perm_draw(&a->w, i);              \
            T tmp = v[i];                                 \
            v[i] = v[j];                                  \
            v[j] = tmp;                                   \
        }                                                 \
    } while (0)

static int perm_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    perm_arg *a = p;
    int64_t n = a->t->numel;
    if (n == 0) {
        return 0;
    }
    switch (a->t->dtype) {
    case EV_INT32: PERM_SHUFFLE(int32_t); break;
    case EV_UINT8: PERM_SHUFFLE(uint8_t); break;
    case EV_INT8: PERM_SHUFFLE(int8_t); break;
    case EV_INT16: PERM_SHUFFLE(int16_t); break;
    default: PERM_SHUFFLE(int64_t); break;
    }
    return 0;
}

int ev_randperm(const ev_exec *ex, ev_generator *gen, int64_t n, ev_dtype dtype,
                ev_tensor **out)
{
    const char *fn = "randperm";
    if (n < 0) {
        return ev__set_message(EV_EINVAL, "%s: n must be >= 0, not %lld", fn, (long long)n);
    }
    const ev_dtype_info *info = ev_dtype_get_info(dtype);
    if (!info || info->kind != EV_KIND_INT) {
        return ev__set_message(info ? EV_ETYPE : EV_EINVAL, "%s: dtype %s is not supported "
                               "(expected an integer dtype)", fn, info ? info->name : "invalid");
    }
    int64_t mn, mx;
    ev_dtype_int_range(dtype, &mn, &mx);
    if (n - 1 > mx) {
        return ev__set_message(EV_EINVAL, "%s: n = %lld does not fit dtype %s", fn,
                               (long long)n, info->name);
    }
    ev_tensor *t;
    int rc = new_output(fn, ex, dtype, EV_KIND_INT, 1, &n, out, &t);
    if (rc) {
        return rc;
    }
    perm_arg a;
    memset(&a, 0, sizeof a);
    reserve(gen, n, 2, &a.w);
    a.t = ev_tensor_ref(t);
    rc = ev__submit(ex, fn, perm_kernel, &a, sizeof a, perm_drop, NULL, 0, &t, 1);
    if (rc) {
        ev_tensor_unref(t);
        return rc;
    }
    *out = t;
    return 0;
}
