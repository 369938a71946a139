/* dtypes: the table built from EV_DTYPE_MAP, NumPy-like promotion, and the
 * strided conversion loops every copy and buffered kernel goes through. */
/* As in src/ops/binary.c: GCC's -O2 cost model leaves the contiguous
 * conversion loops scalar; "cheap" vectorizes them (restrict spares the
 * alias checks). Buffered kernels convert every operand of a dtype that is
 * not the loop's (uint8 computes in int32), so these loops are hot. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap", "no-trapping-math")
#endif

#include <string.h>

#include "tensor/tensor-impl.h"

const ev_dtype_info ev__dtype_table[EV_DTYPE_COUNT] = {
/* is_unsigned: an integer C type in which -1 is positive. */
#define EV_DTYPE_ROW(id, name, ctype, kind, compute) \
    [EV_##id] = {name, sizeof(ctype), kind, EV_##compute, (kind) == EV_KIND_INT && (ctype)-1 > 0},
    EV_DTYPE_MAP(EV_DTYPE_ROW)
#undef EV_DTYPE_ROW
};

const ev_dtype_info *ev_dtype_get_info(ev_dtype dtype)
{
    if ((unsigned)dtype >= EV_DTYPE_COUNT) {
        return NULL;
    }
    return &ev__dtype_table[dtype];
}

const char *ev_dtype_name(ev_dtype dtype)
{
    const ev_dtype_info *info = ev_dtype_get_info(dtype);
    return info ? info->name : "invalid";
}

size_t ev_dtype_size(ev_dtype dtype)
{
    const ev_dtype_info *info = ev_dtype_get_info(dtype);
    return info ? info->size : 0;
}

int ev_dtype_is_float(ev_dtype dtype)
{
    const ev_dtype_info *info = ev_dtype_get_info(dtype);
    return info && info->kind == EV_KIND_FLOAT;
}

int ev_dtype_from_name(const char *name, ev_dtype *out)
{
    for (int d = 0; name && d < EV_DTYPE_COUNT; d++) {
        if (strcmp(ev__dtype_table[d].name, name) == 0) {
            *out = (ev_dtype)d;
            return 0;
        }
    }
    return ev__set_message(EV_EINVAL, "unknown dtype \"%s\"", name ? name : "(null)");
}

int ev_dtype_int_range(ev_dtype dtype, int64_t *min, int64_t *max)
{
    const ev_dtype_info *i = ev_dtype_get_info(dtype);
    if (!i || i->kind == EV_KIND_FLOAT) {
        return ev__set_message(EV_EINVAL, "ev_dtype_int_range: %s is not a bool or integer "
                               "dtype", ev_dtype_name(dtype));
    }
    if (i->kind == EV_KIND_BOOL) {
        *min = 0;
        *max = 1;
    } else if (i->is_unsigned) {
        /* Clamped to int64 for an unsigned dtype of 8 bytes (none yet). */
        *min = 0;
        *max = i->size >= 8 ? INT64_MAX : (int64_t)((UINT64_C(1) << (8 * i->size)) - 1);
    } else {
        *max = (int64_t)((UINT64_C(1) << (8 * i->size - 1)) - 1);
        *min = -*max - 1;
    }
    return 0;
}

/* The smallest signed dtype of kind `kind` whose size is > min_size (or >=
 * when or_equal), or the largest of that kind if none is; the promotion
 * rules are written in terms of kinds, sizes and signedness so new dtypes
 * slot in by themselves. Unsigned integers are never the answer: NumPy
 * widens toward signed types (uint8 with int8 gives int16). */
static ev_dtype smallest_of_kind(int kind, size_t min_size, int or_equal)
{
    ev_dtype best = EV_DTYPE_COUNT, largest = EV_DTYPE_COUNT;
    for (int d = 0; d < EV_DTYPE_COUNT; d++) {
        const ev_dtype_info *i = &ev__dtype_table[d];
        if (i->kind != kind || i->is_unsigned) {
            continue;
        }
        if (largest == EV_DTYPE_COUNT || i->size > ev__dtype_table[largest].size) {
            largest = (ev_dtype)d;
        }
        int fits = or_equal ? i->size >= min_size : i->size > min_size;
        if (fits && (best == EV_DTYPE_COUNT || i->size < ev__dtype_table[best].size)) {
            best = (ev_dtype)d;
        }
    }
    return best != EV_DTYPE_COUNT ? best : largest;
}

