/* Tests of elementwise binary and unary ops: every op against a reference
 * computed here element by element (NumPy's documented semantics), with
 * broadcasting, promotion, non-contiguous and overlapping operands, 0-d and
 * zero-size tensors, in-place forms, and the errors raised at the call. */
#include <stdlib.h>
#include <string.h>

#include "tensor_test.h"

/* ------------------------------------------------------------- references */

static double py_floordiv(double a, double b)
{
    return floor(a / b);
}

static double py_mod(double a, double b)
{
    double m = fmod(a, b);
    if (m != 0 && ((m < 0) != (b < 0))) {
        m += b;
    }
    return m;
}

static void test_arith_float(void)
{
    const double av[] = {7.5, -7.5, 3, -0.5, 1e10, 2, 0.25, -3};
    const double bv[] = {-2, 2, 3, 4, 3, -1.5, 0.5, 7};
    const int64_t n = 8;
    for (int dt = EV_FLOAT32; dt <= EV_FLOAT64; dt++) {
        ev_tensor *a = tensor_from((ev_dtype)dt, 1, &n, av);
        ev_tensor *b = tensor_from((ev_dtype)dt, 1, &n, bv);
        double rtol = dt == EV_FLOAT32 ? 1e-6 : 1e-15;
        for (int op = EV_OP_ADD; op <= EV_OP_MINIMUM; op++) {
            ev_tensor *c;
            CHECK_OK(ev_binary(&EX, op, a, b, &c));
            double want[8];
            for (int i = 0; i < n; i++) {
                /* The reference sees the inputs as the dtype holds them. */
                double x = dt == EV_FLOAT32 ? (float)av[i] : av[i];
                double y = dt == EV_FLOAT32 ? (float)bv[i] : bv[i];
                switch (op) {
                case EV_OP_ADD: want[i] = x + y; break;
                case EV_OP_SUB: want[i] = x - y; break;
                case EV_OP_MUL: want[i] = x * y; break;
                case EV_OP_DIV: want[i] = x / y; break;
                case EV_OP_FLOOR_DIVIDE: want[i] = py_floordiv(x, y); break;
                case EV_OP_REMAINDER: want[i] = py_mod(x, y); break;
                case EV_OP_POW: want[i] = pow(x, y); break;
                case EV_OP_MAXIMUM: want[i] = x > y ? x : y; break;
                default: want[i] = x < y ? x : y; break;
                }
                if (dt == EV_FLOAT32) {
                    want[i] = (float)want[i];
                }
            }
            check_tensor(c, (ev_dtype)dt, 1, &n, want, op == EV_OP_POW ? rtol * 4 : rtol);
            ev_tensor_unref(c);
        }
        ev_tensor_unref(a);
        ev_tensor_unref(b);
    }
    /* Division by zero and NaN, as NumPy: 1 // 0. = inf, 1 % 0. = nan,
     * -0.5 // inf... and maximum/minimum propagate NaN. */
    ev_tensor *a = tensor_from(EV_FLOAT64, 1, SHAPE(4), VALS(1, -1, NAN, 2));
    ev_tensor *b = tensor_from(EV_FLOAT64, 1, SHAPE(4), VALS(0, 0, 1, NAN));
    ev_tensor *c;
    CHECK_OK(ev_floor_divide(&EX, a, b, &c));
    check_tensor(c, EV_FLOAT64, 1, SHAPE(4), VALS(INFINITY, -INFINITY, NAN, NAN), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_remainder(&EX, a, b, &c));
    check_tensor(c, EV_FLOAT64, 1, SHAPE(4), VALS(NAN, NAN, NAN, NAN), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_maximum(&EX, a, b, &c));
    check_tensor(c, EV_FLOAT64, 1, SHAPE(4), VALS(1, 0, NAN, NAN), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_minimum(&EX, b, a, &c));
    check_tensor(c, EV_FLOAT64, 1, SHAPE(4), VALS(0, -1, NAN, NAN), 0);
    ev_tensor_unref(c);
    ev_tensor_unref(a);
    ev_tensor_unref(b);
}

static void test_arith_int(void)
{
    /* Python semantics for // and %, 0 for division by zero, MIN // -1
     * wraps, + and * wrap. */
    const int64_t n = 8;
    for (int dt = EV_INT32; dt <= EV_INT64; dt++) {
        int64_t mn = dt == EV_INT32 ? INT32_MIN : INT64_MIN;
        int64_t mx = dt == EV_INT32 ? INT32_MAX : INT64_MAX;
        int64_t av[8] = {7, -7, 7, -7, 5, mn, mx, 6};
        int64_t bv[8] = {2, 2, -2, -2, 0, -1, 1, 3};
        ev_tensor *a64, *b64, *a, *b;
        CHECK_OK(ev_from_host(&EX, EV_INT64, 1, &n, av, &a64));
        CHECK_OK(ev_from_host(&EX, EV_INT64, 1, &n, bv, &b64));
        CHECK_OK(ev_cast(&EX, a64, (ev_dtype)dt, &a));
        CHECK_OK(ev_cast(&EX, b64, (ev_dtype)dt, &b));
        const int64_t fd[8] = {3, -4, -4, 3, 0, mn, mx, 2};
        const int64_t md[8] = {1, 1, -1, -1, 0, 0, 0, 0};
        const int64_t sum[8] = {9, -5, 5, -9, 5, mx, mn, 9}; /* mx + 1 wraps to mn */
        ev_tensor *c;
        int64_t got[8];
        CHECK_OK(ev_floor_divide(&EX, a, b, &c));
        CHECK_EQ(ev_tensor_dtype(c), dt);
        read_i64(c, got);
        for (int i = 0; i < n; i++) {
            CHECK_EQ(got[i], fd[i]);
        }
        ev_tensor_unref(c);
        CHECK_OK(ev_remainder(&EX, a, b, &c));
        read_i64(c, got);
        for (int i = 0; i < n; i++) {
            CHECK_EQ(got[i], md[i]);
        }
        ev_tensor_unref(c);
        CHECK_OK(ev_add(&EX, a, b, &c));
        read_i64(c, got);
        for (int i = 0; i < n; i++) {
            CHECK_EQ(got[i], sum[i]);
        }
        ev_tensor_unref(c);
        /* True division of integers gives float64. */
        CHECK_OK(ev_div(&EX, a, b, &c));
        CHECK_EQ(ev_tensor_dtype(c), EV_FLOAT64);
        double gd[8];
        read_f64(c, gd);
        CHECK_CLOSE(gd[1], -3.5, 0);
        CHECK(isinf(gd[4]));
        ev_tensor_unref(c);
        ev_tensor_unref(a);
        ev_tensor_unref(b);
        ev_tensor_unref(a64);
        ev_tensor_unref(b64);
    }
    ev_tensor *a = tensor_from(EV_INT32, 1, SHAPE(5), VALS(2, 3, -2, 0, 7));
    ev_tensor *b = tensor_from(EV_INT32, 1, SHAPE(5), VALS(10, 0, 3, 0, 2));
    ev_tensor *c;
    CHECK_OK(ev_pow(&EX, a, b, &c));
    check_tensor(c, EV_INT32, 1, SHAPE(5), VALS(1024, 1, -8, 1, 49), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_mul(&EX, a, b, &c));
    check_tensor(c, EV_INT32, 1, SHAPE(5), VALS(20, 0, -6, 0, 14), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_sub(&EX, a, b, &c));
    check_tensor(c, EV_INT32, 1, SHAPE(5), VALS(-8, 3, -5, 0, 5), 0);
    ev_tensor_unref(c);
    ev_tensor_unref(a);
    ev_tensor_unref(b);
}

