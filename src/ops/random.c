/* Random numbers: the Philox4x32-10 counter-based generator, generator
 * objects, and rand/randn/randint/uniform_/normal_/randperm, each one
 * instruction whose values depend only on (seed, offset, element index).
 * Kernels generate whole blocks in vector loops and split large tensors
 * over the intra-op threads by element index, so neither the CPU's vector
 * width nor the split changes a bit of the result.
 *
 * Lock order: a generator's lock is a leaf. It is held only to read or move
 * the state, never while allocating or calling into the engine, so it nests
 * inside nothing and nothing nests inside it. */
/* The vectorizing options of src/ops/unary.c (see there). The elementary
 * functions below are this file's own rather than vmath.h's: each needs
 * only the range Box-Muller gives it (u in (0, 1], an exact reduction of
 * 2 pi u), which makes them shorter. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap", "no-trapping-math", \
                     "fp-contract=off")
#endif

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "ops/ops-impl.h"

#ifdef EV__SIMD_CLONES_BUILT
#include <immintrin.h> /* the AVX-512 and AVX2 Philox loops */
#endif

/* ------------------------------------------------------------------ Philox */

/* Constants of Philox4x32 (Salmon, Moraes, Dror, Shaw: "Parallel random
 * numbers: as easy as 1, 2, 3", SC'11; Random123's philox.h). */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u /* golden ratio */
#define PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

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

/* The counters of one call: its key and first block. */
typedef struct counters {
    uint32_t key[2];
    uint64_t base;
} counters;

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
static void reserve(ev_generator *gen, int64_t numel, int wpe, counters *w)
{
    ev_generator *g = gen ? gen : &default_gen;
    /* numel <= INT64_MAX / 16 (ev__check_shape), so this cannot overflow. */
    uint64_t n = ((uint64_t)numel * (uint64_t)wpe + 3) / 4 * 4;
    pthread_mutex_lock(&g->lock);
    uint64_t seed = g->seed, offset = g->offset;
    g->offset = offset + n;
    pthread_mutex_unlock(&g->lock);
    w->key[0] = (uint32_t)seed;
    w->key[1] = (uint32_t)(seed >> 32);
    w->base = offset / 4;
}

/* ------------------------------------------------------------------ kernel
 *
 * The generators work on whole Philox blocks, many at once: a vector loop
 * computes the words of a piece of blocks (one block per lane), and another
 * turns them into the blocks' elements. A block's counter is its index, so
 * any range of elements can be generated on its own: the kernel splits a
 * large tensor over the intra-op threads and every split gives the same
 * bits. */

/* The ten round keys of a seed (the Weyl sequence), shared by every block. */
typedef struct round_keys {
    uint32_t k0[10], k1[10];
} round_keys;

static void round_keys_init(round_keys *rk, const uint32_t key[2])
{
    for (int r = 0; r < 10; r++) {
        rk->k0[r] = key[0] + (uint32_t)r * PHILOX_W0;
        rk->k1[r] = key[1] + (uint32_t)r * PHILOX_W1;
    }
}

/* One round of Philox4x32 on the words c0..c3: two 32x32->64 multiplies,
 * their halves crossed and XORed with the round key (Random123's philox.h;
 * tests/tensor/test_random.c checks its known answers). */
#define PHILOX_ROUND(R)                                              \
    do {                                                             \
        uint64_t p0_ = (uint64_t)PHILOX_M0 * c0;                     \
        uint64_t p1_ = (uint64_t)PHILOX_M1 * c2;                     \
        uint32_t n0_ = (uint32_t)(p1_ >> 32) ^ c1 ^ rk->k0[R];       \
        uint32_t n2_ = (uint32_t)(p0_ >> 32) ^ c3 ^ rk->k1[R];       \
        c1 = (uint32_t)p1_;                                          \
        c3 = (uint32_t)p0_;                                          \
        c0 = n0_;                                                    \
        c2 = n2_;                                                    \
    } while (0)

/* Declares c0..c3 as the words of block b0 + i (a 64-bit counter kept in two
 * 32-bit lanes, the carry by comparison), written out round by round: GCC
 * vectorizes only a loop whose body has no inner loop left. */
