/* Tests of the bitwise ops: and, or, xor, shifts and not on bool and integer
 * tensors against references computed here (NumPy's semantics), with
 * broadcasting, promotion, non-contiguous operands, in-place forms, zero-size
 * tensors and the errors raised at the call. */
#include "tensor_test.h"

static int64_t shl64(int64_t x, int64_t y)
{
    return (uint64_t)y < 64 ? (int64_t)((uint64_t)x << y) : 0;
}

static int64_t shr64(int64_t x, int64_t y)
{
    return (uint64_t)y < 64 ? x >> y : (x < 0 ? -1 : 0);
}

static void test_int_ops(void)
{
    const double av[] = {0, 1, -1, 12345, -98765, 0x7fffffff, -2147483648.0, 6};
    const double bv[] = {3, 0, 5, 4, 31, 1, 1, 70};
    const int64_t n = 8;
    for (int dt = EV_INT32; dt <= EV_INT64; dt++) {
        ev_tensor *a = tensor_from((ev_dtype)dt, 1, &n, av);
        ev_tensor *b = tensor_from((ev_dtype)dt, 1, &n, bv);
        for (int op = EV_OP_BITWISE_AND; op <= EV_OP_BITWISE_RIGHT_SHIFT; op++) {
            ev_tensor *c;
            CHECK_OK(ev_binary(&EX, op, a, b, &c));
            double want[8];
            for (int i = 0; i < n; i++) {
                int64_t x = (int64_t)av[i], y = (int64_t)bv[i], r;
                int bits = dt == EV_INT32 ? 32 : 64;
                switch (op) {
                case EV_OP_BITWISE_AND: r = x & y; break;
                case EV_OP_BITWISE_OR: r = x | y; break;
                case EV_OP_BITWISE_XOR: r = x ^ y; break;
                case EV_OP_BITWISE_LEFT_SHIFT:
                    r = bits == 32 ? (y < 32 ? (int32_t)((uint32_t)x << y) : 0) : shl64(x, y);
                    break;
                default:
                    r = bits == 32 ? (y < 32 ? (int32_t)x >> y : (x < 0 ? -1 : 0)) : shr64(x, y);
                    break;
                }
                want[i] = (double)r;
            }
            check_tensor(c, (ev_dtype)dt, 1, &n, want, 0);
            ev_tensor_unref(c);
        }
        ev_tensor *c;
        CHECK_OK(ev_bitwise_not(&EX, a, &c));
        double want[8];
        for (int i = 0; i < n; i++) {
            want[i] = (double)~(int64_t)av[i];
        }
        check_tensor(c, (ev_dtype)dt, 1, &n, want, 0);
        ev_tensor_unref(c);
        ev_tensor_unref(a);
        ev_tensor_unref(b);
    }
    /* Negative shift counts give 0 (-1 for a negative value shifted right). */
    ev_tensor *a = tensor_from(EV_INT64, 1, SHAPE(2), VALS(5, -5));
    ev_tensor *b = tensor_from(EV_INT64, 1, SHAPE(2), VALS(-1, -1));
    ev_tensor *c;
    CHECK_OK(ev_bitwise_left_shift(&EX, a, b, &c));
    check_tensor(c, EV_INT64, 1, SHAPE(2), VALS(0, 0), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_bitwise_right_shift(&EX, a, b, &c));
    check_tensor(c, EV_INT64, 1, SHAPE(2), VALS(0, -1), 0);
    ev_tensor_unref(c);
    ev_tensor_unref(a);
    ev_tensor_unref(b);
}

static void test_bool_and_promotion(void)
{
    ev_tensor *p = tensor_from(EV_BOOL, 1, SHAPE(4), VALS(0, 0, 1, 1));
    ev_tensor *q = tensor_from(EV_BOOL, 1, SHAPE(4), VALS(0, 1, 0, 1));
    ev_tensor *c;
    CHECK_OK(ev_bitwise_and(&EX, p, q, &c));
    check_tensor(c, EV_BOOL, 1, SHAPE(4), VALS(0, 0, 0, 1), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_bitwise_or(&EX, p, q, &c));
    check_tensor(c, EV_BOOL, 1, SHAPE(4), VALS(0, 1, 1, 1), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_bitwise_xor(&EX, p, q, &c));
    check_tensor(c, EV_BOOL, 1, SHAPE(4), VALS(0, 1, 1, 0), 0);
    ev_tensor_unref(c);
    CHECK_OK(ev_bitwise_not(&EX, p, &c));
    check_tensor(c, EV_BOOL, 1, SHAPE(4), VALS(1, 1, 0, 0), 0);
    ev_tensor_unref(c);
    /* Shifts of bools compute as integers. */
    CHECK_OK(ev_bitwise_left_shift(&EX, p, q, &c));
    CHECK(ev_tensor_dtype(c) != EV_BOOL);
    check_tensor(c, ev_tensor_dtype(c), 1, SHAPE(4), VALS(0, 0, 1, 2), 0);
    ev_tensor_unref(c);
    /* bool with int32 promotes to int32; int32 with int64 to int64, broadcast. */
    ev_tensor *i32 = tensor_from(EV_INT32, 2, SHAPE(2, 1), VALS(6, 3));
    CHECK_OK(ev_bitwise_and(&EX, i32, q, &c));
    check_tensor(c, EV_INT32, 2, SHAPE(2, 4), VALS(0, 0, 0, 0, 0, 1, 0, 1), 0);
    ev_tensor_unref(c);
    ev_tensor *i64 = tensor_from(EV_INT64, 1, SHAPE(3), VALS(1, 2, 4));
    CHECK_OK(ev_bitwise_or(&EX, i32, i64, &c));
    check_tensor(c, EV_INT64, 2, SHAPE(2, 3), VALS(7, 6, 6, 3, 3, 7), 0);
    ev_tensor_unref(c);
    ev_dtype r;
    CHECK_OK(ev_binary_result_dtype(EV_OP_BITWISE_XOR, EV_BOOL, EV_BOOL, &r));
    CHECK_EQ(r, EV_BOOL);
    ev_tensor_unref(p);
    ev_tensor_unref(q);
    ev_tensor_unref(i32);
    ev_tensor_unref(i64);
}