/* ------------------------------------------------- uint8, int8, int16 */

/* v wrapped to dt's width, as NumPy's uint8/int8/int16 arithmetic. */
static int64_t wrap_to(ev_dtype dt, int64_t v)
{
    uint64_t u = (uint64_t)v;
    switch (dt) {
    case EV_UINT8: return (int64_t)(u & 0xff);
    case EV_INT8: return (int64_t)(int8_t)(uint8_t)(u & 0xff);
    default: return (int64_t)(int16_t)(uint16_t)(u & 0xffff);
    }
}

/* NumPy's result of op on two values of dtype dt (exact arithmetic, then
 * the wrap; 0 for integer division by zero; shifts by the width or more
 * give 0, or -1 for a right shift of a negative value). */
static int64_t ref_narrow(int op, ev_dtype dt, int64_t x, int64_t y)
{
    int bits = (int)ev_dtype_size(dt) * 8;
    switch (op) {
    case 0: return wrap_to(dt, x + y);
    case 1: return wrap_to(dt, x - y);
    case 2: return wrap_to(dt, x * y);
    case 3: { /* floor_divide */
        if (y == 0) {
            return 0;
        }
        int64_t q = x / y;
        if (x % y != 0 && ((x < 0) != (y < 0))) {
            q--;
        }
        return wrap_to(dt, q);
    }
    case 4: { /* remainder */
        if (y == 0) {
            return 0;
        }
        int64_t r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) {
            r += y;
        }
        return r;
    }
    case 5: { /* pow, y >= 0 */
        uint64_t r = 1;
        for (int64_t k = 0; k < y; k++) {
            r *= (uint64_t)x;
        }
        return wrap_to(dt, (int64_t)r);
    }
    case 6: return x > y ? x : y;
    case 7: return x < y ? x : y;
    case 8: return wrap_to(dt, x & y);
    case 9: return wrap_to(dt, x | y);
    case 10: return wrap_to(dt, x ^ y);
    case 11: return y < 0 || y >= bits ? 0 : wrap_to(dt, (int64_t)((uint64_t)x << y));
    default: return y < 0 || y >= bits ? (x < 0 ? -1 : 0) : x >> y;
    }
}