#define PHILOX_BLOCK(b0, i)                                                    \
    uint32_t c0 = (uint32_t)(b0) + (uint32_t)(i);                              \
    uint32_t c1 = (uint32_t)((b0) >> 32) + (uint32_t)(c0 < (uint32_t)(b0));    \
    uint32_t c2 = 0, c3 = 0;                                                   \
    PHILOX_ROUND(0);                                                           \
    PHILOX_ROUND(1);                                                           \
    PHILOX_ROUND(2);                                                           \
    PHILOX_ROUND(3);                                                           \
    PHILOX_ROUND(4);                                                           \
    PHILOX_ROUND(5);                                                           \
    PHILOX_ROUND(6);                                                           \
    PHILOX_ROUND(7);                                                           \
    PHILOX_ROUND(8);                                                           \
    PHILOX_ROUND(9)

static inline uint64_t join64(uint32_t lo, uint32_t hi)
{
    return (uint64_t)lo | (uint64_t)hi << 32;
}

static inline double as_f64(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static inline uint64_t f64_bits(double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    return bits;
}

/* (r >> 11) * 2^-53 exactly, without a 64-bit integer conversion (which only
 * AVX-512 has in vector form): the top 52 bits as the mantissa of a double
 * in [1, 2), minus 1, plus the 53rd bit; every step is exact. */
static inline double u53(uint64_t r)
{
    double hi = as_f64(r >> 12 | 0x3ff0000000000000u) - 1.0;
    return hi + ((r >> 11 & 1) ? 0x1p-53 : 0.0);
}

/* The top 24 bits of a word as a float in [0, 1). */
static inline float u24(uint32_t x)
{
    return (float)(int32_t)(x >> 8) * 0x1p-24f;
}

/* ------------------------------------------- sin and cos of 2 pi u, u in [0, 1)
 *
 * The angle of Box-Muller is 2 pi u with u a multiple of 2^-24 or 2^-53, so
 * the reduction to a quadrant is exact: y = 4u, q = round(y), f = y - q in
 * [-1/2, 1/2], and the angle is q pi/2 + a with a = f pi/2 in [-pi/4, pi/4],
 * where one polynomial each gives sin a and cos a (Cephes' sinf/cosf in
 * float32, fdlibm's kernels in float64, each about 1 ulp). The quadrant
 * swaps and negates them by selects. */
static inline void sincos2pi_f32(float u, float *s, float *c)
{
    float y = u * 4.0f;
    float q = (y + 12582912.0f) - 12582912.0f; /* round to nearest, 1.5 * 2^23 */
    float a = (y - q) * 1.57079632679489662f;
    float z = a * a;
    float sa = ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * a + a;
    float ca = ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z +
                4.166664568298827e-2f) * z * z - 0.5f * z + 1.0f;
    int qi = (int)q & 3;
    float sv = qi & 1 ? ca : sa;
    float cv = qi & 1 ? sa : ca;
    *s = qi & 2 ? -sv : sv;
    *c = (qi + 1) & 2 ? -cv : cv;
}

static inline void sincos2pi_f64(double u, double *s, double *c)
{
    double y = u * 4.0;
    double q = (y + 0x1.8p52) - 0x1.8p52;
    double a = (y - q) * 1.57079632679489661923;
    double z = a * a;
    double sa = a + a * z * (-1.66666666666666324348e-01 +
                z * (8.33333333332248946124e-03 +
                z * (-1.98412698298579493134e-04 +
                z * (2.75573137070700676789e-06 +
                z * (-2.50507602534068634195e-08 +
                z * 1.58969099521155010221e-10)))));
    double ca = 1.0 - 0.5 * z + z * z * (4.16666666666666019037e-02 +
                z * (-1.38888888888741095749e-03 +
                z * (2.48015872894767294178e-05 +
                z * (-2.75573143513906633035e-07 +
                z * (2.08757232129817482790e-09 +
                z * -1.13596475577881948265e-11)))));
    /* q is 0..4; its low bits come from the double's mantissa. */
    uint64_t qi = f64_bits(y + 0x1.8p52) & 3;
    double sv = qi & 1 ? ca : sa;
    double cv = qi & 1 ? sa : ca;
    *s = qi & 2 ? -sv : sv;
    *c = (qi + 1) & 2 ? -cv : cv;
}

/* sqrt v for v >= 0 that vectorizes: sqrtf's errno branch (math-errno is on
 * and a pragma cannot turn it off) keeps a loop that calls it scalar. The
 * bit trick's 1/sqrt estimate (3.4% off), Newton steps that square the
 * error, then one step on v y itself, leave 1-2 ulp; v = 0 gives 0. */
static inline float sqrt_pos_f32(float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    bits = 0x5f3759dfu - (bits >> 1);
    float y;
    memcpy(&y, &bits, sizeof y);
    float hv = 0.5f * v;
    y = y * (1.5f - hv * y * y);
    y = y * (1.5f - hv * y * y);
    float s = v * y;
    return s + 0.5f * y * (v - s * s);
}

