/* Tests of the dtype table, NumPy promotion, result dtypes of ops, and the
 * conversions every cast and copy goes through. */
#include "tensor_test.h"

static void test_table(void)
{
    CHECK_EQ(EV_DTYPE_COUNT, 8);
    const char *names[] = {"bool", "int32", "int64", "float32", "float64",
                           "uint8", "int8", "int16"};
    const size_t sizes[] = {1, 4, 8, 4, 8, 1, 1, 2};
    const int unsig[] = {0, 0, 0, 0, 0, 1, 0, 0};
    /* The narrow integers compute in int32 (see EV_DTYPE_MAP). */
    const ev_dtype computes[] = {EV_BOOL, EV_INT32, EV_INT64, EV_FLOAT32, EV_FLOAT64,
                                 EV_INT32, EV_INT32, EV_INT32};
    for (int d = 0; d < EV_DTYPE_COUNT; d++) {
        CHECK(strcmp(ev_dtype_name((ev_dtype)d), names[d]) == 0);
        CHECK_EQ(ev_dtype_size((ev_dtype)d), sizes[d]);
        ev_dtype back;
        CHECK_OK(ev_dtype_from_name(names[d], &back));
        CHECK_EQ(back, d);
        CHECK_EQ(ev_dtype_get_info((ev_dtype)d)->compute, computes[d]);
        CHECK_EQ(ev_dtype_get_info((ev_dtype)d)->is_unsigned, unsig[d]);
    }
    CHECK_EQ(ev_dtype_get_info(EV_UINT8)->kind, EV_KIND_INT);
    CHECK_EQ(ev_dtype_get_info(EV_INT16)->kind, EV_KIND_INT);
    CHECK(strcmp(ev_dtype_name((ev_dtype)99), "invalid") == 0);
    CHECK(ev_dtype_get_info((ev_dtype)-1) == NULL);
    CHECK_EQ(ev_dtype_size(EV_DTYPE_COUNT), 0);
    CHECK(ev_dtype_is_float(EV_FLOAT32) && !ev_dtype_is_float(EV_INT64));
    CHECK(!ev_dtype_is_float(EV_UINT8) && !ev_dtype_is_float(EV_INT8));
    ev_dtype d;
    CHECK_EQ(ev_dtype_from_name("float16", &d), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "float16");
    CHECK_EQ(ev_dtype_from_name("uint16", &d), EV_EINVAL);
}

static void test_int_range(void)
{
    const struct {
        ev_dtype d;
        int64_t lo, hi;
    } want[] = {
        {EV_BOOL, 0, 1},           {EV_UINT8, 0, 255},
        {EV_INT8, -128, 127},      {EV_INT16, -32768, 32767},
        {EV_INT32, INT32_MIN, INT32_MAX}, {EV_INT64, INT64_MIN, INT64_MAX},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int64_t lo = 1, hi = 0;
        CHECK_OK(ev_dtype_int_range(want[i].d, &lo, &hi));
        CHECK_EQ(lo, want[i].lo);
        CHECK_EQ(hi, want[i].hi);
    }
    int64_t lo, hi;
    CHECK_EQ(ev_dtype_int_range(EV_FLOAT32, &lo, &hi), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "float32 is not a bool or integer dtype");
    CHECK_EQ(ev_dtype_int_range(EV_DTYPE_COUNT, &lo, &hi), EV_EINVAL);
}