static void test_narrow_int(void)
{
    enum { N = 12, OPS = 13 };
    const char *names[OPS] = {"add", "sub", "mul", "floor_divide", "remainder", "pow",
                              "maximum", "minimum", "and", "or", "xor", "shl", "shr"};
    const ev_dtype dts[] = {EV_UINT8, EV_INT8, EV_INT16};
    for (int k = 0; k < 3; k++) {
        ev_dtype dt = dts[k];
        int64_t lo, hi;
        CHECK_OK(ev_dtype_int_range(dt, &lo, &hi));
        /* Edges of the range, signs, zero divisors; y in [0, 9] for pow and
         * shifts beyond the width (k == 0 column). */
        int64_t xv[N] = {hi, lo, hi, lo, 7, 0, 100, 3, 1, hi - 1, lo + 1, 5};
        int64_t yv[N] = {1, 1, hi, 0, 2, 0, 3, 9, 7, 2, 3, 1};
        if (lo < 0) {
            xv[5] = -7;
            yv[4] = -2;
            yv[11] = -1; /* a negative shift count gives 0 or -1 */
            xv[2] = lo;
            yv[2] = -1; /* MIN // -1 wraps to MIN */
        }
        const int64_t n = N;
        ev_tensor *x64, *y64, *x, *y;
        CHECK_OK(ev_from_host(&EX, EV_INT64, 1, &n, xv, &x64));
        CHECK_OK(ev_from_host(&EX, EV_INT64, 1, &n, yv, &y64));
        CHECK_OK(ev_cast(&EX, x64, dt, &x));
        CHECK_OK(ev_cast(&EX, y64, dt, &y));
        for (int op = 0; op < OPS; op++) {
            ev_tensor *r;
            if (op == 5) {
                /* pow with non-negative exponents only (else the kernel fails). */
                ev_tensor *ay;
                CHECK_OK(ev_abs(&EX, y, &ay));
                ev_tensor *cap = tensor_from(dt, 0, NULL, VALS(9)), *ey;
                CHECK_OK(ev_minimum(&EX, ay, cap, &ey));
                CHECK_OK(ev_pow(&EX, x, ey, &r));
                int64_t e[N];
                read_i64(ey, e);
                int64_t got[N];
                read_i64(r, got);
                for (int i = 0; i < N; i++) {
                    CHECK_EQ(got[i], ref_narrow(op, dt, xv[i], e[i]));
                }
                ev_tensor_unref(ay);
                ev_tensor_unref(cap);
                ev_tensor_unref(ey);
                ev_tensor_unref(r);
                continue;
            }
            static const int bin[] = {EV_OP_ADD, EV_OP_SUB, EV_OP_MUL, EV_OP_FLOOR_DIVIDE,
                                      EV_OP_REMAINDER, EV_OP_POW, EV_OP_MAXIMUM, EV_OP_MINIMUM};
            if (op < 8) {
                CHECK_OK(ev_binary(&EX, bin[op], x, y, &r));
            } else {
                CHECK_OK(ev_binary(&EX, EV_OP_BITWISE_AND + (op - 8), x, y, &r));
            }
            CHECK_EQ(ev_tensor_dtype(r), dt);
            int64_t got[N];
            read_i64(r, got);
            for (int i = 0; i < N; i++) {
                int64_t want = ref_narrow(op, dt, xv[i], yv[i]);
                if (got[i] != want) {
                    fprintf(stderr, "%s %s: %lld, %lld gave %lld\n", ev_dtype_name(dt), names[op],
                            (long long)xv[i], (long long)yv[i], (long long)got[i]);
                }
                CHECK_EQ(got[i], want);
            }
            ev_tensor_unref(r);
        }
        /* Unary: neg wraps (uint8: 256 - x), abs of MIN is MIN, abs and relu
         * of uint8 are the identity, ~x wraps. */
        ev_tensor *ng, *ab, *rl, *nt;
        CHECK_OK(ev_neg(&EX, x, &ng));
        CHECK_OK(ev_abs(&EX, x, &ab));
        CHECK_OK(ev_relu(&EX, x, &rl));
        CHECK_OK(ev_bitwise_not(&EX, x, &nt));
        int64_t gn[N], ga[N], gr[N], gt[N];
        read_i64(ng, gn);
        read_i64(ab, ga);
        read_i64(rl, gr);
        read_i64(nt, gt);
        for (int i = 0; i < N; i++) {
            CHECK_EQ(gn[i], wrap_to(dt, -xv[i]));
            CHECK_EQ(ga[i], wrap_to(dt, xv[i] < 0 ? -xv[i] : xv[i]));
            CHECK_EQ(gr[i], xv[i] > 0 ? xv[i] : 0);
            CHECK_EQ(gt[i], wrap_to(dt, ~xv[i]));
        }
        CHECK_EQ(ev_tensor_dtype(ng), dt);
        ev_tensor *ts[] = {ng, ab, rl, nt, x, y, x64, y64};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
            ev_tensor_unref(ts[i]);
        }
    }
    /* uint8 against signed dtypes compares values (in int16 or wider), not
     * bits: 200 > -1 and 255 != -1. */
    ev_tensor *u = tensor_from(EV_UINT8, 1, SHAPE(4), VALS(0, 200, 255, 127));
    ev_tensor *s = tensor_from(EV_INT8, 1, SHAPE(4), VALS(0, -1, -1, 127));
    ev_tensor *r;
    CHECK_OK(ev_gt(&EX, u, s, &r));
    check_tensor(r, EV_BOOL, 1, SHAPE(4), VALS(0, 1, 1, 0), 0);
    ev_tensor_unref(r);
    CHECK_OK(ev_eq(&EX, u, s, &r));
    check_tensor(r, EV_BOOL, 1, SHAPE(4), VALS(1, 0, 0, 1), 0);
    ev_tensor_unref(r);
    CHECK_OK(ev_add(&EX, u, s, &r)); /* int16: no wrap at 8 bits */
    check_tensor(r, EV_INT16, 1, SHAPE(4), VALS(0, 199, 254, 254), 0);
    ev_tensor_unref(r);
    CHECK_OK(ev_sub(&EX, u, u, &r));
    check_tensor(r, EV_UINT8, 1, SHAPE(4), VALS(0, 0, 0, 0), 0);
    ev_tensor_unref(r);
    ev_tensor *i32 = tensor_from(EV_INT32, 0, NULL, VALS(-300));
    CHECK_OK(ev_lt(&EX, i32, u, &r));
    check_tensor(r, EV_BOOL, 1, SHAPE(4), VALS(1, 1, 1, 1), 0);
    ev_tensor_unref(r);
    /* Division: true division gives float64; mixed with floats, float32. */
    ev_tensor *f = tensor_from(EV_FLOAT32, 0, NULL, VALS(2));
    CHECK_OK(ev_div(&EX, u, u, &r));
    CHECK_EQ(ev_tensor_dtype(r), EV_FLOAT64);
    ev_tensor_unref(r);
    CHECK_OK(ev_mul(&EX, u, f, &r));
    check_tensor(r, EV_FLOAT32, 1, SHAPE(4), VALS(0, 400, 510, 254), 0);
    ev_tensor_unref(r);
    /* In place: NumPy's same_kind lets int8 take an int16 result but not
     * uint8 (a signed result into an unsigned tensor). */
    CHECK_EQ(ev_add_(&EX, u, s), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "add_: the result dtype int16 cannot be cast to the "
                                          "in-place operand's dtype uint8");
    CHECK_OK(ev_add_(&EX, s, u)); /* int16 -> int8 wraps: 127 + 127 = -2 */
    check_tensor(s, EV_INT8, 1, SHAPE(4), VALS(0, -57, -2, -2), 0);
    CHECK_OK(ev_mul_(&EX, u, u)); /* 200 * 200 = 40000 = 64 mod 256 */
    check_tensor(u, EV_UINT8, 1, SHAPE(4), VALS(0, 64, 1, 1), 0);
    /* Integer ops that refuse bool keep refusing; float functions give
     * float32. */
    CHECK_OK(ev_sqrt(&EX, u, &r));
    check_tensor(r, EV_FLOAT32, 1, SHAPE(4), VALS(0, 8, 1, 1), 0);
    ev_tensor_unref(r);
    CHECK_EQ(ev_sqrt_(&EX, u), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "sqrt_: the result dtype float32 cannot be cast to "
                                          "the in-place operand's dtype uint8");
    ev_tensor_unref(u);
    ev_tensor_unref(s);
    ev_tensor_unref(i32);
    ev_tensor_unref(f);
}