static inline double sqrt_pos_f64(double v)
{
    double y = as_f64(0x5fe6eb50c7b537a9u - (f64_bits(v) >> 1));
    double hv = 0.5 * v;
    y = y * (1.5 - hv * y * y);
    y = y * (1.5 - hv * y * y);
    y = y * (1.5 - hv * y * y);
    double s = v * y;
    return s + 0.5 * y * (v - s * s);
}

/* log u for u in [2^-33, 1]: the log_f32 of vmath.h (as of this writing;
 * Cephes' polynomial, about 1 ulp) without the special cases (zero,
 * negative, subnormal, inf, NaN), which cannot occur here. */
static inline float log_unit_f32(float u)
{
    uint32_t bits;
    memcpy(&bits, &u, sizeof bits);
    int32_t e = (int32_t)(bits >> 23) - 126;
    bits = (bits & 0x007fffffu) | 0x3f000000u; /* m in [0.5, 1) */
    float m;
    memcpy(&m, &bits, sizeof m);
    int small = m < 0.707106781186547524f;
    float ef = (float)(small ? e - 1 : e);
    float t = small ? m + m - 1.0f : m - 1.0f;
    float z = t * t;
    float y = ((((((((7.0376836292e-2f * t - 1.1514610310e-1f) * t + 1.1676998740e-1f) * t -
                    1.2420140846e-1f) * t + 1.4249322787e-1f) * t - 1.6668057665e-1f) * t +
                 2.0000714765e-1f) * t - 2.4999993993e-1f) * t + 3.3333331174e-1f) * t * z;
    y += -2.12194440e-4f * ef;
    y += -0.5f * z;
    float r = t + y;
    return r + 0.693359375f * ef;
}

/* log u for u in (0, 1], not subnormal (so no special cases): fdlibm's
 * e_log.c, about 1 ulp. u = 2^k m with m in [sqrt(2)/2, sqrt(2)), then
 * log m = f - f^2/2 + s (f^2/2 + R(s^2)) with f = m - 1, s = f / (2 + f). */
static inline double log_unit_f64(double u)
{
    /* Shifting by the bits of sqrt(2)/2 puts m's range on an exponent edge. */
    uint64_t ix = f64_bits(u) + (0x3ff0000000000000u - 0x3fe6a09e667f3bcdu);
    int64_t k = (int64_t)(ix >> 52) - 1023;
    double m = as_f64((ix & 0x000fffffffffffffu) + 0x3fe6a09e667f3bcdu);
    double dk = as_f64(0x4338000000000000u + (uint64_t)k) - 0x1.8p52; /* exact */
    double f = m - 1.0;
    double hfsq = 0.5 * f * f;
    double s = f / (2.0 + f);
    double z = s * s;
    double w = z * z;
    double t1 = w * (3.999999999940941908e-01 + w * (2.222219843214978396e-01 +
                w * 1.531383769920937332e-01));
    double t2 = z * (6.666666666666735130e-01 + w * (2.857142874366239149e-01 +
                w * (1.818357216161805012e-01 + w * 1.479819860511658591e-01)));
    double r = t2 + t1;
    return s * (hfsq + r) + dk * 1.90821492927058770002e-10 - hfsq + f +
           dk * 6.93147180369123816490e-01;
}

/* ------------------------------------------------------ block generators
 *
 * philox_words writes the words of blocks b0 .. b0 + nb - 1 in order; the
 * loops after it turn a piece of words into elements. Split so that the
 * Philox loop, the bulk of the work, can have hand-written AVX-512 and AVX2
 * forms (GCC's own vectorization of the 32x32->64 multiplies spends most of
 * its instructions moving lanes around, 2.2x slower); every form gives the
 * same bits. */

/* Blocks a piece of words holds (4 KiB on the stack). */
#define WORD_BLOCKS 256

EV__SIMD_CLONES
static void philox_words_c(const round_keys *restrict rk, uint64_t b0, int nb,
                           uint32_t *restrict w)
{
    for (int i = 0; i < nb; i++) {
        PHILOX_BLOCK(b0, i);
        w[4 * i] = c0;
        w[4 * i + 1] = c1;
        w[4 * i + 2] = c2;
        w[4 * i + 3] = c3;
    }
}

#ifdef EV__SIMD_CLONES_BUILT
/* Eight blocks a step, one per 64-bit lane with its word in the low half:
 * vpmuludq multiplies exactly those halves, so a round is two multiplies,
 * two shifts and two three-way XORs, and the high halves' leftovers never
 * reach a result (the multiplies ignore them, the end truncates them). The
 * counters are 64-bit lane additions, carries included. */