static void test_promotion(void)
{
    /* numpy.result_type for every pair (NumPy 1.24 and 2 agree on arrays). */
    enum {
        B = EV_BOOL, I = EV_INT32, L = EV_INT64, F = EV_FLOAT32, D = EV_FLOAT64,
        U8 = EV_UINT8, I8 = EV_INT8, I16 = EV_INT16
    };
    const int want[8][8] = {
        /*           B    I  L  F  D  U8   I8   I16 */
        /* B   */ {B, I, L, F, D, U8, I8, I16},
        /* I   */ {I, I, L, D, D, I, I, I},
        /* L   */ {L, L, L, D, D, L, L, L},
        /* F   */ {F, D, D, F, D, F, F, F},
        /* D   */ {D, D, D, D, D, D, D, D},
        /* U8  */ {U8, I, L, F, D, U8, I16, I16},
        /* I8  */ {I8, I, L, F, D, I16, I8, I16},
        /* I16 */ {I16, I, L, F, D, I16, I16, I16},
    };
    _Static_assert(EV_DTYPE_COUNT == 8, "extend the promotion table");
    for (int a = 0; a < EV_DTYPE_COUNT; a++) {
        for (int b = 0; b < EV_DTYPE_COUNT; b++) {
            CHECK_EQ(ev_promote_types((ev_dtype)a, (ev_dtype)b), want[a][b]);
        }
    }
    CHECK_EQ(ev_promote_types(EV_DTYPE_COUNT, EV_INT32), EV_DTYPE_COUNT);
    CHECK_EQ(ev_dtype_to_float(EV_BOOL), EV_FLOAT32);
    CHECK_EQ(ev_dtype_to_float(EV_INT32), EV_FLOAT64);
    CHECK_EQ(ev_dtype_to_float(EV_INT64), EV_FLOAT64);
    CHECK_EQ(ev_dtype_to_float(EV_FLOAT32), EV_FLOAT32);
    CHECK_EQ(ev_dtype_to_float(EV_UINT8), EV_FLOAT32);
    CHECK_EQ(ev_dtype_to_float(EV_INT8), EV_FLOAT32);
    CHECK_EQ(ev_dtype_to_float(EV_INT16), EV_FLOAT32);
}