ev_dtype ev_promote_types(ev_dtype a, ev_dtype b)
{
    const ev_dtype_info *ia = ev_dtype_get_info(a), *ib = ev_dtype_get_info(b);
    if (!ia || !ib) {
        return EV_DTYPE_COUNT;
    }
    if (a == b) {
        return a;
    }
    if (ia->kind == ib->kind) {
        if (ia->is_unsigned == ib->is_unsigned) {
            return ia->size >= ib->size ? a : b;
        }
        /* An unsigned and a signed integer: the signed one if it holds
         * every value of the unsigned one, else a wider signed one. */
        const ev_dtype_info *iu = ia->is_unsigned ? ia : ib;
        ev_dtype s = ia->is_unsigned ? b : a;
        return ev__dtype_table[s].size > iu->size ? s : smallest_of_kind(EV_KIND_INT, iu->size, 0);
    }
    if (ia->kind > ib->kind) {
        const ev_dtype_info *ti = ia;
        ev_dtype t = a;
        ia = ib, a = b;
        ib = ti, b = t;
    }
    /* Now a has the lower kind. */
    if (ia->kind == EV_KIND_BOOL) {
        return b;
    }
    /* An integer with a float: a float that holds the integer's values, as
     * NumPy does (int32 + float32 -> float64). */
    ev_dtype f = smallest_of_kind(EV_KIND_FLOAT, ia->size, 0);
    return ev_promote_types(f, b);
}

ev_dtype ev_dtype_to_float(ev_dtype d)
{
    const ev_dtype_info *i = ev_dtype_get_info(d);
    if (!i) {
        return EV_DTYPE_COUNT;
    }
    if (i->kind == EV_KIND_FLOAT) {
        return d;
    }
    return smallest_of_kind(EV_KIND_FLOAT, i->size, 0);
}

ev_dtype ev__smallest_int(void)
{
    return smallest_of_kind(EV_KIND_INT, 0, 1);
}

/* ------------------------------------------------------------------ casts */

/* Float to integer without undefined behaviour: x86's cvtt* result (the
 * minimum) for NaN and out-of-range values, which is what NumPy shows there. */
#define EV__F2I(T, MIN, x) \
    (((x) >= (double)(MIN) && (x) < -(double)(MIN)) ? (T)(x) : (T)(MIN))

/* One strided conversion loop from source type ST to destination type DT.
 * A float goes to an integer through FT (DT itself, or int32 for the narrow
 * integers, whose minimum FMIN is then INT32_MIN): truncated into FT, then
 * wrapped to DT's width. That is what NumPy's (C's) conversion compiles to on
 * x86, so 300.0 -> uint8 is 44, -1.0 -> uint8 is 255 and NaN is 0. The
 * narrowing (DT) conversions of integers keep the low bits (GCC and Clang
 * define them so), as NumPy's casts wrap. The branches on the kinds are
 * compile-time constants. */
#define EV__CONV(DT, DKIND, FT, FMIN, SKIND, x)                                         \
    ((DKIND) == EV_KIND_BOOL                                  ? (DT)((x) != 0)          \
     : ((DKIND) == EV_KIND_INT && (SKIND) == EV_KIND_FLOAT) ? (DT)EV__F2I(FT, FMIN, (double)(x)) \
                                                              : (DT)(x))
/* Contiguous distinct arrays (every buffered kernel's case) get a loop the
 * compiler vectorizes; anything else the strided loop. */
#define EV__CAST_LOOP(DT, DKIND, FT, FMIN, ST, SKIND)                                  \
    do {                                                                              \
        if (ds == (int64_t)sizeof(DT) && ss == (int64_t)sizeof(ST) && dst != src) {   \
            DT *restrict y_ = dst;                                                    \
            const ST *restrict x_ = src;                                              \
            for (int64_t i_ = 0; i_ < n; i_++) {                                      \
                y_[i_] = EV__CONV(DT, DKIND, FT, FMIN, SKIND, x_[i_]);                \
            }                                                                         \
            break;                                                                    \
        }                                                                             \
        char *d_ = dst;                                                               \
        const char *s_ = src;                                                         \
        for (int64_t i_ = 0; i_ < n; i_++) {                                          \
            ST x_ = *(const ST *)(s_ + i_ * ss);                                      \
            *(DT *)(d_ + i_ * ds) = EV__CONV(DT, DKIND, FT, FMIN, SKIND, x_);          \
        }                                                                             \
    } while (0)

#define EV__CAST_CASE(id, name, ctype, kind, compute)                 \
    case EV_##id:                                                     \
        EV__CAST_LOOP(ROW_T, ROW_KIND, ROW_FT, ROW_FMIN, ctype, kind); \
        break;

/* The conversion loops are built for the baseline x86-64 and again for AVX2
 * and AVX-512, as the ops' loops are (EV__SIMD_CLONES in src/ops/ops-impl.h,
 * the same conditions): the baseline has no vector conversion between float
 * and int64, so float32 -> int64 ran scalar at half NumPy's speed. Every
 * conversion here is exact or IEEE-rounded, so each build gives the same
 * bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define CAST_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CAST_CLONES
#endif

/* One function per destination dtype, switching on the source dtype. The
 * rows are spelled out (not generated from EV_DTYPE_MAP) because the
 * preprocessor cannot nest a list inside itself; the static assert below
 * makes a new dtype add its row here. ROW_FT and ROW_FMIN matter only for
 * integer rows (see EV__CAST_LOOP). */