__attribute__((target("arch=x86-64-v4")))
static void philox_words_avx512(const round_keys *restrict rk, uint64_t b0, int nb,
                                uint32_t *restrict w)
{
    const __m512i m0 = _mm512_set1_epi64(PHILOX_M0), m1 = _mm512_set1_epi64(PHILOX_M1);
    const __m512i iota = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    /* Word l of block j lands at 4 j + l: two permutes of (c0 | c1, c2 | c3). */
    const __m512i lo4 = _mm512_set_epi32(27, 19, 11, 3, 26, 18, 10, 2, 25, 17, 9, 1, 24, 16, 8, 0);
    const __m512i hi4 = _mm512_set_epi32(31, 23, 15, 7, 30, 22, 14, 6, 29, 21, 13, 5, 28, 20, 12, 4);
    __m512i k0[10], k1[10];
    for (int r = 0; r < 10; r++) {
        k0[r] = _mm512_set1_epi64(rk->k0[r]);
        k1[r] = _mm512_set1_epi64(rk->k1[r]);
    }
    int i = 0;
    for (; i + 8 <= nb; i += 8) {
        __m512i ctr = _mm512_add_epi64(_mm512_set1_epi64((long long)(b0 + (uint64_t)i)), iota);
        __m512i c0 = ctr, c1 = _mm512_srli_epi64(ctr, 32);
        __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
        for (int r = 0; r < 10; r++) {
            __m512i p0 = _mm512_mul_epu32(c0, m0), p1 = _mm512_mul_epu32(c2, m1);
            /* 0x96: a ^ b ^ c */
            c0 = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), c1, k0[r], 0x96);
            c2 = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), c3, k1[r], 0x96);
            c1 = p1;
            c3 = p0;
        }
        __m512i a01 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(c0)),
                                         _mm512_cvtepi64_epi32(c1), 1);
        __m512i a23 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(c2)),
                                         _mm512_cvtepi64_epi32(c3), 1);
        _mm512_storeu_si512(w + 4 * i, _mm512_permutex2var_epi32(a01, lo4, a23));
        _mm512_storeu_si512(w + 4 * i + 16, _mm512_permutex2var_epi32(a01, hi4, a23));
    }
    if (i < nb) {
        philox_words_c(rk, b0 + (uint64_t)i, nb - i, w + 4 * i);
    }
}

/* The same with AVX2: four blocks a step, two XORs for each three-way one,
 * and the words put in block order by blends and unpacks. */
__attribute__((target("arch=x86-64-v3")))
static void philox_words_avx2(const round_keys *restrict rk, uint64_t b0, int nb,
                              uint32_t *restrict w)
{
    const __m256i m0 = _mm256_set1_epi64x(PHILOX_M0), m1 = _mm256_set1_epi64x(PHILOX_M1);
    const __m256i iota = _mm256_set_epi64x(3, 2, 1, 0);
    __m256i k0[10], k1[10];
    for (int r = 0; r < 10; r++) {
        k0[r] = _mm256_set1_epi64x(rk->k0[r]);
        k1[r] = _mm256_set1_epi64x(rk->k1[r]);
    }
    int i = 0;
    for (; i + 4 <= nb; i += 4) {
        __m256i ctr = _mm256_add_epi64(_mm256_set1_epi64x((long long)(b0 + (uint64_t)i)), iota);
        __m256i c0 = ctr, c1 = _mm256_srli_epi64(ctr, 32);
        __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
        for (int r = 0; r < 10; r++) {
            __m256i p0 = _mm256_mul_epu32(c0, m0), p1 = _mm256_mul_epu32(c2, m1);
            c0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), c1), k0[r]);
            c2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), c3), k1[r]);
            c1 = p1;
            c3 = p0;
        }
        /* Lane j of t01 is words 0-1 of block j, of t23 words 2-3. */
        __m256i t01 = _mm256_blend_epi32(c0, _mm256_slli_epi64(c1, 32), 0xaa);
        __m256i t23 = _mm256_blend_epi32(c2, _mm256_slli_epi64(c3, 32), 0xaa);
        __m256i lo = _mm256_unpacklo_epi64(t01, t23), hi = _mm256_unpackhi_epi64(t01, t23);
        _mm256_storeu_si256((__m256i *)(w + 4 * i), _mm256_permute2x128_si256(lo, hi, 0x20));
        _mm256_storeu_si256((__m256i *)(w + 4 * i + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
    }
    if (i < nb) {
        philox_words_c(rk, b0 + (uint64_t)i, nb - i, w + 4 * i);
    }
}
#endif

