/* dtypes: the table built from EV_DTYPE_MAP, NumPy-like promotion, and the
 * strided conversion loops every copy and buffered kernel goes through. */
#include <string.h>

#include "tensor/tensor-impl.h"

static const ev_dtype_info dtype_table[EV_DTYPE_COUNT] = {
#define EV_DTYPE_ROW(id, name, ctype, kind, compute) \
    [EV_##id] = {name, sizeof(ctype), kind, EV_##compute},
    EV_DTYPE_MAP(EV_DTYPE_ROW)
#undef EV_DTYPE_ROW
};

const ev_dtype_info *ev_dtype_get_info(ev_dtype dtype)
{
    if ((unsigned)dtype >= EV_DTYPE_COUNT) {
        return NULL;
    }
    return &dtype_table[dtype];
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
        if (strcmp(dtype_table[d].name, name) == 0) {
            *out = (ev_dtype)d;
            return 0;
        }
    }
    return ev__set_message(EV_EINVAL, "unknown dtype \"%s\"", name ? name : "(null)");
}

/* The smallest dtype of kind `kind` whose size is > min_size (or >= when
 * or_equal), or the largest of that kind if none is; the promotion rules are
 * written in terms of kinds and sizes so new dtypes slot in by themselves. */
static ev_dtype smallest_of_kind(int kind, size_t min_size, int or_equal)
{
    ev_dtype best = EV_DTYPE_COUNT, largest = EV_DTYPE_COUNT;
    for (int d = 0; d < EV_DTYPE_COUNT; d++) {
        const ev_dtype_info *i = &dtype_table[d];
        if (i->kind != kind) {
            continue;
        }
        if (largest == EV_DTYPE_COUNT || i->size > dtype_table[largest].size) {
            largest = (ev_dtype)d;
        }
        int fits = or_equal ? i->size >= min_size : i->size > min_size;
        if (fits && (best == EV_DTYPE_COUNT || i->size < dtype_table[best].size)) {
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
        return ia->size >= ib->size ? a : b;
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
 * The branches on the kinds are compile-time constants. */
#define EV__CAST_LOOP(DT, DKIND, DMIN, ST, SKIND)                                      \
    do {                                                                              \
        char *d_ = dst;                                                               \
        const char *s_ = src;                                                         \
        for (int64_t i_ = 0; i_ < n; i_++) {                                          \
            ST x_ = *(const ST *)(s_ + i_ * ss);                                      \
            DT *y_ = (DT *)(d_ + i_ * ds);                                            \
            if ((DKIND) == EV_KIND_BOOL) {                                            \
                *y_ = (DT)(x_ != 0);                                                  \
            } else if ((DKIND) == EV_KIND_INT && (SKIND) == EV_KIND_FLOAT) {          \
                *y_ = EV__F2I(DT, DMIN, (double)x_);                                  \
            } else {                                                                  \
                *y_ = (DT)x_;                                                         \
            }                                                                         \
        }                                                                             \
    } while (0)

/* Integer minimum per dtype (0 for non-integers; only used for int targets). */
#define EV__MIN_BOOL 0
#define EV__MIN_INT32 INT32_MIN
#define EV__MIN_INT64 INT64_MIN
#define EV__MIN_FLOAT32 0
#define EV__MIN_FLOAT64 0

#define EV__CAST_CASE(id, name, ctype, kind, compute)                 \
    case EV_##id:                                                     \
        EV__CAST_LOOP(ROW_T, ROW_KIND, ROW_MIN, ctype, kind);         \
        break;

/* One function per destination dtype, switching on the source dtype. The
 * rows are spelled out (not generated from EV_DTYPE_MAP) because the
 * preprocessor cannot nest a list inside itself; the static assert below
 * makes a new dtype add its row here. */
#define EV__CAST_ROW(fname)                                                           \
    static void fname(void *dst, int64_t ds, const void *src, ev_dtype sd, int64_t ss, \
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
#define ROW_MIN EV__MIN_BOOL
EV__CAST_ROW(cast_to_bool)
#undef ROW_T
#undef ROW_KIND
#undef ROW_MIN
#define ROW_T int32_t
#define ROW_KIND EV_KIND_INT
#define ROW_MIN EV__MIN_INT32
EV__CAST_ROW(cast_to_int32)
#undef ROW_T
#undef ROW_KIND
#undef ROW_MIN
#define ROW_T int64_t
#define ROW_KIND EV_KIND_INT
#define ROW_MIN EV__MIN_INT64
EV__CAST_ROW(cast_to_int64)
#undef ROW_T
#undef ROW_KIND
#undef ROW_MIN
#define ROW_T float
#define ROW_KIND EV_KIND_FLOAT
#define ROW_MIN EV__MIN_FLOAT32
EV__CAST_ROW(cast_to_float32)
#undef ROW_T
#undef ROW_KIND
#undef ROW_MIN
#define ROW_T double
#define ROW_KIND EV_KIND_FLOAT
#define ROW_MIN EV__MIN_FLOAT64
EV__CAST_ROW(cast_to_float64)
#undef ROW_T
#undef ROW_KIND
#undef ROW_MIN

typedef void (*cast_row_fn)(void *, int64_t, const void *, ev_dtype, int64_t, int64_t);

static const cast_row_fn cast_rows[EV_DTYPE_COUNT] = {
    [EV_BOOL] = cast_to_bool,       [EV_INT32] = cast_to_int32,
    [EV_INT64] = cast_to_int64,     [EV_FLOAT32] = cast_to_float32,
    [EV_FLOAT64] = cast_to_float64,
};
_Static_assert(EV_DTYPE_COUNT == 5, "a new dtype needs its cast row in dtype.c");

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