static void test_compare_logical(void)
{
    ev_tensor *a = tensor_from(EV_INT32, 1, SHAPE(4), VALS(1, 2, 3, 0));
    ev_tensor *b = tensor_from(EV_FLOAT32, 1, SHAPE(4), VALS(1.5, 2, 2.5, NAN));
    const double want[6][4] = {
        {0, 1, 0, 0}, /* eq */
        {1, 0, 1, 1}, /* ne */
        {1, 0, 0, 0}, /* lt */
        {1, 1, 0, 0}, /* le */
        {0, 0, 1, 0}, /* gt */
        {0, 1, 1, 0}, /* ge */
    };
    for (int op = EV_OP_EQ; op <= EV_OP_GE; op++) {
        ev_tensor *c;
        CHECK_OK(ev_binary(&EX, op, a, b, &c));
        check_tensor(c, EV_BOOL, 1, SHAPE(4), want[op - EV_OP_EQ], 0);
        ev_tensor_unref(c);
    }
    /* Logical ops take x != 0 (NaN is true). */
    ev_tensor *c;
    CHECK_OK(ev_logical_and(&EX, a, b, &c));
    check_tensor(c, EV_BOOL, 1, SHAPE(4), VALS(1, 1, 1, 0), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_logical_or(&EX, a, b, &c));
    check_tensor(c, EV_BOOL, 1, SHAPE(4), VALS(1, 1, 1, 1), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_logical_xor(&EX, a, b, &c));
    check_tensor(c, EV_BOOL, 1, SHAPE(4), VALS(0, 0, 0, 1), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_logical_not(&EX, b, &c));
    check_tensor(c, EV_BOOL, 1, SHAPE(4), VALS(0, 0, 0, 0), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_logical_not(&EX, a, &c));
    check_tensor(c, EV_BOOL, 1, SHAPE(4), VALS(0, 0, 0, 1), 0);
    ev_tensor_unref(c);
    /* bool arithmetic: add is or, mul is and, as NumPy. */
    ev_tensor *p = tensor_from(EV_BOOL, 1, SHAPE(4), VALS(0, 0, 1, 1));
    ev_tensor *q = tensor_from(EV_BOOL, 1, SHAPE(4), VALS(0, 1, 0, 1));
    CHECK_OK(ev_add(&EX, p, q, &c));
    check_tensor(c, EV_BOOL, 1, SHAPE(4), VALS(0, 1, 1, 1), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_mul(&EX, p, q, &c));
    check_tensor(c, EV_BOOL, 1, SHAPE(4), VALS(0, 0, 0, 1), 0);
    ev_tensor_unref(c);
    CHECK_EQ(ev_sub(&EX, p, q, &c), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "sub: subtracting bool tensors is not supported");
    ev_tensor *ts[] = {a, b, p, q};
    for (int i = 0; i < 4; i++) {
        ev_tensor_unref(ts[i]);
    }
}

static void test_broadcast_promote(void)
{
    /* [3, 1] int32 + [1, 4] float32 -> [3, 4] float64 (NumPy promotion). */
    ev_tensor *col = tensor_from(EV_INT32, 2, SHAPE(3, 1), VALS(0, 10, 20));
    ev_tensor *row = tensor_from(EV_FLOAT32, 2, SHAPE(1, 4), VALS(0.5, 1, 2, 3));
    ev_tensor *c;
    CHECK_OK(ev_add(&EX, col, row, &c));
    double want[12];
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 4; j++) {
            want[i * 4 + j] = i * 10 + (j == 0 ? 0.5 : j);
        }
    }
    check_tensor(c, EV_FLOAT64, 2, SHAPE(3, 4), want, 0);
    ev_tensor_unref(c);
    /* 0-d with [4], and bool with int64. */
    ev_tensor *s = tensor_from(EV_INT64, 0, NULL, VALS(100));
    ev_tensor *bl = tensor_from(EV_BOOL, 1, SHAPE(4), VALS(1, 0, 1, 1));
    CHECK_OK(ev_mul(&EX, s, bl, &c));
    check_tensor(c, EV_INT64, 1, SHAPE(4), VALS(100, 0, 100, 100), 0);
    ev_tensor_unref(c);
    /* 0-d with 0-d is 0-d. */
    CHECK_OK(ev_sub(&EX, s, s, &c));
    check_tensor(c, EV_INT64, 0, NULL, VALS(0), 0);
    ev_tensor_unref(c);
    /* Zero-size: [0, 3] + [3] -> [0, 3]; [2, 0] with [2, 1]. */
    ev_tensor *e, *three = tensor_from(EV_FLOAT32, 1, SHAPE(3), VALS(1, 2, 3));
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 2, SHAPE(0, 3), &e));
    CHECK_OK(ev_add(&EX, e, three, &c));
    check_tensor(c, EV_FLOAT32, 2, SHAPE(0, 3), NULL, 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_exp(&EX, e, &c));
    CHECK_EQ(ev_tensor_numel(c), 0);
    ev_tensor_unref(c);
    /* Errors name the op and both shapes; nothing is queued. */
    ev_vm_stats before, after;
    CHECK_EQ(ev_add(&EX, row, three, &c), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "add: shapes [1, 4] and [3] cannot be broadcast");
    ev_tensor *four = tensor_from(EV_FLOAT32, 1, SHAPE(4), VALS(1, 2, 3, 4));
    /* Quiesce first: storage releases of earlier temporaries count too. */
    CHECK_OK(ev_synchronize(test_vm, NULL));
    ev_vm_get_stats(test_vm, &before);
    CHECK_EQ(ev_maximum(&EX, three, four, &c), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "maximum: shapes [3] and [4] cannot be broadcast");
    CHECK_EQ(ev_add(&EX, NULL, four, &c), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "add: a is NULL");
    CHECK_EQ(ev_binary(&EX, 99, four, four, &c), EV_EINVAL);
    ev_vm_get_stats(test_vm, &after);
    CHECK_EQ(after.submitted, before.submitted);
    ev_tensor *ts[] = {col, row, s, bl, e, three, four};
    for (int i = 0; i < 7; i++) {
        ev_tensor_unref(ts[i]);
    }
}