/* Test hook: the widest Philox loop kernels may use (0: the best the CPU
 * has, 1: the portable loop, 2: up to AVX2, 3: up to AVX-512), so that one
 * machine checks every loop against the others. Not for production use. */
static _Atomic int philox_cap;

EV_API void ev__random_cap_philox(int level);
EV_API void ev__random_cap_philox(int level)
{
    atomic_store_explicit(&philox_cap, level, memory_order_relaxed);
}

static void philox_words(const round_keys *rk, uint64_t b0, int nb, uint32_t *w)
{
#ifdef EV__SIMD_CLONES_BUILT
    int cap = atomic_load_explicit(&philox_cap, memory_order_relaxed);
    /* The tests the clones' resolvers make; __cpu_model is set up by then. */
    if ((cap == 0 || cap >= 3) && __builtin_cpu_supports("x86-64-v4")) {
        philox_words_avx512(rk, b0, nb, w);
        return;
    }
    if ((cap == 0 || cap >= 2) && __builtin_cpu_supports("x86-64-v3")) {
        philox_words_avx2(rk, b0, nb, w);
        return;
    }
#endif
    philox_words_c(rk, b0, nb, w);
}

/* The 64-bit value of words 2k and 2k+1 (little-endian order of the words). */
static inline uint64_t word64_at(const uint32_t *w, int k)
{
    return join64(w[2 * k], w[2 * k + 1]);
}

/* rand float32: four elements a block, one word each. */
EV__SIMD_CLONES
static void conv_u24(const uint32_t *restrict w, int nb, float *restrict o)
{
    for (int i = 0; i < 4 * nb; i++) {
        o[i] = u24(w[i]);
    }
}

/* rand float64: two elements a block, two words each. */
EV__SIMD_CLONES
static void conv_u53(const uint32_t *restrict w, int nb, double *restrict o)
{
    for (int i = 0; i < 2 * nb; i++) {
        o[i] = u53(word64_at(w, i));
    }
}

/* Box-Muller: a block is one pair, r cos t and r sin t with r = sqrt(-2 log
 * u1) and t = 2 pi u2. float32 takes the high words of float64's two
 * uniforms, so it agrees with float64 to float32 precision: u1 in (0, 1]
 * from word 1 ((x >> 1) 2^-31 + 2^-33, rounded, so |z| < 6.8), u2 from the
 * top 24 bits of word 3, computed in float32. */
EV__SIMD_CLONES
static void conv_normal_f32(const uint32_t *restrict w, int nb, float *restrict o)
{
    for (int i = 0; i < nb; i++) {
        float u1 = (float)(int32_t)(w[4 * i + 1] >> 1) * 0x1p-31f + 0x1p-33f;
        float r = sqrt_pos_f32(-2.0f * log_unit_f32(u1));
        float s, c;
        sincos2pi_f32(u24(w[4 * i + 3]), &s, &c);
        o[2 * i] = r * c;
        o[2 * i + 1] = r * s;
    }
}

/* float64: u1 = ((r1 >> 11) + 1) 2^-53 in (0, 1] from words 0-1 (|z| <=
 * 8.6), u2 = (r2 >> 11) 2^-53 from words 2-3. */
EV__SIMD_CLONES
static void conv_normal_f64(const uint32_t *restrict w, int nb, double *restrict o)
{
    for (int i = 0; i < nb; i++) {
        double u1 = u53(word64_at(w, 2 * i)) + 0x1p-53;
        double r = sqrt_pos_f64(-2.0 * log_unit_f64(u1));
        double s, c;
        sincos2pi_f64(u53(word64_at(w, 2 * i + 1)), &s, &c);
        o[2 * i] = r * c;
        o[2 * i + 1] = r * s;
    }
}

/* randint with n = high - low <= 2^32: low + floor(r n / 2^64), r the 64
 * bits of two words, in 32-bit halves (vpmuludq); n = 2^32 is r's high word. */
EV__SIMD_CLONES
static void conv_int64(const uint32_t *restrict w, int nb, uint64_t low, uint64_t n,
                       int64_t *restrict o)
{
    if (n == (uint64_t)1 << 32) {
        for (int i = 0; i < 2 * nb; i++) {
            o[i] = (int64_t)(low + w[2 * i + 1]);
        }
        return;
    }
    uint32_t n32 = (uint32_t)n;
    for (int i = 0; i < 2 * nb; i++) {
        uint64_t h = ((uint64_t)w[2 * i + 1] * n32 + ((uint64_t)w[2 * i] * n32 >> 32)) >> 32;
        o[i] = (int64_t)(low + h);
    }
}

