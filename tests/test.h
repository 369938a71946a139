/* Minimal assertion macros for eagervm's C tests: each failure prints both
 * operands and the location, then exits non-zero so CTest records it. */
#ifndef EV_TEST_H
#define EV_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EV_CHECK_FAIL_(fmt, ...)                                                     \
    do {                                                                             \
        fprintf(stderr, "%s:%d: check failed: " fmt "\n", __FILE__, __LINE__,        \
                __VA_ARGS__);                                                        \
        exit(1);                                                                     \
    } while (0)

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            EV_CHECK_FAIL_("%s", #cond);                                             \
        }                                                                            \
    } while (0)

#define CHECK_INT_OP_(a, op, b)                                                      \
    do {                                                                             \
        long long a_ = (long long)(a), b_ = (long long)(b);                          \
        if (!(a_ op b_)) {                                                           \
            EV_CHECK_FAIL_("%s %s %s (%lld vs %lld)", #a, #op, #b, a_, b_);          \
        }                                                                            \
    } while (0)

#define CHECK_EQ(a, b) CHECK_INT_OP_(a, ==, b)
#define CHECK_NE(a, b) CHECK_INT_OP_(a, !=, b)
#define CHECK_LT(a, b) CHECK_INT_OP_(a, <, b)
#define CHECK_LE(a, b) CHECK_INT_OP_(a, <=, b)
#define CHECK_GT(a, b) CHECK_INT_OP_(a, >, b)
#define CHECK_GE(a, b) CHECK_INT_OP_(a, >=, b)

#define CHECK_STR_CONTAINS(hay, needle)                                              \
    do {                                                                             \
        const char *h_ = (hay), *n_ = (needle);                                      \
        if (!h_ || !strstr(h_, n_)) {                                                \
            EV_CHECK_FAIL_("\"%s\" does not contain \"%s\"", h_ ? h_ : "(null)", n_); \
        }                                                                            \
    } while (0)

#define CHECK_OK(expr)                                                               \
    do {                                                                             \
        int rc_ = (expr);                                                            \
        if (rc_ != 0) {                                                              \
            EV_CHECK_FAIL_("%s returned %d (%s)", #expr, rc_, ev_last_message());    \
        }                                                                            \
    } while (0)

/* Runs one named test function and reports it. */
#define RUN_TEST(fn)                                                                 \
    do {                                                                             \
        fprintf(stderr, "-- %s\n", #fn);                                             \
        fn();                                                                        \
    } while (0)

/* Scales stress sizes down for sanitizer builds (EV_STRESS_SCALE in (0,1]). */
static inline long ev_test_scaled(long n)
{
    const char *s = getenv("EV_STRESS_SCALE");
    double f = s ? atof(s) : 1.0;
    if (f <= 0 || f > 1) {
        f = 1.0;
    }
    long r = (long)(n * f);
    return r < 1 ? 1 : r;
}

#endif