static void test_noncontiguous(void)
{
    /* a = arange(3000).reshape(30, 100); x = a.T[::3] has shape [34, 30] and
     * strides [3, 100]. Long flat rows below cross the 256-element block
     * boundary of the buffered path. */
    ev_tensor *a, *a2, *t, *x;
    CHECK_OK(ev_arange(&EX, ev_scalar_int(0), ev_scalar_int(3000), ev_scalar_int(1), EV_INT32,
                       &a));
    CHECK_OK(ev_view(a, 2, SHAPE(30, 100), &a2));
    CHECK_OK(ev_transpose(a2, 0, 1, &t));      /* [100, 30], strides [1, 100] */
    CHECK_OK(ev_slice(t, 0, 0, INT64_MAX, 3, &x)); /* [34, 30], strides [3, 100] */
    ev_tensor *y;
    CHECK_OK(ev_full(&EX, EV_FLOAT32, 2, SHAPE(34, 30), ev_scalar_float(0.5), &y));
    ev_tensor *c;
    CHECK_OK(ev_add(&EX, x, y, &c)); /* int32 + float32 -> float64, buffered */
    double want[34 * 30];
    for (int i = 0; i < 34; i++) {
        for (int j = 0; j < 30; j++) {
            want[i * 30 + j] = (3 * i) + 100 * j + 0.5;
        }
    }
    check_tensor(c, EV_FLOAT64, 2, SHAPE(34, 30), want, 0);
    ev_tensor_unref(c);
    /* Long strided rows of one dtype: a[:, ::2] * 2 on a flat view. */
    ev_tensor *flat, *two;
    CHECK_OK(ev_slice(a, 0, 1, INT64_MAX, 2, &flat)); /* 1500 odd numbers */
    two = tensor_from(EV_INT32, 0, NULL, VALS(2));
    CHECK_OK(ev_mul(&EX, flat, two, &c));
    double w2[1500];
    for (int i = 0; i < 1500; i++) {
        w2[i] = 2.0 * (2 * i + 1);
    }
    check_tensor(c, EV_INT32, 1, SHAPE(1500), w2, 0);
    ev_tensor_unref(c);
    /* Unary on a transposed view. */
    CHECK_OK(ev_neg(&EX, x, &c));
    for (int i = 0; i < 34 * 30; i++) {
        want[i] = -(want[i] - 0.5);
    }
    check_tensor(c, EV_INT32, 2, SHAPE(34, 30), want, 0);
    ev_tensor_unref(c);
    ev_tensor *ts[] = {a, a2, t, x, y, flat, two};
    for (int i = 0; i < 7; i++) {
        ev_tensor_unref(ts[i]);
    }
}

static void test_inplace(void)
{
    ev_tensor *m = tensor_from(EV_INT32, 2, SHAPE(2, 3), VALS(1, 2, 3, 4, 5, 6));
    ev_tensor *r = tensor_from(EV_INT64, 1, SHAPE(3), VALS(10, 20, INT32_MAX));
    CHECK_OK(ev_add_(&EX, m, r)); /* int32 += int64: same kind, wraps */
    check_tensor(m, EV_INT32, 2, SHAPE(2, 3),
                 VALS(11, 22, (double)INT32_MIN + 2, 14, 25, (double)INT32_MIN + 5), 0);
    ev_tensor *f = tensor_from(EV_FLOAT32, 0, NULL, VALS(1.5));
    CHECK_EQ(ev_mul_(&EX, m, f), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "mul_: the result dtype float64 cannot be cast to the "
                                          "in-place operand's dtype int32");
    CHECK_EQ(ev_div_(&EX, m, m), EV_ETYPE);
    ev_tensor *big = tensor_from(EV_INT32, 2, SHAPE(2, 1), VALS(1, 2));
    ev_tensor *row = tensor_from(EV_INT32, 1, SHAPE(3), VALS(1, 2, 3));
    CHECK_EQ(ev_add_(&EX, big, row), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "add_: the result of shape [2, 3] does not fit the "
                                          "in-place operand of shape [2, 1]");
    /* In place on a strided view: m[:, ::2] -= 1 (comparison in place into
     * int: m[1] = m[1] > 20). */
    ev_tensor *v, *one = tensor_from(EV_INT32, 0, NULL, VALS(1)), *row1, *twenty;
    CHECK_OK(ev_slice(m, 1, 0, 3, 2, &v));
    CHECK_OK(ev_sub_(&EX, v, one));
    CHECK_OK(ev_slice(m, 0, 1, 2, 1, &row1));
    twenty = tensor_from(EV_INT32, 0, NULL, VALS(20));
    CHECK_OK(ev_gt_(&EX, row1, twenty));
    check_tensor(m, EV_INT32, 2, SHAPE(2, 3), VALS(10, 22, (double)INT32_MIN + 1, 0, 1, 0), 0);
    /* Overlap: x[1:] += x[:-1] reads the old values (as NumPy). */
    ev_tensor *x = tensor_from(EV_FLOAT64, 1, SHAPE(5), VALS(1, 2, 3, 4, 5)), *hi, *lo;
    CHECK_OK(ev_slice(x, 0, 1, 5, 1, &hi));
    CHECK_OK(ev_slice(x, 0, 0, 4, 1, &lo));
    CHECK_OK(ev_add_(&EX, hi, lo));
    check_tensor(x, EV_FLOAT64, 1, SHAPE(5), VALS(1, 3, 5, 7, 9), 0);
    CHECK_OK(ev_mul_(&EX, x, x)); /* exact alias: fine in place */
    check_tensor(x, EV_FLOAT64, 1, SHAPE(5), VALS(1, 9, 25, 49, 81), 0);
    /* Unary in place, and a float function on an int tensor refused. */
    CHECK_OK(ev_sqrt_(&EX, x));
    check_tensor(x, EV_FLOAT64, 1, SHAPE(5), VALS(1, 3, 5, 7, 9), 0);
    CHECK_EQ(ev_exp_(&EX, m), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "exp_: the result dtype float64 cannot be cast");
    ev_tensor *ts[] = {m, r, f, big, row, v, one, row1, twenty, x, hi, lo};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        ev_tensor_unref(ts[i]);
    }
}