/* randint with n > 2^32: low + floor(r n / 2^128), r the whole block (words
 * 2-3 high, 0-1 low); one element a block. */
static void conv_int128(const uint32_t *restrict w, int nb, uint64_t low, uint64_t n,
                        int64_t *restrict o)
{
    for (int i = 0; i < nb; i++) {
        o[i] = (int64_t)(low + mulhi128(word64_at(w, 2 * i + 1), word64_at(w, 2 * i), n));
    }
}

/* The raw 64-bit draws of randperm: two a block. */
static void conv_raw64(const uint32_t *restrict w, int nb, uint64_t *restrict o)
{
    for (int i = 0; i < 2 * nb; i++) {
        o[i] = word64_at(w, i);
    }
}

/* ------------------------------------------------------------------ driver */

enum { DIST_UNIFORM, DIST_NORMAL, DIST_INT };

/* What one call's kernel generates: which block loop, and the affine step
 * after it (uniform [lo, hi), normal mean + std z). */
enum { GEN_U24, GEN_U53, GEN_NORMAL_F32, GEN_NORMAL_F64, GEN_INT64, GEN_INT128, GEN_RAW64 };

typedef struct rand_arg {
    ev_tensor *t;      /* referenced; the tensor written */
    counters ctr;      /* key and first block, fixed at the call */
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

/* The kernel's view of a call, shared by the intra-op threads (read only). */
typedef struct rand_job {
    const rand_arg *a;
    round_keys rk;
    int gen;
    int epb;           /* elements per block */
    ev_dtype gdt;      /* the dtype the block loop writes */
    int64_t gsz;       /* its size */
    int affine;        /* an affine step follows (not [0, 1) or mean 0, std 1) */
    ev__iter it;       /* over t */
} rand_job;

/* Elements generated at once: a piece that stays in L1 (also the size of
 * the buffer of strided or converted results). */
#define PIECE 1024

/* The elements of blocks blk .. blk + nb - 1 of the call into o. */
static void gen_blocks(const rand_job *j, uint64_t blk, int nb, void *o)
{
    uint32_t w[4 * WORD_BLOCKS];
    char *out = o;
    int64_t step = j->epb * j->gsz; /* bytes of elements a block */
    for (int k = 0; k < nb; k += WORD_BLOCKS) {
        int m = nb - k < WORD_BLOCKS ? nb - k : WORD_BLOCKS;
        philox_words(&j->rk, j->a->ctr.base + blk + (uint64_t)k, m, w);
        void *dst = out + k * step;
        uint64_t low = (uint64_t)j->a->low, n = j->a->range;
        switch (j->gen) {
        case GEN_U24: conv_u24(w, m, dst); break;
        case GEN_U53: conv_u53(w, m, dst); break;
        case GEN_NORMAL_F32: conv_normal_f32(w, m, dst); break;
        case GEN_NORMAL_F64: conv_normal_f64(w, m, dst); break;
        case GEN_INT64: conv_int64(w, m, low, n, dst); break;
        case GEN_INT128: conv_int128(w, m, low, n, dst); break;
        default: conv_raw64(w, m, dst); break;
        }
    }
}

/* Uniform [lo, hi) from [0, 1): lo + (hi - lo) u in float64, rounded to the
 * dtype, then kept below hi (rounding can reach it); normal: mean + std z. */
EV__SIMD_CLONES
static void affine_f32(const rand_arg *a, float *restrict v, int64_t m)
{
    double p = a->a, q = a->b;
    if (a->dist == DIST_NORMAL) {
        for (int64_t i = 0; i < m; i++) {
            /* Rounded as IEEE does beyond float32's range (FLT_MAX up to
             * the midpoint to 2^128, inf from there) without C's undefined
             * conversion of an out-of-range value. */
            double x = p + q * (double)v[i], ax = fabs(x);
            double y = ax >= 0x1.ffffffp127 ? INFINITY : ax > FLT_MAX ? FLT_MAX : ax;
            v[i] = (float)(x < 0 ? -y : ax <= FLT_MAX ? x : y);
        }
        return;
    }
    double span = q - p;
    float fhi = (float)q, below = nextafterf(fhi, -INFINITY);
    int empty = !(p < q);
    for (int64_t i = 0; i < m; i++) {
        float x = (float)(p + span * (double)v[i]);
        v[i] = x >= fhi && !empty ? below : x;
    }
}

EV__SIMD_CLONES
static void affine_f64(const rand_arg *a, double *restrict v, int64_t m)
{
    double p = a->a, q = a->b;
    if (a->dist == DIST_NORMAL) {
        for (int64_t i = 0; i < m; i++) {
            v[i] = p + q * v[i];
        }
        return;
    }
    double span = q - p, below = nextafter(q, -INFINITY);
    int empty = !(p < q);
    for (int64_t i = 0; i < m; i++) {
        double x = p + span * v[i];
        v[i] = x >= q && !empty ? below : x;
    }
}

/* Elements e0 .. e0 + m - 1 (m <= PIECE) in j->gdt into out: whole blocks
 * straight into out, a partial block at either end through a small buffer. */
static void gen_elems(const rand_job *j, int64_t e0, int64_t m, void *out)
{
    char *o = out;
    uint64_t blk = (uint64_t)e0 / (uint64_t)j->epb;
    int64_t head = e0 % j->epb, left = m;
    double tmp[4]; /* one block of elements, 8 bytes at most */
    if (head) {
        gen_blocks(j, blk, 1, tmp);
        int64_t k = j->epb - head < left ? j->epb - head : left;
        memcpy(o, (char *)tmp + head * j->gsz, (size_t)(k * j->gsz));
        o += k * j->gsz;
        left -= k;
        blk++;
    }
    int64_t nb = left / j->epb;
    if (nb > 0) {
        gen_blocks(j, blk, (int)nb, o);
        o += nb * j->epb * j->gsz;
        left -= nb * j->epb;
        blk += (uint64_t)nb;
    }
    if (left > 0) {
        gen_blocks(j, blk, 1, tmp);
        memcpy(o, tmp, (size_t)(left * j->gsz));
    }
    if (j->affine) {
        if (j->gdt == EV_FLOAT32) {
            affine_f32(j->a, out, m);
        } else {
            affine_f64(j->a, out, m);
        }
    }
}

/* Elements e0 .. e0 + n - 1, which lie along one row of t starting at p
 * (stride bytes apart): straight into t when it has the generated dtype and
 * is contiguous there, else through a buffer and a conversion. */
static void fill_run(const rand_job *j, int64_t e0, int64_t n, char *p, int64_t stride)
{
    ev_dtype dt = j->a->t->dtype;
    int direct = dt == j->gdt && stride == j->gsz;
    double buf[PIECE];
    for (int64_t k = 0; k < n; k += PIECE) {
        int64_t m = n - k < PIECE ? n - k : PIECE;
        if (direct) {
            gen_elems(j, e0 + k, m, p + k * stride);
        } else {
            gen_elems(j, e0 + k, m, buf);
            ev__cast_strided(p + k * stride, dt, stride, buf, j->gdt, j->gsz, m);
        }
    }
}

/* Elements [lo, hi) in C order, which name them (ev__parallel_for range):
 * found in t by the iterator's rows, innermost first. */
static void rand_range(int64_t lo, int64_t hi, void *p)
{
    const rand_job *j = p;
    const ev__iter *it = &j->it;
    int64_t len = it->shape[0], stride = it->strides[0][0];
    int64_t idx[EV_MAX_DIMS] = {0}, off = 0, row = lo / len, col = lo % len;
    for (int d = 1; d < it->ndim; d++) {
        idx[d] = row % it->shape[d];
        row /= it->shape[d];
        off += idx[d] * it->strides[0][d];
    }
    for (int64_t e = lo; e < hi;) {
        int64_t n = len - col < hi - e ? len - col : hi - e;
        fill_run(j, e, n, it->data[0] + off + col * stride, stride);
        e += n;
        col = 0;
        for (int d = 1; d < it->ndim; d++) {
            off += it->strides[0][d];
            if (++idx[d] < it->shape[d]) {
                break;
            }
            off -= it->shape[d] * it->strides[0][d];
            idx[d] = 0;
        }
    }
}

/* Elements per intra-op chunk: normals cost about four times the rest. */
#define RAND_GRAIN ((int64_t)1 << 16)
#define NORMAL_GRAIN ((int64_t)1 << 14)

static int rand_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    rand_arg *a = p;
    if (a->t->numel == 0) {
        return 0;
    }
    rand_job j;
    memset(&j, 0, sizeof j);
    j.a = a;
    round_keys_init(&j.rk, a->ctr.key);
    int f32 = a->t->dtype == EV_FLOAT32;
    if (a->dist == DIST_INT) {
        j.gen = a->wpe == 2 ? GEN_INT64 : GEN_INT128;
        j.epb = a->wpe == 2 ? 2 : 1;
        j.gdt = EV_INT64;
    } else if (a->dist == DIST_UNIFORM) {
        j.gen = f32 ? GEN_U24 : GEN_U53;
        j.epb = f32 ? 4 : 2;
        j.gdt = f32 ? EV_FLOAT32 : EV_FLOAT64;
        j.affine = !(a->a == 0.0 && a->b == 1.0);
    } else {
        j.gen = f32 ? GEN_NORMAL_F32 : GEN_NORMAL_F64;
        j.epb = 2;
        j.gdt = f32 ? EV_FLOAT32 : EV_FLOAT64;
        j.affine = !(a->a == 0.0 && a->b == 1.0);
    }
    j.gsz = (int64_t)ev__dsize(j.gdt);
    ev__iter_init(&j.it, 1, &a->t);
    ev__parallel_for(a->t->numel, a->dist == DIST_NORMAL ? NORMAL_GRAIN : RAND_GRAIN,
                     rand_range, &j);
    return 0;
}