static void test_result_dtypes(void)
{
    ev_dtype r;
    CHECK_OK(ev_binary_result_dtype(EV_OP_ADD, EV_INT32, EV_FLOAT32, &r));
    CHECK_EQ(r, EV_FLOAT64);
    CHECK_OK(ev_binary_result_dtype(EV_OP_DIV, EV_INT32, EV_INT32, &r));
    CHECK_EQ(r, EV_FLOAT64);
    CHECK_OK(ev_binary_result_dtype(EV_OP_DIV, EV_BOOL, EV_BOOL, &r));
    CHECK_EQ(r, EV_FLOAT64);
    CHECK_OK(ev_binary_result_dtype(EV_OP_DIV, EV_FLOAT32, EV_BOOL, &r));
    CHECK_EQ(r, EV_FLOAT32);
    CHECK_OK(ev_binary_result_dtype(EV_OP_LT, EV_INT64, EV_FLOAT32, &r));
    CHECK_EQ(r, EV_BOOL);
    CHECK_OK(ev_binary_result_dtype(EV_OP_ADD, EV_BOOL, EV_BOOL, &r));
    CHECK_EQ(r, EV_BOOL);
    CHECK_OK(ev_binary_result_dtype(EV_OP_FLOOR_DIVIDE, EV_BOOL, EV_BOOL, &r));
    CHECK_EQ(r, EV_INT8); /* NumPy's bool // bool */
    CHECK_OK(ev_binary_result_dtype(EV_OP_POW, EV_BOOL, EV_BOOL, &r));
    CHECK_EQ(r, EV_INT8);
    CHECK_OK(ev_binary_result_dtype(EV_OP_ADD, EV_UINT8, EV_INT8, &r));
    CHECK_EQ(r, EV_INT16);
    CHECK_OK(ev_binary_result_dtype(EV_OP_SUB, EV_UINT8, EV_UINT8, &r));
    CHECK_EQ(r, EV_UINT8);
    CHECK_OK(ev_binary_result_dtype(EV_OP_DIV, EV_UINT8, EV_UINT8, &r));
    CHECK_EQ(r, EV_FLOAT64);
    CHECK_OK(ev_binary_result_dtype(EV_OP_DIV, EV_INT16, EV_FLOAT32, &r));
    CHECK_EQ(r, EV_FLOAT32);
    CHECK_OK(ev_binary_result_dtype(EV_OP_LT, EV_UINT8, EV_INT8, &r));
    CHECK_EQ(r, EV_BOOL);
    CHECK_OK(ev_binary_result_dtype(EV_OP_BITWISE_LEFT_SHIFT, EV_BOOL, EV_BOOL, &r));
    CHECK_EQ(r, EV_INT8);
    CHECK_OK(ev_binary_result_dtype(EV_OP_BITWISE_AND, EV_UINT8, EV_INT16, &r));
    CHECK_EQ(r, EV_INT16);
    CHECK_EQ(ev_binary_result_dtype(EV_OP_BITWISE_OR, EV_UINT8, EV_FLOAT32, &r), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "bitwise_or: not supported for dtypes uint8 and "
                                          "float32");
    CHECK_OK(ev_binary_result_dtype(EV_OP_LOGICAL_AND, EV_FLOAT64, EV_INT32, &r));
    CHECK_EQ(r, EV_BOOL);
    CHECK_EQ(ev_binary_result_dtype(EV_OP_SUB, EV_BOOL, EV_BOOL, &r), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "logical_xor");
    CHECK_EQ(ev_binary_result_dtype(EV_BINARY_OP_COUNT, EV_BOOL, EV_BOOL, &r), EV_EINVAL);
    CHECK_OK(ev_unary_result_dtype(EV_OP_EXP, EV_INT32, &r));
    CHECK_EQ(r, EV_FLOAT64);
    CHECK_OK(ev_unary_result_dtype(EV_OP_SQRT, EV_BOOL, &r));
    CHECK_EQ(r, EV_FLOAT32);
    CHECK_OK(ev_unary_result_dtype(EV_OP_ABS, EV_INT64, &r));
    CHECK_EQ(r, EV_INT64);
    CHECK_OK(ev_unary_result_dtype(EV_OP_NEG, EV_UINT8, &r));
    CHECK_EQ(r, EV_UINT8);
    CHECK_OK(ev_unary_result_dtype(EV_OP_EXP, EV_INT16, &r));
    CHECK_EQ(r, EV_FLOAT32);
    CHECK_OK(ev_unary_result_dtype(EV_OP_SQRT, EV_UINT8, &r));
    CHECK_EQ(r, EV_FLOAT32);
    CHECK_EQ(ev_unary_result_dtype(EV_OP_NEG, EV_BOOL, &r), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "neg: not supported for dtype bool");
    CHECK(strcmp(ev_binary_op_name(EV_OP_FLOOR_DIVIDE), "floor_divide") == 0);
    CHECK(strcmp(ev_unary_op_name(EV_OP_LOGICAL_NOT), "logical_not") == 0);
}