static double ref_unary(int op, double x)
{
    switch (op) {
    case EV_OP_NEG: return -x;
    case EV_OP_ABS: return fabs(x);
    case EV_OP_EXP: return exp(x);
    case EV_OP_LOG: return log(x);
    case EV_OP_SQRT: return sqrt(x);
    case EV_OP_RSQRT: return 1 / sqrt(x);
    case EV_OP_SIN: return sin(x);
    case EV_OP_COS: return cos(x);
    case EV_OP_TANH: return tanh(x);
    case EV_OP_SIGMOID: return 1 / (1 + exp(-x));
    case EV_OP_RELU: return x < 0 ? 0 : x;
    case EV_OP_GELU: return x * 0.5 * erfc(-x / sqrt(2.0));
    case EV_OP_LOGICAL_NOT: return x == 0;
    default: return NAN; /* not checked here */
    }
}

/* The ops ref_unary knows; every row of the op table is checked against
 * NumPy by tests/python/test_op_table.py. */
static int has_ref_unary(int op)
{
    return !isnan(ref_unary(op, 0.5));
}

static void test_unary(void)
{
    const double xv[] = {0.5, -1.25, 2, 0, -0.001, 3.75, 10, -20};
    const int64_t n = 8;
    for (int dt = EV_FLOAT32; dt <= EV_FLOAT64; dt++) {
        ev_tensor *x = tensor_from((ev_dtype)dt, 1, &n, xv);
        for (int op = 0; op < EV_UNARY_OP_COUNT; op++) {
            ev_tensor *c;
            ev_dtype rd;
            if (!has_ref_unary(op)) {
                continue;
            }
            if (ev_unary_result_dtype(op, (ev_dtype)dt, &rd) != 0) {
                /* An op that refuses floats refuses them at the call too. */
                CHECK_EQ(ev_unary(&EX, op, x, &c), EV_ETYPE);
                continue;
            }
            CHECK_OK(ev_unary(&EX, op, x, &c));
            double want[8];
            for (int i = 0; i < n; i++) {
                double v = dt == EV_FLOAT32 ? (float)xv[i] : xv[i];
                want[i] = ref_unary(op, v);
            }
            CHECK_EQ(rd, op == EV_OP_LOGICAL_NOT ? EV_BOOL : (ev_dtype)dt);
            check_tensor(c, rd, 1, &n, want, dt == EV_FLOAT32 ? 2e-6 : 1e-14);
            ev_tensor_unref(c);
        }
        ev_tensor_unref(x);
    }
    /* Integer inputs: exp gives float64; abs and neg wrap at the minimum. */
    ev_tensor *i = tensor_from(EV_INT32, 1, SHAPE(3), VALS(INT32_MIN, -3, 4)), *c;
    CHECK_OK(ev_abs(&EX, i, &c));
    check_tensor(c, EV_INT32, 1, SHAPE(3), VALS(INT32_MIN, 3, 4), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_neg(&EX, i, &c));
    check_tensor(c, EV_INT32, 1, SHAPE(3), VALS(INT32_MIN, 3, -4), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_relu(&EX, i, &c));
    check_tensor(c, EV_INT32, 1, SHAPE(3), VALS(0, 0, 4), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_exp(&EX, i, &c));
    check_tensor(c, EV_FLOAT64, 1, SHAPE(3), VALS(0, exp(-3), exp(4)), 1e-15);
    ev_tensor_unref(c);
    ev_tensor *b = tensor_from(EV_BOOL, 1, SHAPE(2), VALS(1, 0));
    CHECK_OK(ev_sqrt(&EX, b, &c));
    check_tensor(c, EV_FLOAT32, 1, SHAPE(2), VALS(1, 0), 0);
    ev_tensor_unref(c);
    CHECK_EQ(ev_neg(&EX, b, &c), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "neg: not supported for dtype bool");
    CHECK_EQ(ev_unary(&EX, -1, b, &c), EV_EINVAL);
    ev_tensor_unref(b);
    ev_tensor_unref(i);
}

static void test_clamp(void)
{
    ev_tensor *x = tensor_from(EV_FLOAT32, 1, SHAPE(5), VALS(-2, 0.5, 3, NAN, 1)), *c;
    ev_scalar lo = ev_scalar_float(0), hi = ev_scalar_int(1);
    CHECK_OK(ev_clamp(&EX, x, &lo, &hi, &c));
    check_tensor(c, EV_FLOAT32, 1, SHAPE(5), VALS(0, 0.5, 1, NAN, 1), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_clamp(&EX, x, NULL, &hi, &c));
    check_tensor(c, EV_FLOAT32, 1, SHAPE(5), VALS(-2, 0.5, 1, NAN, 1), 0);
    ev_tensor_unref(c);
    /* min > max gives max everywhere (numpy.clip). */
    ev_scalar lo2 = ev_scalar_int(5);
    CHECK_OK(ev_clamp(&EX, x, &lo2, &hi, &c));
    check_tensor(c, EV_FLOAT32, 1, SHAPE(5), VALS(1, 1, 1, NAN, 1), 0);
    ev_tensor_unref(c);
    ev_tensor *i = tensor_from(EV_INT64, 1, SHAPE(4), VALS(-5, 0, 5, 10));
    ev_scalar ilo = ev_scalar_int(-1), ihi = ev_scalar_int(6);
    CHECK_OK(ev_clamp_(&EX, i, &ilo, &ihi));
    check_tensor(i, EV_INT64, 1, SHAPE(4), VALS(-1, 0, 5, 6), 0);
    CHECK_EQ(ev_clamp(&EX, i, &lo, NULL, &c), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "clamp: a float min for a tensor of dtype int64");
    CHECK_EQ(ev_clamp(&EX, i, NULL, NULL, &c), EV_EINVAL);
    ev_tensor_unref(i);
    ev_tensor_unref(x);
}

