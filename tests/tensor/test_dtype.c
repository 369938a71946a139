/* Tests of the dtype table, NumPy promotion, result dtypes of ops, and the
 * conversions every cast and copy goes through. */
#include "tensor_test.h"

static void test_table(void)
{
    CHECK_EQ(EV_DTYPE_COUNT, 5);
    const char *names[] = {"bool", "int32", "int64", "float32", "float64"};
    const size_t sizes[] = {1, 4, 8, 4, 8};
    for (int d = 0; d < EV_DTYPE_COUNT; d++) {
        CHECK(strcmp(ev_dtype_name((ev_dtype)d), names[d]) == 0);
        CHECK_EQ(ev_dtype_size((ev_dtype)d), sizes[d]);
        ev_dtype back;
        CHECK_OK(ev_dtype_from_name(names[d], &back));
        CHECK_EQ(back, d);
        CHECK_EQ(ev_dtype_get_info((ev_dtype)d)->compute, d);
    }
    CHECK(strcmp(ev_dtype_name((ev_dtype)99), "invalid") == 0);
    CHECK(ev_dtype_get_info((ev_dtype)-1) == NULL);
    CHECK_EQ(ev_dtype_size(EV_DTYPE_COUNT), 0);
    CHECK(ev_dtype_is_float(EV_FLOAT32) && !ev_dtype_is_float(EV_INT64));
    ev_dtype d;
    CHECK_EQ(ev_dtype_from_name("float16", &d), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "float16");
}

static void test_promotion(void)
{
    /* numpy.result_type for every pair (NumPy 2). */
    enum { B = EV_BOOL, I = EV_INT32, L = EV_INT64, F = EV_FLOAT32, D = EV_FLOAT64 };
    const int want[5][5] = {
        /*        B  I  L  F  D */
        /* B */ {B, I, L, F, D},
        /* I */ {I, I, L, D, D},
        /* L */ {L, L, L, D, D},
        /* F */ {F, D, D, F, D},
        /* D */ {D, D, D, D, D},
    };
    for (int a = 0; a < 5; a++) {
        for (int b = 0; b < 5; b++) {
            CHECK_EQ(ev_promote_types((ev_dtype)a, (ev_dtype)b), want[a][b]);
        }
    }
    CHECK_EQ(ev_promote_types(EV_DTYPE_COUNT, EV_INT32), EV_DTYPE_COUNT);
    CHECK_EQ(ev_dtype_to_float(EV_BOOL), EV_FLOAT32);
    CHECK_EQ(ev_dtype_to_float(EV_INT32), EV_FLOAT64);
    CHECK_EQ(ev_dtype_to_float(EV_INT64), EV_FLOAT64);
    CHECK_EQ(ev_dtype_to_float(EV_FLOAT32), EV_FLOAT32);
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
    CHECK_EQ(r, EV_INT32);
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

int main(void)
{
    test_setup();
    RUN_TEST(test_table);
    RUN_TEST(test_promotion);
    RUN_TEST(test_result_dtypes);
    RUN_TEST(test_casts);
    test_teardown();
    return 0;
}