/* --------------------------------------------------------------------- ops */

/* Reserves t's counters from gen and issues the one instruction that writes
 * t. Takes a reference to t for the instruction; the caller keeps its own. */
static int submit(const ev_exec *ex, const char *name, ev_generator *gen, rand_arg *a,
                  ev_tensor *t)
{
    reserve(gen, t->numel, a->wpe, &a->ctr);
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
    counters ctr;  /* key and first block, fixed at the call */
} perm_arg;
_Static_assert(sizeof(perm_arg) <= EV_INLINE_ARG_SIZE, "perm_arg must travel inline");

static void perm_drop(void *p)
{
    ev_tensor_unref(((perm_arg *)p)->t);
}

/* Fisher-Yates from the top: position i swaps with j = floor(r_i (i + 1) /
 * 2^64), uniform in [0, i], r_i the 64 bits of words 2i and 2i+1 whatever
 * happened before, so the permutation is a pure function of the counters
 * reserved at the call. The draws and their partners come a piece at a
 * time from vector loops; the swaps are serial, each partner prefetched a
 * few swaps ahead so that the cache misses of a large tensor overlap. */
#define PERM_AHEAD 16
#define PERM_SHUFFLE(T)                                                        \
    do {                                                                       \
        T *v = (T *)ev__tensor_ptr(a->t);                                      \
        for (int64_t i = 0; i < n; i++) {                                      \
            v[i] = (T)i;                                                       \
        }                                                                      \
        for (int64_t top = n - 1; top > 0; top -= PIECE) {                     \
            int64_t first = top - PIECE + 1 > 1 ? top - PIECE + 1 : 1;         \
            int64_t cnt = top - first + 1;                                     \
            gen_elems(&j, first, cnt, draws);                                  \
            for (int64_t k = 0; k < cnt; k++) {                                \
                draws[k] = perm_partner(draws[k], (uint64_t)(first + k) + 1);  \
            }                                                                  \
            for (int64_t k = cnt - 1; k >= 0; k--) {                           \
                if (k >= PERM_AHEAD) {                                         \
                    __builtin_prefetch(&v[draws[k - PERM_AHEAD]], 1);          \
                }                                                              \
                T tmp = v[first + k];                                          \
                v[first + k] = v[draws[k]];                                    \
                v[draws[k]] = tmp;                                             \
            }                                                                  \
        }                                                                      \
    } while (0)