static void test_strided_inplace_empty(void)
{
    /* A transposed (non-contiguous) operand. */
    ev_tensor *a = tensor_from(EV_INT64, 2, SHAPE(2, 3), VALS(1, 2, 3, 4, 5, 6));
    ev_tensor *at, *c;
    CHECK_OK(ev_transpose(a, 0, 1, &at));
    ev_tensor *m = tensor_from(EV_INT64, 2, SHAPE(3, 2), VALS(1, 1, 2, 2, 4, 4));
    CHECK_OK(ev_bitwise_xor(&EX, at, m, &c));
    check_tensor(c, EV_INT64, 2, SHAPE(3, 2), VALS(0, 5, 0, 7, 7, 2), 0);
    ev_tensor_unref(c);
    /* In place, also through a view and with a narrower operand. */
    ev_tensor *s = tensor_from(EV_INT32, 1, SHAPE(3), VALS(1, 1, 1));
    ev_tensor *s2 = tensor_from(EV_INT32, 1, SHAPE(2), VALS(1, 1));
    CHECK_OK(ev_bitwise_left_shift_(&EX, at, s2));
    ev_tensor_unref(s2);
    check_tensor(a, EV_INT64, 2, SHAPE(2, 3), VALS(2, 4, 6, 8, 10, 12), 0);
    CHECK_OK(ev_bitwise_not_(&EX, a));
    check_tensor(a, EV_INT64, 2, SHAPE(2, 3), VALS(-3, -5, -7, -9, -11, -13), 0);
    /* int32 &= int64 is allowed (same kind) and wraps. */
    ev_tensor *w = tensor_from(EV_INT32, 1, SHAPE(3), VALS(7, 7, 7));
    CHECK_OK(ev_bitwise_and_(&EX, w, s));
    check_tensor(w, EV_INT32, 1, SHAPE(3), VALS(1, 1, 1), 0);
    /* Zero-size. */
    ev_tensor *e;
    CHECK_OK(ev_zeros(&EX, EV_INT32, 2, SHAPE(0, 3), &e));
    CHECK_OK(ev_bitwise_or(&EX, e, s, &c));
    check_tensor(c, EV_INT32, 2, SHAPE(0, 3), VALS(0), 0);
    ev_tensor_unref(c);
    ev_tensor_unref(e);
    ev_tensor_unref(w);
    ev_tensor_unref(s);
    ev_tensor_unref(m);
    ev_tensor_unref(at);
    ev_tensor_unref(a);
}

static void test_errors(void)
{
    ev_tensor *f = tensor_from(EV_FLOAT32, 1, SHAPE(2), VALS(1, 2));
    ev_tensor *i = tensor_from(EV_INT64, 1, SHAPE(2), VALS(1, 2));
    ev_tensor *j = tensor_from(EV_INT64, 1, SHAPE(3), VALS(1, 2, 3));
    ev_tensor *b = tensor_from(EV_BOOL, 1, SHAPE(2), VALS(1, 0));
    ev_tensor *c = NULL;
    CHECK_EQ(ev_bitwise_and(&EX, f, i, &c), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "bitwise_and: not supported for dtypes float32 and "
                                          "int64");
    CHECK_EQ(ev_bitwise_not(&EX, f, &c), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "bitwise_not: not supported for dtype float32");
    CHECK_EQ(ev_bitwise_or(&EX, i, j, &c), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "cannot be broadcast");
    /* bool |= int64 would need a cast up in kind. */
    CHECK_EQ(ev_bitwise_or_(&EX, b, i), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "bitwise_or_: the result dtype int64 cannot be cast");
    CHECK_EQ(ev_binary(&EX, 99, i, i, &c), EV_EINVAL);
    CHECK(c == NULL);
    ev_tensor *x;
    CHECK_OK(ev_expand(b, 2, SHAPE(3, 2), &x));
    CHECK_EQ(ev_bitwise_not_(&EX, x), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "expanded");
    CHECK(strcmp(ev_binary_op_name(EV_OP_BITWISE_RIGHT_SHIFT), "bitwise_right_shift") == 0);
    CHECK(strcmp(ev_binary_op_name(-1), "invalid") == 0);
    ev_tensor_unref(x);
    ev_tensor_unref(f);
    ev_tensor_unref(i);
    ev_tensor_unref(j);
    ev_tensor_unref(b);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_int_ops);
    RUN_TEST(test_bool_and_promotion);
    RUN_TEST(test_strided_inplace_empty);
    RUN_TEST(test_errors);
    test_teardown();
    return 0;
}