static void test_casts(void)
{
    /* float64 -> int32/int64/bool, including NaN, infinities and out of range
     * (which give the minimum, as NumPy on x86), and truncation toward 0. */
    const double src[] = {1.9, -1.9, 0.0, -0.0, NAN, INFINITY, -INFINITY, 3e9, -3e9, 0.5};
    const int64_t n = 10;
    ev_tensor *f;
    CHECK_OK(ev_from_host(&EX, EV_FLOAT64, 1, &n, src, &f));
    ev_tensor *i32, *i64, *b, *f32;
    CHECK_OK(ev_cast(&EX, f, EV_INT32, &i32));
    CHECK_OK(ev_cast(&EX, f, EV_INT64, &i64));
    CHECK_OK(ev_cast(&EX, f, EV_BOOL, &b));
    CHECK_OK(ev_cast(&EX, f, EV_FLOAT32, &f32));
    int32_t g32[10];
    int64_t g64[10];
    uint8_t gb[10];
    float gf[10];
    CHECK_OK(ev_to_host(&EX, i32, g32));
    CHECK_OK(ev_to_host(&EX, i64, g64));
    CHECK_OK(ev_to_host(&EX, b, gb));
    CHECK_OK(ev_to_host(&EX, f32, gf));
    const int32_t w32[] = {1, -1, 0, 0, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, 0};
    const int64_t w64[] = {1, -1, 0, 0, INT64_MIN, INT64_MIN, INT64_MIN, 3000000000LL,
                           -3000000000LL, 0};
    const uint8_t wb[] = {1, 1, 0, 0, 1, 1, 1, 1, 1, 1};
    for (int i = 0; i < n; i++) {
        CHECK_EQ(g32[i], w32[i]);
        CHECK_EQ(g64[i], w64[i]);
        CHECK_EQ(gb[i], wb[i]);
        CHECK(isnan(src[i]) ? isnan(gf[i]) : gf[i] == (float)src[i]);
    }
    /* int64 -> int32 wraps; int64 -> float32 rounds once (2^24 + 1). */
    const int64_t big[] = {((int64_t)1 << 32) + 5, -1, (1 << 24) + 1, INT64_MAX};
    const int64_t four = 4;
    ev_tensor *l, *li, *lf;
    CHECK_OK(ev_from_host(&EX, EV_INT64, 1, &four, big, &l));
    CHECK_OK(ev_cast(&EX, l, EV_INT32, &li));
    CHECK_OK(ev_cast(&EX, l, EV_FLOAT32, &lf));
    int32_t gi[4];
    float gl[4];
    CHECK_OK(ev_to_host(&EX, li, gi));
    CHECK_OK(ev_to_host(&EX, lf, gl));
    CHECK_EQ(gi[0], 5);
    CHECK_EQ(gi[1], -1);
    CHECK(gl[2] == 16777216.0f);
    CHECK(gl[3] == 9223372036854775808.0f);
    ev_tensor *bad = NULL;
    CHECK_EQ(ev_cast(&EX, l, EV_DTYPE_COUNT, &bad), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "cast: invalid target dtype");
    CHECK(bad == NULL);
    ev_tensor *ts[] = {f, i32, i64, b, f32, l, li, lf};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        ev_tensor_unref(ts[i]);
    }
}

/* float64 (and float32) -> uint8/int8/int16 at the edges: truncated into
 * int32 as the int32 cast does (NaN, infinities and values past int32 give
 * INT32_MIN), then wrapped to the width; NumPy's x86 results. n = 40 so the
 * contiguous (vectorized) loop runs, and a step-2 view for the strided one. */