/* Distance in units in the last place between two floats of one sign
 * (both finite, or equal infinities). */
static int64_t ulp_distance(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    int64_t d = (int64_t)ia - (int64_t)ib;
    return d < 0 ? -d : d;
}

/* float32 exp is our own vectorized code: within 1 ulp of libm's expf over
 * the whole range, subnormal results and overflow included, and exact on
 * the special values. */
static void test_exp_float32_accuracy(void)
{
    const int64_t n = 2000003;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    CHECK(x && y);
    for (int64_t i = 0; i < n; i++) {
        x[i] = -105.0f + 200.0f * (float)i / (float)n;
    }
    const float special[] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 88.72f, 88.73f,
                             -87.33f, -103.0f, 1e-30f, -1e-30f};
    memcpy(x, special, sizeof special);
    ev_tensor *t, *e, *sg;
    CHECK_OK(ev_from_host(&EX, EV_FLOAT32, 1, SHAPE(n), x, &t));
    CHECK_OK(ev_exp(&EX, t, &e));
    CHECK_OK(ev_to_host(&EX, e, y));
    int64_t worst = 0;
    for (int64_t i = 0; i < n; i++) {
        float want = expf(x[i]);
        if (isnan(want)) {
            CHECK(isnan(y[i]));
            continue;
        }
        int64_t d = ulp_distance(y[i], want);
        if (d > worst) {
            worst = d;
        }
        if (d > 1) {
            fprintf(stderr, "exp(%.9g) = %.9g, libm %.9g\n", x[i], y[i], want);
        }
    }
    CHECK_LE(worst, 1);
    CHECK(y[0] == INFINITY && y[1] == 0.0f && y[3] == 1.0f && y[4] == 1.0f && y[6] == INFINITY);
    CHECK_OK(ev_sigmoid(&EX, t, &sg));
    CHECK_OK(ev_to_host(&EX, sg, y));
    for (int64_t i = 3; i < n; i += 7) {
        /* sigmoid computes in double (vmath.h): so does its reference, which
         * keeps the subnormal results that expf's overflow would flush. */
        float want = (float)(1.0 / (1.0 + exp(-(double)x[i])));
        if (ulp_distance(y[i], want) > 4) {
            fprintf(stderr, "sigmoid(%.9g) = %.9g, want %.9g\n", x[i], y[i], want);
        }
        CHECK(ulp_distance(y[i], want) <= 4);
    }
    CHECK(y[0] == 1.0f && y[1] == 0.0f && isnan(y[2]));
    ev_tensor_unref(t);
    ev_tensor_unref(e);
    ev_tensor_unref(sg);
    free(x);
    free(y);
}

/* Compares op over x (n elements) with the libm function ref: NaN where ref
 * gives NaN, equal infinities, and at most max_ulp elsewhere. */
static void check_against_libm(const char *name, int (*op)(const ev_exec *, ev_tensor *,
                                                            ev_tensor **),
                               float (*ref)(float), const float *x, int64_t n,
                               int64_t max_ulp)
{
    float *y = malloc((size_t)n * sizeof *y);
    CHECK(y != NULL);
    ev_tensor *t, *r;
    CHECK_OK(ev_from_host(&EX, EV_FLOAT32, 1, SHAPE(n), x, &t));
    CHECK_OK(op(&EX, t, &r));
    CHECK_OK(ev_to_host(&EX, r, y));
    for (int64_t i = 0; i < n; i++) {
        float want = ref(x[i]);
        int ok = isnan(want) ? isnan(y[i])
                 : isinf(want) || isinf(y[i]) ? want == y[i]
                                               : ulp_distance(y[i], want) <= max_ulp;
        if (!ok) {
            fprintf(stderr, "%s(%.9g) = %.9g, libm %.9g\n", name, x[i], y[i], want);
        }
        CHECK(ok);
    }
    ev_tensor_unref(t);
    ev_tensor_unref(r);
    free(y);
}

/* float32 log and tanh are our own vectorized code too: log within 1 ulp
 * over positive floats spread evenly in bit space (subnormals included),
 * tanh within 2 ulp over [-20, 20], and the special values exact. */
static void test_log_tanh_float32_accuracy(void)
{
    const int64_t n = 1000003;
    float *x = malloc((size_t)n * sizeof *x);
    CHECK(x != NULL);
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)((uint64_t)i * 0x7f800000u / (uint64_t)n);
        memcpy(&x[i], &bits, sizeof bits);
    }
    const float log_special[] = {0.0f, -0.0f, -1.0f, INFINITY, -INFINITY, NAN, 1.0f, 1e-45f};
    memcpy(x, log_special, sizeof log_special);
    check_against_libm("log", ev_log, logf, x, n, 1);
    for (int64_t i = 0; i < n; i++) {
        x[i] = -20.0f + 40.0f * (float)i / (float)n;
    }
    const float tanh_special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 0.625f, -0.625f,
                                  0.62499994f, 1e-30f, -1e-30f, 44.0f, -100.0f};
    memcpy(x, tanh_special, sizeof tanh_special);
    check_against_libm("tanh", ev_tanh, tanhf, x, n, 2);
    free(x);
}

/* x ** 2 takes a square loop when every exponent of the run is 2 (the same
 * bits as x * x, like NumPy's fast path); a run with any other exponent
 * keeps powf. A scalar operand over many buffered blocks is converted once
 * and reused. */