#define EV__CAST_ROW(fname)                                                           \
    CAST_CLONES static void fname(void *dst, int64_t ds, const void *src, ev_dtype sd, int64_t ss, \
                      int64_t n)                                                      \
    {                                                                                 \
        switch (sd) {                                                                 \
            EV_DTYPE_MAP(EV__CAST_CASE)                                               \
        default:                                                                      \
            break;                                                                    \
        }                                                                             \
    }

#define ROW_T uint8_t
#define ROW_KIND EV_KIND_BOOL
#define ROW_FT int32_t
#define ROW_FMIN INT32_MIN
EV__CAST_ROW(cast_to_bool)
#undef ROW_T
#undef ROW_KIND
#undef ROW_FT
#undef ROW_FMIN
#define ROW_T int32_t
#define ROW_KIND EV_KIND_INT
#define ROW_FT int32_t
#define ROW_FMIN INT32_MIN
EV__CAST_ROW(cast_to_int32)
#undef ROW_T
#undef ROW_KIND
#undef ROW_FT
#undef ROW_FMIN
#define ROW_T int64_t
#define ROW_KIND EV_KIND_INT
#define ROW_FT int64_t
#define ROW_FMIN INT64_MIN
EV__CAST_ROW(cast_to_int64)
#undef ROW_T
#undef ROW_KIND
#undef ROW_FT
#undef ROW_FMIN
#define ROW_T float
#define ROW_KIND EV_KIND_FLOAT
#define ROW_FT int32_t
#define ROW_FMIN INT32_MIN
EV__CAST_ROW(cast_to_float32)
#undef ROW_T
#undef ROW_KIND
#undef ROW_FT
#undef ROW_FMIN
#define ROW_T double
#define ROW_KIND EV_KIND_FLOAT
#define ROW_FT int32_t
#define ROW_FMIN INT32_MIN
EV__CAST_ROW(cast_to_float64)
#undef ROW_T
#undef ROW_KIND
#undef ROW_FT
#undef ROW_FMIN
#define ROW_T uint8_t
#define ROW_KIND EV_KIND_INT
#define ROW_FT int32_t
#define ROW_FMIN INT32_MIN
EV__CAST_ROW(cast_to_uint8)
#undef ROW_T
#undef ROW_KIND
#undef ROW_FT
#undef ROW_FMIN
#define ROW_T int8_t
#define ROW_KIND EV_KIND_INT
#define ROW_FT int32_t
#define ROW_FMIN INT32_MIN
EV__CAST_ROW(cast_to_int8)
#undef ROW_T
#undef ROW_KIND
#undef ROW_FT
#undef ROW_FMIN
#define ROW_T int16_t
#define ROW_KIND EV_KIND_INT
#define ROW_FT int32_t
#define ROW_FMIN INT32_MIN
EV__CAST_ROW(cast_to_int16)
#undef ROW_T
#undef ROW_KIND
#undef ROW_FT
#undef ROW_FMIN

typedef void (*cast_row_fn)(void *, int64_t, const void *, ev_dtype, int64_t, int64_t);

static const cast_row_fn cast_rows[EV_DTYPE_COUNT] = {
    [EV_BOOL] = cast_to_bool,       [EV_INT32] = cast_to_int32,
    [EV_INT64] = cast_to_int64,     [EV_FLOAT32] = cast_to_float32,
    [EV_FLOAT64] = cast_to_float64, [EV_UINT8] = cast_to_uint8,
    [EV_INT8] = cast_to_int8,       [EV_INT16] = cast_to_int16,
};
_Static_assert(EV_DTYPE_COUNT == 8, "a new dtype needs its cast row in dtype.c");

void ev__cast_strided(void *dst, ev_dtype dd, int64_t ds, const void *src, ev_dtype sd,
                      int64_t ss, int64_t n)
{
    int64_t size = (int64_t)ev__dsize(dd);
    if (dd == sd && ds == size && ss == size) {
        if (dst != src && n > 0) {
            memcpy(dst, src, (size_t)(n * size));
        }
        return;
    }
    cast_rows[dd](dst, ds, src, sd, ss, n);
}

void ev__scalar_store(ev_dtype d, ev_scalar s, void *dst)
{
    if (s.dtype == EV_FLOAT64 || s.dtype == EV_FLOAT32) {
        ev__cast_strided(dst, d, 0, &s.v.f, EV_FLOAT64, 0, 1);
    } else {
        ev__cast_strided(dst, d, 0, &s.v.i, EV_INT64, 0, 1);
    }
}