/* floor(r m / 2^64), r's partner in [0, m). */
static inline uint64_t perm_partner(uint64_t r, uint64_t m)
{
#ifdef __SIZEOF_INT128__
    return (uint64_t)(((unsigned __int128)r * m) >> 64);
#else
    uint64_t hi, lo;
    mul64(r, m, &hi, &lo);
    return hi;
#endif
}

static int perm_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    perm_arg *a = p;
    int64_t n = a->t->numel;
    if (n == 0) {
        return 0;
    }
    /* A job of the raw draws, for gen_elems. */
    rand_arg ra;
    memset(&ra, 0, sizeof ra);
    ra.ctr = a->ctr;
    rand_job j;
    memset(&j, 0, sizeof j);
    j.a = &ra;
    round_keys_init(&j.rk, a->ctr.key);
    j.gen = GEN_RAW64;
    j.epb = 2;
    j.gdt = EV_INT64;
    j.gsz = 8;
    uint64_t draws[PIECE];
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
    reserve(gen, n, 2, &a.ctr);
    a.t = ev_tensor_ref(t);
    rc = ev__submit(ex, fn, perm_kernel, &a, sizeof a, perm_drop, NULL, 0, &t, 1);
    if (rc) {
        ev_tensor_unref(t);
        return rc;
    }
    *out = t;
    return 0;
}