static void test_pow_square_and_scalar_blocks(void)
{
    const int64_t n = 5003; /* several buffered blocks */
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    CHECK(x && y);
    for (int64_t i = 0; i < n; i++) {
        x[i] = ((float)(i % 97) - 48.0f) * 0.37f;
    }
    x[0] = NAN;
    x[1] = -INFINITY;
    x[2] = -0.0f;
    ev_tensor *t, *two, *r, *mixed, *r2, *plus;
    CHECK_OK(ev_from_host(&EX, EV_FLOAT32, 1, SHAPE(n), x, &t));
    CHECK_OK(ev_full(&EX, EV_FLOAT32, 0, NULL, ev_scalar_float(2), &two)); /* as x ** 2 gives */
    CHECK_OK(ev_pow(&EX, t, two, &r));
    CHECK_OK(ev_to_host(&EX, r, y));
    for (int64_t i = 0; i < n; i++) {
        float want = x[i] * x[i];
        CHECK(isnan(want) ? isnan(y[i]) : memcmp(&y[i], &want, sizeof want) == 0);
    }
    /* Exponents 2 except one: powf for the run. */
    float *e = malloc((size_t)n * sizeof *e);
    CHECK(e != NULL);
    for (int64_t i = 0; i < n; i++) {
        e[i] = i == n - 1 ? 3.0f : 2.0f;
    }
    ev_tensor *et;
    CHECK_OK(ev_from_host(&EX, EV_FLOAT32, 1, SHAPE(n), e, &et));
    CHECK_OK(ev_pow(&EX, t, et, &mixed));
    CHECK_OK(ev_to_host(&EX, mixed, y));
    for (int64_t i = 3; i < n; i++) {
        float want = powf(x[i], e[i]);
        CHECK(memcmp(&y[i], &want, sizeof want) == 0);
    }
    /* In place. */
    CHECK_OK(ev_pow_(&EX, t, two));
    CHECK_OK(ev_to_host(&EX, t, y));
    for (int64_t i = 3; i < n; i++) {
        CHECK(y[i] == x[i] * x[i]);
    }
    /* A scalar over every block: t (now x * x) + 2. */
    CHECK_OK(ev_add(&EX, t, two, &plus));
    CHECK_OK(ev_to_host(&EX, plus, y));
    for (int64_t i = 3; i < n; i++) {
        CHECK(y[i] == x[i] * x[i] + 2.0f);
    }
    CHECK_OK(ev_pow(&EX, t, two, &r2)); /* (x * x) ** 2 */
    ev_tensor *objs[] = {t, two, r, mixed, r2, plus, et};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) {
        ev_tensor_unref(objs[i]);
    }
    free(x);
    free(y);
    free(e);
}

/* x ** 0.5, x ** -1 and x ** 1 (every exponent of the run the same) take
 * a root, a quotient and a copy, with pow's special values: +0 for -0 **
 * 0.5 and +inf for -inf ** 0.5, where a root gives -0 and NaN. In float32
 * and float64. */
static float root_want_f32(float x)
{
    return x == -INFINITY ? INFINITY : x == 0.0f ? 0.0f : sqrtf(x);
}

static void test_pow_constant_exponents(void)
{
    enum { N = 4099 }; /* several buffered blocks, no multiple of 16 */
    static float x[N], y[N];
    static double xd[N], yd[N];
    const float specials[] = {-0.0f, 0.0f, -INFINITY, INFINITY, NAN, -2.0f, 1e-40f, 3.0e38f};
    for (int i = 0; i < N; i++) {
        x[i] = i < 8 ? specials[i] : ((float)(i % 193) - 60.0f) * 0.731f;
        xd[i] = (double)x[i];
    }
    const double exps[] = {0.5, -1.0, 1.0};
    for (int k = 0; k < 3; k++) {
        ev_tensor *t, *c, *r, *td, *cd, *rd;
        CHECK_OK(ev_from_host(&EX, EV_FLOAT32, 1, SHAPE(N), x, &t));
        CHECK_OK(ev_full(&EX, EV_FLOAT32, 0, NULL, ev_scalar_float(exps[k]), &c));
        CHECK_OK(ev_pow(&EX, t, c, &r));
        CHECK_OK(ev_to_host(&EX, r, y));
        CHECK_OK(ev_from_host(&EX, EV_FLOAT64, 1, SHAPE(N), xd, &td));
        CHECK_OK(ev_full(&EX, EV_FLOAT64, 0, NULL, ev_scalar_float(exps[k]), &cd));
        CHECK_OK(ev_pow(&EX, td, cd, &rd));
        CHECK_OK(ev_to_host(&EX, rd, yd));
        for (int i = 0; i < N; i++) {
            float want = k == 0 ? root_want_f32(x[i]) : k == 1 ? 1.0f / x[i] : x[i];
            double rootd = xd[i] == -INFINITY ? INFINITY : xd[i] == 0.0 ? 0.0 : sqrt(xd[i]);
            double wantd = k == 0 ? rootd : k == 1 ? 1.0 / xd[i] : xd[i];
            if (!(isnan(want) ? isnan(y[i]) : memcmp(&y[i], &want, sizeof want) == 0) ||
                !(isnan(wantd) ? isnan(yd[i]) : memcmp(&yd[i], &wantd, sizeof wantd) == 0)) {
                EV_CHECK_FAIL_("pow(%a, %g) = %a / %a, want %a / %a", (double)x[i], exps[k],
                               (double)y[i], yd[i], (double)want, wantd);
                break;
            }
        }
        ev_tensor *objs[] = {t, c, r, td, cd, rd};
        for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) {
            ev_tensor_unref(objs[i]);
        }
    }
}

int main(void)
{
    test_setup();
    RUN_TEST(test_arith_float);
    RUN_TEST(test_arith_int);
    RUN_TEST(test_narrow_int);
    RUN_TEST(test_compare_logical);
    RUN_TEST(test_broadcast_promote);
    RUN_TEST(test_noncontiguous);
    RUN_TEST(test_inplace);
    RUN_TEST(test_unary);
    RUN_TEST(test_clamp);
    RUN_TEST(test_exp_float32_accuracy);
    RUN_TEST(test_log_tanh_float32_accuracy);
    RUN_TEST(test_pow_square_and_scalar_blocks);
    RUN_TEST(test_pow_constant_exponents);
    test_teardown();
    return 0;
}