static void test_narrow_casts(void)
{
    const double edge[] = {255.0, 256.0, 300.0, -1.0, -129.0, -128.5, 127.9, 1e10,
                           -1e10, NAN, INFINITY, -INFINITY, 40000.0, -40000.0, 0.5, -0.5};
    enum { K = 16, N = 40 };
    const int64_t wu8[K] = {255, 0, 44, 255, 127, 128, 127, 0, 0, 0, 0, 0, 64, 192, 0, 0};
    const int64_t wi8[K] = {-1, 0, 44, -1, 127, -128, 127, 0, 0, 0, 0, 0, 64, -64, 0, 0};
    const int64_t wi16[K] = {255, 256, 300, -1, -129, -128, 127, 0, 0, 0, 0, 0, -25536, 25536,
                             0, 0};
    double src[N];
    for (int i = 0; i < N; i++) {
        src[i] = edge[i % K];
    }
    const int64_t n = N;
    ev_tensor *f64, *f32;
    CHECK_OK(ev_from_host(&EX, EV_FLOAT64, 1, &n, src, &f64));
    CHECK_OK(ev_cast(&EX, f64, EV_FLOAT32, &f32));
    const ev_dtype dts[] = {EV_UINT8, EV_INT8, EV_INT16};
    const int64_t *wants[] = {wu8, wi8, wi16};
    for (int k = 0; k < 3; k++) {
        ev_tensor *froms[] = {f64, f32};
        for (int j = 0; j < 2; j++) {
            ev_tensor *t;
            int64_t got[N];
            CHECK_OK(ev_cast(&EX, froms[j], dts[k], &t));
            CHECK_EQ(ev_tensor_dtype(t), dts[k]);
            read_i64(t, got);
            for (int i = 0; i < N; i++) {
                if (got[i] != wants[k][i % K]) {
                    fprintf(stderr, "%s -> %s: %g gave %lld\n", j ? "float32" : "float64",
                            ev_dtype_name(dts[k]), src[i], (long long)got[i]);
                }
                CHECK_EQ(got[i], wants[k][i % K]);
            }
            ev_tensor_unref(t);
            /* The strided loop: every other element. */
            ev_tensor *view;
            CHECK_OK(ev_slice(froms[j], 0, 1, INT64_MAX, 2, &view));
            CHECK_OK(ev_cast(&EX, view, dts[k], &t));
            read_i64(t, got);
            for (int i = 0; i < N / 2; i++) {
                CHECK_EQ(got[i], wants[k][(2 * i + 1) % K]);
            }
            ev_tensor_unref(t);
            ev_tensor_unref(view);
        }
    }
    /* Integers to narrower integers wrap; narrow to wide and to float are exact. */
    const int64_t ints[] = {-1, 255, 256, -129, 128, 32768, -32769, 200, INT64_MIN, 7};
    const int64_t m = 10;
    const int64_t wu[] = {255, 255, 0, 127, 128, 0, 255, 200, 0, 7};
    const int64_t wb[] = {-1, -1, 0, 127, -128, 0, -1, -56, 0, 7};
    const int64_t ws[] = {-1, 255, 256, -129, 128, -32768, 32767, 200, 0, 7};
    ev_tensor *l;
    CHECK_OK(ev_from_host(&EX, EV_INT64, 1, &m, ints, &l));
    const int64_t *iw[] = {wu, wb, ws};
    for (int k = 0; k < 3; k++) {
        ev_tensor *t, *back, *asf;
        int64_t got[10];
        double gf[10];
        CHECK_OK(ev_cast(&EX, l, dts[k], &t));
        read_i64(t, got);
        CHECK_OK(ev_cast(&EX, t, EV_INT32, &back));
        CHECK_OK(ev_cast(&EX, t, EV_FLOAT32, &asf));
        int64_t gb[10];
        read_i64(back, gb);
        read_f64(asf, gf);
        for (int i = 0; i < m; i++) {
            CHECK_EQ(got[i], iw[k][i]);
            CHECK_EQ(gb[i], iw[k][i]);
            CHECK(gf[i] == (double)iw[k][i]);
        }
        ev_tensor_unref(t);
        ev_tensor_unref(back);
        ev_tensor_unref(asf);
    }
    /* Between the narrow dtypes, and to and from bool. */
    const uint8_t u8v[] = {0, 1, 127, 128, 200, 255};
    const int64_t six = 6;
    ev_tensor *u, *s8, *bl, *ub;
    CHECK_OK(ev_from_host(&EX, EV_UINT8, 1, &six, u8v, &u));
    CHECK_OK(ev_cast(&EX, u, EV_INT8, &s8));
    CHECK_OK(ev_cast(&EX, u, EV_BOOL, &bl));
    CHECK_OK(ev_cast(&EX, bl, EV_UINT8, &ub));
    int8_t g8[6];
    uint8_t gbl[6], gub[6];
    CHECK_OK(ev_to_host(&EX, s8, g8));
    CHECK_OK(ev_to_host(&EX, bl, gbl));
    CHECK_OK(ev_to_host(&EX, ub, gub));
    const int8_t w8[] = {0, 1, 127, -128, -56, -1};
    for (int i = 0; i < 6; i++) {
        CHECK_EQ(g8[i], w8[i]);
        CHECK_EQ(gbl[i], u8v[i] != 0);
        CHECK_EQ(gub[i], u8v[i] != 0);
    }
    ev_tensor *ts[] = {f64, f32, l, u, s8, bl, ub};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        ev_tensor_unref(ts[i]);
    }
}

int main(void)
{
    test_setup();
    RUN_TEST(test_table);
    RUN_TEST(test_int_range);
    RUN_TEST(test_promotion);
    RUN_TEST(test_result_dtypes);
    RUN_TEST(test_casts);
    RUN_TEST(test_narrow_casts);
    test_teardown();
    return 0;
}
