/* libFuzzer harness for eagervm's public C API: decodes the input bytes into
 * a program of API calls on one runtime (valid and invalid ones) and checks
 * the contracts of vm.h, tensor.h and ops.h as it goes.
 *
 * Each input runs on a fresh runtime (worker_thread_limit = FZ_LIMIT) that is
 * destroyed at the end, so an input replays the same way on its own. The
 * harness keeps FZ_SLOTS tensor slots and decodes one call per step:
 *
 *   - calls whose validity the harness can predict from public facts
 *     (ev_broadcast_shapes, ev_binary_result_dtype, dimension ranges, the
 *     uid limit) must return 0 when valid and a negative EV_E* code with a
 *     message when not;
 *   - calls with raw arguments must either succeed with a new tensor in *out
 *     or fail with a code and a message, leaving *out untouched;
 *   - a wait must return 0 or a kernel's code (DESIGN rule 6), never hang;
 *   - every submitted instruction's arg_drop and every released object's
 *     free callback runs exactly once by ev_vm_destroy.
 *
 * Released handles are never touched again (that is undefined by contract);
 * double releases are only tried where the API promises an error or a no-op
 * (thread uids, NULL handles). Any broken check aborts, which libFuzzer
 * reports as a crash with the input that caused it. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eagervm/ops.h"
#include "eagervm/tensor.h"
#include "eagervm/vm.h"

/* Test hook from src/core/internal.h (exported for tests only). */
void ev__fail_alloc_after(long n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_SLOTS 12
#define FZ_LIMIT 3       /* thread uids 1..FZ_LIMIT beyond uid 0 */
#define FZ_MAX_STEPS 128
#define FZ_MAX_DIM 4     /* sizes of created dimensions are 0..FZ_MAX_DIM */
/* Element budgets. Under coverage instrumentation an element costs ~100 ns,
 * and cats, stacks and expands can grow a tensor geometrically: a slot keeps
 * no tensor (view or not) of more than FZ_MAX_NUMEL elements, and an op
 * whose result would pass FZ_MAX_RESULT is not called (unless the runtime
 * must refuse it, which is quick). Zero-size tensors of huge nominal shape
 * stay: they probe the size arithmetic. */
#define FZ_MAX_NUMEL (1 << 16)
#define FZ_MAX_RESULT (1 << 20)

/* ------------------------------------------------------------- checking */

static void fz_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

static void fz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_api: contract broken: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (last message: \"%s\")\n", ev_last_message());
    abort();
}

#define FZ_CHECK(cond, ...)                                                          \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fz_fail(__VA_ARGS__);                                                    \
        }                                                                            \
    } while (0)

static int is_ev_code(int rc)
{
    return rc < 0 && rc >= -EV_ERRNO_COUNT;
}

/* A call the harness knows is invalid: a code and a message. */
static void expect_err(int rc, const char *what)
{
    FZ_CHECK(is_ev_code(rc), "%s: expected an error, got %d", what, rc);
    const char *m = ev_last_message();
    FZ_CHECK(m && m[0], "%s: error %d without a message", what, rc);
}

/* A call the harness knows is valid. */
static void expect_ok(int rc, const char *what)
{
    FZ_CHECK(rc == 0, "%s: expected success, got %d (%s)", what, rc, ev_err_name(rc));
}

/* Whether the runtime must refuse a result of this shape: its sizes, zeros
 * counted as ones, multiply past 2^59 (a broadcast or an expand of a huge
 * zero-size tensor can get there from valid inputs). */
static int fz_too_large(int nd, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) {
        if (__builtin_mul_overflow(n, shape[i] > 0 ? shape[i] : 1, &n)) {
            return 1;
        }
    }
    return n > INT64_MAX / 16;
}

/* The refusal fz_too_large predicts: EV_EINVAL naming the reason. */
static void expect_too_large(int rc, const char *what)
{
    FZ_CHECK(rc == EV_EINVAL && strstr(ev_last_message(), "is too large"),
             "%s: expected a too-large refusal, got %d (%s)", what, rc, ev_last_message());
}

/* A call of unknown validity that produces a tensor: success with a tensor,
 * or a clean error that leaves *out alone. Returns the tensor or NULL. */
static ev_tensor *expect_any(int rc, ev_tensor *out, const char *what)
{
    if (rc == 0) {
        FZ_CHECK(out != NULL, "%s: success without a tensor", what);
        return out;
    }
    expect_err(rc, what);
    FZ_CHECK(out == NULL, "%s: failed (%d) but wrote *out", what, rc);
    return NULL;
}

/* ---------------------------------------------------------------- input */

typedef struct reader {
    const uint8_t *p;
    size_t n, i;
} reader;

static uint8_t u8(reader *r)
{
    return r->i < r->n ? r->p[r->i++] : 0;
}

static int8_t s8(reader *r)
{
    return (int8_t)u8(r);
}

static int64_t i64(reader *r)
{
    uint64_t v = 0;
    for (int k = 0; k < 8; k++) {
        v = v << 8 | u8(r);
    }
    return (int64_t)v;
}

/* ---------------------------------------------------------------- state */

/* Counters shared with arg_drop and free callbacks (which may run on workers). */
static _Atomic long drops_expected, drops_seen, frees_expected, frees_seen;

typedef struct fz {
    ev_vm *vm;
    ev_exec ex;
    ev_tensor *slot[FZ_SLOTS]; /* owned references, or NULL */
    int taken[FZ_LIMIT + 1];   /* uids acquired by this input */
    ev_generator *gen;         /* owned */
    int injected;              /* an allocation failure was injected: waits may see ENOMEM */
} fz;

static const ev_site fz_site = {"tests/fuzz/fuzz_api.c", "fuzz", 1};

static ev_tensor *pick(fz *f, reader *r)
{
    return f->slot[u8(r) % FZ_SLOTS];
}

static void put(fz *f, reader *r, ev_tensor *t)
{
    int i = u8(r) % FZ_SLOTS;
    if (t && ev_tensor_numel(t) > FZ_MAX_NUMEL) {
        ev_tensor_unref(t); /* over budget: see FZ_MAX_NUMEL */
        return;
    }
    ev_tensor_unref(f->slot[i]);
    f->slot[i] = t;
}

static int64_t shape_numel(int nd, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) {
        n *= shape[i];
    }
    return n;
}

/* Codes a wait may return: success, or what a kernel (or poison) reports. */
static void check_wait_rc(fz *f, int rc, const char *what)
{
    int ok = rc == 0 || rc == EV_EINDEX || rc == EV_EVALUE || rc == EV_EPOISON ||
             rc == EV_EKERNEL || (f->injected && rc == EV_ENOMEM);
    FZ_CHECK(ok, "%s: wait returned %d (%s)", what, rc, ev_err_name(rc));
    if (rc) {
        const char *m = ev_last_message();
        FZ_CHECK(m && m[0], "%s: failed wait without a message", what);
    }
}

static void check_error_obj(ev_error *err, int rc, const char *what)
{
    if (rc == 0) {
        FZ_CHECK(err == NULL, "%s: success with an error object", what);
        return;
    }
    FZ_CHECK(err != NULL, "%s: failure %d without an error object", what, rc);
    ev_error_info info;
    ev_error_get(err, &info);
    FZ_CHECK(is_ev_code(info.code) && info.message && info.name, "%s: bad error info", what);
    char buf[64];
    int len = ev_error_format(err, buf, sizeof buf);
    FZ_CHECK(len > 0 && strlen(buf) < sizeof buf, "%s: bad formatted error", what);
    ev_error_unref(err);
}

/* ------------------------------------------------------------- creation */

/* A valid random shape: ndim 0..3, sizes 0..FZ_MAX_DIM. */
static int random_shape(reader *r, int64_t *shape)
{
    int nd = u8(r) % 4;
    for (int i = 0; i < nd; i++) {
        shape[i] = u8(r) % (FZ_MAX_DIM + 1);
    }
    return nd;
}

static ev_scalar random_scalar(reader *r)
{
    switch (u8(r) % 3) {
    case 0:
        return ev_scalar_int(s8(r));
    case 1:
        return ev_scalar_float(s8(r) / 4.0);
    default:
        return ev_scalar_bool(u8(r) & 1);
    }
}

static ev_tensor *create_valid(fz *f, reader *r)
{
    ev_dtype dt = (ev_dtype)(u8(r) % EV_DTYPE_COUNT);
    int64_t shape[EV_MAX_DIMS];
    int nd = random_shape(r, shape);
    ev_tensor *t = NULL;
    int rc;
    switch (u8(r) % 10) {
    case 0:
        rc = ev_zeros(&f->ex, dt, nd, shape, &t);
        break;
    case 1:
        rc = ev_ones(&f->ex, dt, nd, shape, &t);
        break;
    case 2:
        rc = ev_full(&f->ex, dt, nd, shape, random_scalar(r), &t);
        break;
    case 3: {
        int64_t start = s8(r) % 8, len = u8(r) % 6, step = 1 + u8(r) % 3;
        rc = ev_arange(&f->ex, ev_scalar_int(start), ev_scalar_int(start + len * step),
                       ev_scalar_int(step), dt, &t);
        break;
    }
    case 4: {
        /* Raw bytes: NaN, infinities and extreme integers included; bool
         * bytes are kept to 0 or 1 as the storage contract requires. */
        size_t bytes = (size_t)shape_numel(nd, shape) * ev_dtype_size(dt);
        unsigned char *buf = malloc(bytes ? bytes : 1);
        for (size_t i = 0; i < bytes; i++) {
            buf[i] = dt == EV_BOOL ? (u8(r) & 1) : u8(r);
        }
        rc = ev_from_host(&f->ex, dt, nd, shape, buf, &t);
        free(buf);
        break;
    }
    case 5:
        rc = ev_empty(&f->ex, dt, nd, shape, &t);
        if (rc == 0) {
            expect_ok(ev_fill_(&f->ex, t, random_scalar(r)), "fill_");
        }
        break;
    case 6:
        if (!ev_dtype_is_float(dt)) {
            expect_err(ev_rand(&f->ex, f->gen, dt, nd, shape, &t), "rand of a non-float");
            return NULL;
        }
        rc = (u8(r) & 1) ? ev_rand(&f->ex, f->gen, dt, nd, shape, &t)
                         : ev_randn(&f->ex, f->gen, dt, nd, shape, &t);
        break;
    case 7: {
        /* Valid for an integer dtype whose range holds [lo, hi) (uint8 takes
         * no negative low, int8 no high past 128). */
        int64_t lo = s8(r), hi = lo + 1 + u8(r) % 16, mn, mx;
        if (ev_dtype_get_info(dt)->kind != EV_KIND_INT ||
            (ev_dtype_int_range(dt, &mn, &mx) == 0 && (lo < mn || hi - 1 > mx))) {
            expect_err(ev_randint(&f->ex, f->gen, lo, hi, dt, nd, shape, &t), "randint dtype");
            return NULL;
        }
        rc = ev_randint(&f->ex, f->gen, lo, hi, dt, nd, shape, &t);
        break;
    }
    case 8:
        rc = ev_eye(&f->ex, u8(r) % 5, (int64_t)(u8(r) % 6) - 1, dt, &t);
        break;
    default:
        rc = ev_linspace(&f->ex, s8(r), s8(r), u8(r) % 6, dt, &t);
        break;
    }
    expect_ok(rc, "create");
    FZ_CHECK(t != NULL, "create: no tensor");
    return t;
}

/* One invalid creation: each case breaks exactly one rule. */
static void create_invalid(fz *f, reader *r)
{
    int64_t shape[EV_MAX_DIMS + 2] = {1, 2, 1, 2, 1, 1, 1, 1, 1, 1};
    ev_tensor *t = NULL;
    ev_exec bad = f->ex;
    int rc;
    switch (u8(r) % 9) {
    case 0:
        rc = ev_zeros(&f->ex, EV_FLOAT32, EV_MAX_DIMS + 1 + u8(r) % 3, shape, &t);
        break;
    case 1:
        rc = ev_zeros(&f->ex, EV_FLOAT32, -1 - u8(r) % 3, shape, &t);
        break;
    case 2:
        shape[u8(r) % 4] = -1 - u8(r);
        rc = ev_ones(&f->ex, EV_INT32, 4, shape, &t);
        break;
    case 3:
        rc = ev_ones(&f->ex, (ev_dtype)(EV_DTYPE_COUNT + u8(r) % 4), 2, shape, &t);
        break;
    case 4:
        rc = ev_ones(NULL, EV_INT64, 2, shape, &t);
        break;
    case 5:
        bad.vm = NULL;
        rc = ev_full(&bad, EV_INT64, 2, shape, ev_scalar_int(1), &t);
        break;
    case 6:
        /* A thread uid past the limit fails at submission; nothing leaks. */
        bad.thread_uid = FZ_LIMIT + 1 + u8(r);
        rc = ev_zeros(&bad, EV_FLOAT64, 2, shape, &t);
        break;
    case 7:
        rc = ev_zeros(&f->ex, EV_FLOAT32, 2, shape, NULL);
        break;
    default: {
        /* Element counts that overflow int64. */
        int64_t big[3] = {INT64_MAX / 2, 3, 1 + u8(r)};
        rc = ev_empty(&f->ex, EV_BOOL, 3, big, &t);
        break;
    }
    }
    expect_err(rc, "invalid creation");
    FZ_CHECK(t == NULL, "invalid creation wrote *out");
}

/* Every producing function with out == NULL: EV_EINVAL, nothing queued that
 * could leak, and no crash (vm.h: nothing aborts on bad input). */
static void null_out(fz *f, reader *r)
{
    const ev_exec *ex = &f->ex;
    int64_t sh[2] = {2, 2};
    ev_tensor *t = NULL, *i = NULL;
    expect_ok(ev_ones(ex, EV_FLOAT32, 2, sh, &t), "ones");
    expect_ok(ev_zeros(ex, EV_INT64, 2, sh, &i), "zeros");
    ev_tensor *list[2] = {t, t};
    int dim = 0, rc;
    double host[4] = {0};
    uint8_t which = u8(r) % 47;
    switch (which) {
    case 0: rc = ev_empty(ex, EV_FLOAT32, 2, sh, NULL); break;
    case 1: rc = ev_zeros(ex, EV_FLOAT32, 2, sh, NULL); break;
    case 2: rc = ev_ones(ex, EV_FLOAT32, 2, sh, NULL); break;
    case 3: rc = ev_full(ex, EV_FLOAT32, 2, sh, ev_scalar_int(3), NULL); break;
    case 4:
        rc = ev_arange(ex, ev_scalar_int(0), ev_scalar_int(3), ev_scalar_int(1), EV_INT32, NULL);
        break;
    case 5: rc = ev_linspace(ex, 0, 1, 3, EV_FLOAT64, NULL); break;
    case 6: rc = ev_eye(ex, 2, -1, EV_FLOAT32, NULL); break;
    case 7: rc = ev_from_host(ex, EV_FLOAT64, 2, sh, host, NULL); break;
    case 8: rc = ev_rand(ex, f->gen, EV_FLOAT32, 2, sh, NULL); break;
    case 9: rc = ev_randint(ex, f->gen, 0, 5, EV_INT64, 2, sh, NULL); break;
    case 10: rc = ev_view(t, 2, sh, NULL); break;
    case 11: rc = ev_reshape(ex, t, 2, sh, NULL); break;
    case 12: rc = ev_transpose(t, 0, 1, NULL); break;
    case 13: rc = ev_permute(t, (const int[]){1, 0}, NULL); break;
    case 14: rc = ev_expand(t, 2, sh, NULL); break;
    case 15: rc = ev_slice(t, 0, 0, 1, 1, NULL); break;
    case 16: rc = ev_squeeze(t, 0, NULL); break;
    case 17: rc = ev_squeeze_all(t, NULL); break;
    case 18: rc = ev_unsqueeze(t, 0, NULL); break;
    case 19: rc = ev_contiguous(ex, t, NULL); break;
    case 20: rc = ev_cast(ex, t, EV_INT32, NULL); break;
    case 21: rc = ev_add(ex, t, t, NULL); break;
    case 22: rc = ev_exp(ex, t, NULL); break;
    case 23: rc = ev_clamp(ex, t, &(ev_scalar){EV_FLOAT64, {.f = 0}}, NULL, NULL); break;
    case 24: rc = ev_sum(ex, t, 0, NULL, 0, NULL); break;
    case 25: rc = ev_argmax(ex, t, &dim, 0, NULL); break;
    case 26: rc = ev_var(ex, t, 0, NULL, 1, 0, NULL); break;
    case 27: rc = ev_softmax(ex, t, 0, NULL); break;
    case 28: rc = ev_matmul(ex, t, t, NULL); break;
    case 29: rc = ev_where(ex, t, t, t, NULL); break; /* cond not bool: an error anyway */
    case 30: rc = ev_cat(ex, list, 2, 0, NULL); break;
    case 31: rc = ev_stack(ex, list, 2, 0, NULL); break;
    case 32: rc = ev_index_select(ex, t, 0, i, NULL); break;
    case 33: rc = ev_gather(ex, t, 0, i, NULL); break;
    case 34: rc = ev_take(ex, t, i, NULL); break;
    case 35: rc = ev_any(ex, t, 0, NULL, 0, NULL); break;
    case 36: rc = ev_logsumexp(ex, t, 0, NULL, 0, NULL); break;
    case 37: rc = ev_cumsum(ex, t, 0, EV_DTYPE_NONE, NULL); break;
    case 38: rc = ev_sort(ex, t, 0, 0, 0, NULL, &i); break;
    case 39: rc = ev_argsort(ex, t, 0, 0, 0, NULL); break;
    case 40: rc = ev_topk(ex, t, 1, 0, 1, 1, &i, NULL); break;
    case 41: rc = ev_flip(ex, t, 1, &dim, NULL); break;
    case 42: rc = ev_roll(ex, t, 1, (const int64_t[]){1}, 0, NULL, NULL); break;
    case 43: rc = ev_tril(ex, t, 0, NULL); break;
    case 44: rc = ev_nonzero(ex, t, NULL); break;
    case 45: rc = ev_unique(ex, t, 1, 1, 0, &i, NULL, NULL); break;
    default: rc = ev_scatter_add(ex, t, 0, i, t, NULL); break;
    }
    expect_err(rc, "a call with out == NULL");
    ev_tensor_unref(t);
    ev_tensor_unref(i);
}

/* ---------------------------------------------------------------- views */

static int in_dim_range(int d, int nd)
{
    return nd > 0 && d >= -nd && d < nd;
}

/* A slice bound (step = 0) or step (step = 1): mostly small values of
 * either sign (a step of 0 among them), sometimes the extremes that stand
 * for omitted bounds, or raw int64s. */
static int64_t slice_arg(reader *r, int step)
{
    uint8_t c = u8(r);
    if (c >= 0xF0) {
        static const int64_t ext[4] = {INT64_MIN, INT64_MAX, -INT64_MAX, 0};
        return (c & 3) == 3 ? i64(r) : ext[c & 3];
    }
    return step ? (int64_t)(c % 7) - 3 : (int64_t)(int8_t)c % 6;
}

/* Checks v = ev_slice(t, d, start, stop, step) against Python's rules
 * (PySlice_AdjustIndices): its shape, strides and offset, that every
 * element lies inside t, and (read: a sync point) for small tensors its
 * values against t's. */
static void check_slice(fz *f, ev_tensor *t, int d, int64_t start, int64_t stop, int64_t step,
                        ev_tensor *v, int read)
{
    int nd = ev_tensor_ndim(t);
    int64_t size = ev_tensor_shape(t)[d];
    step = step < -INT64_MAX ? -INT64_MAX : step;
    int64_t b[2] = {start, stop};
    for (int k = 0; k < 2; k++) {
        if (b[k] < 0) {
            b[k] = b[k] < -size ? (step < 0 ? -1 : 0) : b[k] + size;
        } else if (b[k] >= size) {
            b[k] = step < 0 ? size - 1 : size;
        }
    }
    int64_t len = 0;
    if (step > 0 && b[1] > b[0]) {
        len = (b[1] - b[0] - 1) / step + 1;
    } else if (step < 0 && b[1] < b[0]) {
        len = (b[0] - b[1] - 1) / -step + 1;
    }
    FZ_CHECK(ev_tensor_ndim(v) == nd, "slice: ndim %d, want %d", ev_tensor_ndim(v), nd);
    const int64_t *ts = ev_tensor_strides(t), *vs = ev_tensor_strides(v);
    for (int i = 0; i < nd; i++) {
        int64_t want = i == d ? len : ev_tensor_shape(t)[i];
        FZ_CHECK(ev_tensor_shape(v)[i] == want, "slice: size %lld in dimension %d, want %lld",
                 (long long)ev_tensor_shape(v)[i], i, (long long)want);
        FZ_CHECK(i == d || vs[i] == ts[i], "slice: stride of dimension %d changed", i);
    }
    if (ev_tensor_numel(v) == 0) {
        return;
    }
    /* The first and last elements along d are elements of t. */
    int64_t last;
    FZ_CHECK(!__builtin_mul_overflow(len - 1, step, &last) && b[0] >= 0 && b[0] < size &&
                 b[0] + last >= 0 && b[0] + last < size,
             "slice: elements %lld..%lld+(%lld-1)*%lld outside size %lld", (long long)b[0],
             (long long)b[0], (long long)len, (long long)step, (long long)size);
    FZ_CHECK(ev_tensor_offset(v) == ev_tensor_offset(t) + b[0] * ts[d],
             "slice: offset %lld, want %lld", (long long)ev_tensor_offset(v),
             (long long)(ev_tensor_offset(t) + b[0] * ts[d]));
    FZ_CHECK(len == 1 || vs[d] == ts[d] * step, "slice: stride %lld, want %lld * %lld",
             (long long)vs[d], (long long)ts[d], (long long)step);
    if (!read || ev_tensor_numel(t) > 4096) {
        return;
    }
    /* Values: element e of v is t's element with index d moved to
     * b[0] + i * step. A poisoned t fails both reads alike. */
    size_t es = ev_dtype_size(ev_tensor_dtype(t));
    int64_t nt = ev_tensor_numel(t), nv = ev_tensor_numel(v);
    char *bt = malloc((size_t)nt * es), *bv = malloc((size_t)nv * es);
    int rt = ev_to_host(&f->ex, t, bt), rv = ev_to_host(&f->ex, v, bv);
    check_wait_rc(f, rt, "to_host of a sliced tensor");
    check_wait_rc(f, rv, "to_host of a slice");
    if (rt == 0 && rv == 0) {
        int64_t idx[EV_MAX_DIMS] = {0};
        for (int64_t e = 0; e < nv; e++) {
            int64_t flat = 0;
            for (int i = 0; i < nd; i++) {
                int64_t j = i == d ? b[0] + idx[i] * step : idx[i];
                flat = flat * ev_tensor_shape(t)[i] + j;
            }
            FZ_CHECK(memcmp(bv + e * (int64_t)es, bt + flat * (int64_t)es, es) == 0,
                     "slice: element %lld differs from the sliced tensor's %lld",
                     (long long)e, (long long)flat);
            for (int i = nd - 1; i >= 0; i--) {
                if (++idx[i] < ev_tensor_shape(v)[i]) {
                    break;
                }
                idx[i] = 0;
            }
        }
    }
    free(bt);
    free(bv);
}

static void do_view(fz *f, reader *r)
{
    ev_tensor *t = pick(f, r);
    if (!t) {
        return;
    }
    int nd = ev_tensor_ndim(t);
    const int64_t *sh = ev_tensor_shape(t);
    ev_tensor *out = NULL;
    int rc;
    switch (u8(r) % 9) {
    case 0: {
        int d = s8(r) % (nd + 2);
        int64_t start = slice_arg(r, 0), stop = slice_arg(r, 0), step = slice_arg(r, 1);
        rc = ev_slice(t, d, start, stop, step, &out);
        if (in_dim_range(d, nd) && step != 0) {
            expect_ok(rc, "slice");
            check_slice(f, t, d < 0 ? d + nd : d, start, stop, step, out, u8(r) & 1);
        } else {
            expect_err(rc, "slice");
        }
        break;
    }
    case 1: {
        int d0 = s8(r) % (nd + 2), d1 = s8(r) % (nd + 2);
        rc = ev_transpose(t, d0, d1, &out);
        if (in_dim_range(d0, nd) && in_dim_range(d1, nd)) {
            expect_ok(rc, "transpose");
        } else {
            expect_err(rc, "transpose");
        }
        break;
    }
    case 2: {
        int dims[EV_MAX_DIMS];
        for (int i = 0; i < nd; i++) {
            dims[i] = i;
        }
        for (int i = nd - 1; i > 0; i--) {
            int j = u8(r) % (i + 1), x = dims[i];
            dims[i] = dims[j];
            dims[j] = x;
        }
        int broken = nd > 1 && (u8(r) & 3) == 0;
        if (broken) {
            dims[0] = dims[1];
        }
        rc = ev_permute(t, dims, &out);
        if (broken) {
            expect_err(rc, "permute with a repeated dimension");
        } else {
            expect_ok(rc, "permute");
        }
        break;
    }
    case 3: {
        int lead = u8(r) % 3, nn = nd + lead;
        if (nn > EV_MAX_DIMS) {
            return;
        }
        int64_t want[EV_MAX_DIMS];
        int valid = 1;
        for (int i = 0; i < nn; i++) {
            int j = i - lead;
            uint8_t c = u8(r);
            if (j < 0) {
                want[i] = c % 3;
            } else if (sh[j] == 1) {
                want[i] = (c & 1) ? -1 : c % 4;
            } else {
                want[i] = (c & 1) ? -1 : sh[j];
                if ((c & 6) == 6) {
                    want[i] = sh[j] + 1; /* not a size-1 dimension: cannot grow */
                    valid = 0;
                }
            }
        }
        rc = ev_expand(t, nn, want, &out);
        int64_t got[EV_MAX_DIMS];
        for (int i = 0; i < nn; i++) {
            got[i] = want[i] == -1 ? sh[i - lead] : want[i];
        }
        if (valid && fz_too_large(nn, got)) {
            expect_too_large(rc, "expand");
        } else if (valid) {
            expect_ok(rc, "expand");
        } else {
            expect_err(rc, "expand");
        }
        break;
    }
    case 4:
    case 5: {
        /* Flatten, flatten with -1, add a dimension of 1, or break the count. */
        int64_t n = ev_tensor_numel(t), want[3];
        int nn, valid = 1;
        switch (u8(r) % 5) {
        case 0:
            want[0] = n;
            nn = 1;
            break;
        case 1:
            want[0] = -1;
            nn = 1;
            break;
        case 2:
            want[0] = 1;
            want[1] = n;
            want[2] = 1;
            nn = 3;
            break;
        case 3:
            want[0] = n + 1 + u8(r) % 3;
            nn = 1;
            valid = 0;
            break;
        default:
            /* Raw sizes: probes the arithmetic on untrusted shapes. */
            want[0] = i64(r);
            want[1] = i64(r);
            nn = 2;
            valid = -1;
            break;
        }
        int is_view = (u8(r) & 1);
        rc = is_view ? ev_view(t, nn, want, &out) : ev_reshape(&f->ex, t, nn, want, &out);
        if (valid == 1 && (!is_view || ev_tensor_is_contiguous(t))) {
            expect_ok(rc, "view/reshape");
        } else if (valid == 0) {
            expect_err(rc, "view/reshape of a different count");
        } else {
            out = expect_any(rc, out, "view/reshape");
        }
        break;
    }
    case 6: {
        int d = s8(r) % (nd + 2);
        rc = ev_squeeze(t, d, &out);
        if (in_dim_range(d, nd)) {
            expect_ok(rc, "squeeze");
        } else {
            expect_err(rc, "squeeze");
        }
        break;
    }
    case 7: {
        int d = s8(r) % (nd + 3);
        rc = ev_unsqueeze(t, d, &out);
        if (nd < EV_MAX_DIMS && d >= -nd - 1 && d <= nd) {
            expect_ok(rc, "unsqueeze");
        } else {
            expect_err(rc, "unsqueeze");
        }
        break;
    }
    default:
        rc = (u8(r) & 1) ? ev_contiguous(&f->ex, t, &out) : ev_squeeze_all(t, &out);
        expect_ok(rc, "contiguous/squeeze_all");
        break;
    }
    if (out) {
        put(f, r, out);
    }
}

/* ------------------------------------------------------------------ ops */

static void do_binary(fz *f, reader *r)
{
    ev_tensor *a = pick(f, r), *b = pick(f, r);
    int op = u8(r) % (EV_BINARY_OP_COUNT + 1); /* one past the end is invalid */
    int inplace = (u8(r) & 3) == 0;
    if (!a || !b) {
        ev_tensor *out = NULL;
        expect_err(ev_binary(&f->ex, op, a, b, &out), "binary with NULL");
        return;
    }
    if (inplace) {
        /* Validity depends on casting and aliasing rules: accept either. */
        int rc = ev_binary_(&f->ex, op, a, b);
        if (rc) {
            expect_err(rc, "binary_");
        }
        return;
    }
    int bnd;
    int64_t bshape[EV_MAX_DIMS];
    ev_dtype rdt;
    int valid = op < EV_BINARY_OP_COUNT &&
                ev_broadcast_shapes(ev_tensor_ndim(a), ev_tensor_shape(a), ev_tensor_ndim(b),
                                    ev_tensor_shape(b), &bnd, bshape) == 0 &&
                ev_binary_result_dtype(op, ev_tensor_dtype(a), ev_tensor_dtype(b), &rdt) == 0;
    if (valid && !fz_too_large(bnd, bshape) && shape_numel(bnd, bshape) > FZ_MAX_RESULT) {
        return; /* over budget: see FZ_MAX_RESULT */
    }
    ev_tensor *out = NULL;
    int rc = ev_binary(&f->ex, op, a, b, &out);
    if (!valid) {
        expect_err(rc, "binary (invalid)");
        FZ_CHECK(out == NULL, "binary failed but wrote *out");
        return;
    }
    if (fz_too_large(bnd, bshape)) {
        expect_too_large(rc, ev_binary_op_name(op));
        FZ_CHECK(out == NULL, "binary refused but wrote *out");
        return;
    }
    expect_ok(rc, ev_binary_op_name(op));
    FZ_CHECK(ev_tensor_dtype(out) == rdt && ev_tensor_ndim(out) == bnd,
             "%s: result dtype/ndim differ from the prediction", ev_binary_op_name(op));
    for (int i = 0; i < bnd; i++) {
        FZ_CHECK(ev_tensor_shape(out)[i] == bshape[i], "binary: result shape differs");
    }
    put(f, r, out);
}

static void do_unary(fz *f, reader *r)
{
    ev_tensor *x = pick(f, r);
    int op = u8(r) % (EV_UNARY_OP_COUNT + 1);
    uint8_t mode = u8(r);
    if (!x) {
        return;
    }
    ev_tensor *out = NULL;
    if (mode % 4 == 0) {
        int rc = ev_unary_(&f->ex, op, x);
        if (rc) {
            expect_err(rc, "unary_");
        }
        return;
    }
    if (mode % 4 == 1) {
        ev_scalar lo = random_scalar(r), hi = random_scalar(r);
        uint8_t which = u8(r) % 4;
        int rc = ev_clamp(&f->ex, x, (which & 1) ? &lo : NULL, (which & 2) ? &hi : NULL, &out);
        if (which == 0) {
            expect_err(rc, "clamp without bounds");
        }
        out = expect_any(rc, out, "clamp");
    } else if (mode % 4 == 2) {
        ev_dtype dt = (ev_dtype)(u8(r) % (EV_DTYPE_COUNT + 1));
        int rc = ev_cast(&f->ex, x, dt, &out);
        if (dt < EV_DTYPE_COUNT) {
            expect_ok(rc, "cast");
        } else {
            expect_err(rc, "cast to an invalid dtype");
        }
    } else {
        ev_dtype rdt;
        int valid = op < EV_UNARY_OP_COUNT &&
                    ev_unary_result_dtype(op, ev_tensor_dtype(x), &rdt) == 0;
        int rc = ev_unary(&f->ex, op, x, &out);
        if (valid) {
            expect_ok(rc, ev_unary_op_name(op));
            FZ_CHECK(ev_tensor_dtype(out) == rdt, "unary: dtype differs from prediction");
        } else {
            expect_err(rc, "unary (invalid)");
        }
    }
    if (out) {
        put(f, r, out);
    }
}

static void do_reduce(fz *f, reader *r)
{
    ev_tensor *x = pick(f, r);
    if (!x) {
        return;
    }
    int nd = ev_tensor_ndim(x);
    int kind = u8(r) % 6, keepdim = u8(r) & 1;
    int dims[EV_MAX_DIMS + 1];
    int ndims = u8(r) % (nd + 2);
    for (int i = 0; i < ndims; i++) {
        dims[i] = s8(r) % (nd + 2);
    }
    int all = (u8(r) & 3) == 0;
    ev_tensor *out = NULL;
    int rc;
    switch (kind) {
    case 0:
    case 1: {
        int op = u8(r) % (EV_REDUCE_OP_COUNT + 1);
        rc = ev_reduce(&f->ex, op, x, all ? 0 : ndims, all ? NULL : dims, keepdim, &out);
        if (all && op == EV_REDUCE_SUM) {
            expect_ok(rc, "sum over everything");
        }
        break;
    }
    case 2: {
        int d = dims[0];
        rc = (u8(r) & 1) ? ev_argmax(&f->ex, x, all || ndims == 0 ? NULL : &d, keepdim, &out)
                         : ev_argmin(&f->ex, x, all || ndims == 0 ? NULL : &d, keepdim, &out);
        break;
    }
    case 3: {
        double corr = u8(r) % 3;
        rc = (u8(r) & 1) ? ev_var(&f->ex, x, all ? 0 : ndims, all ? NULL : dims, corr, keepdim,
                                  &out)
                         : ev_std(&f->ex, x, all ? 0 : ndims, all ? NULL : dims, corr, keepdim,
                                  &out);
        if (!ev_dtype_is_float(ev_tensor_dtype(x))) {
            expect_err(rc, "var/std of a non-float");
        }
        break;
    }
    default: {
        int d = s8(r) % (nd + 2);
        rc = (u8(r) & 1) ? ev_softmax(&f->ex, x, d, &out) : ev_log_softmax(&f->ex, x, d, &out);
        break;
    }
    }
    out = expect_any(rc, out, "reduction");
    if (out) {
        put(f, r, out);
    }
}

/* ------------------------------------------- more reductions and scans */

/* The dimension d of an op on an nd-d tensor, normalised, or -2 if out of
 * range (a 0-d tensor takes 0 and -1, giving -1). */
static int fz_norm_dim0(int d, int nd)
{
    if (nd == 0) {
        return d == 0 || d == -1 ? -1 : -2;
    }
    return d >= -nd && d < nd ? (d < 0 ? d + nd : d) : -2;
}

/* ev_reduce's rules (ops.h): the result shape of reducing dims (NULL with
 * ndims 0: all), or 0 if the call is invalid. */
static int fz_reduce_shape(int nd, const int64_t *sh, int ndims, const int *dims, int keepdim,
                           int *ond, int64_t *oshape)
{
    unsigned mask = 0;
    if (!dims) {
        mask = (1u << nd) - 1;
    } else {
        if (ndims < 0 || ndims > (nd ? nd : 1)) {
            return 0;
        }
        for (int i = 0; i < ndims; i++) {
            int d = fz_norm_dim0(dims[i], nd);
            if (d == -2 || (d >= 0 && (mask & (1u << d)))) {
                return 0;
            }
            mask |= d >= 0 ? 1u << d : 0;
        }
    }
    *ond = 0;
    for (int d = 0; d < nd; d++) {
        if (!(mask & (1u << d))) {
            oshape[(*ond)++] = sh[d];
        } else if (keepdim) {
            oshape[(*ond)++] = 1;
        }
    }
    return 1;
}

static void check_shape(ev_tensor *t, ev_dtype dt, int nd, const int64_t *shape, const char *what)
{
    FZ_CHECK(ev_tensor_dtype(t) == dt, "%s: dtype %s, predicted %s", what,
             ev_dtype_name(ev_tensor_dtype(t)), ev_dtype_name(dt));
    FZ_CHECK(ev_tensor_ndim(t) == nd, "%s: %d dims, predicted %d", what, ev_tensor_ndim(t), nd);
    for (int i = 0; i < nd; i++) {
        FZ_CHECK(ev_tensor_shape(t)[i] == shape[i], "%s: size %lld of dim %d, predicted %lld",
                 what, (long long)ev_tensor_shape(t)[i], i, (long long)shape[i]);
    }
}

/* NumPy's kind order b < u < i < f, which the in-place forms cast within
 * (ops.h's first comment). */
static int fz_kind_rank(ev_dtype d)
{
    const ev_dtype_info *i = ev_dtype_get_info(d);
    return i->kind == EV_KIND_BOOL ? 0 : i->kind == EV_KIND_INT ? 2 - i->is_unsigned : 3;
}

/* 1 if t has elements that share memory (expanded): what in-place ops
 * refuse. */
static int fz_expanded(ev_tensor *t)
{
    for (int i = 0; i < ev_tensor_ndim(t); i++) {
        if (ev_tensor_shape(t)[i] > 1 && ev_tensor_strides(t)[i] == 0) {
            return 1;
        }
    }
    return 0;
}

static void do_reduce_more(fz *f, reader *r)
{
    ev_tensor *x = pick(f, r);
    if (!x) {
        return;
    }
    int nd = ev_tensor_ndim(x);
    const int64_t *sh = ev_tensor_shape(x);
    ev_dtype xd = ev_tensor_dtype(x);
    uint8_t kind = u8(r) % 5;
    ev_tensor *out = NULL;
    int rc;
    if (kind <= 2) {
        /* any / all / logsumexp over random dims */
        int keepdim = u8(r) & 1, all = (u8(r) & 3) == 0;
        int dims[EV_MAX_DIMS + 1], ndims = u8(r) % (nd + 2);
        for (int i = 0; i < ndims; i++) {
            dims[i] = s8(r) % (nd + 2);
        }
        int ond;
        int64_t oshape[EV_MAX_DIMS];
        int valid = fz_reduce_shape(nd, sh, all ? 0 : ndims, all ? NULL : dims, keepdim, &ond,
                                    oshape);
        /* Reducing an empty dim of a zero-size tensor with huge other dims
         * asks for a huge result: over budget, or refused (see
         * FZ_MAX_RESULT, fz_too_large). */
        int too_large = valid && fz_too_large(ond, oshape);
        if (valid && !too_large && shape_numel(ond, oshape) > FZ_MAX_RESULT) {
            return;
        }
        rc = kind == 0   ? ev_any(&f->ex, x, all ? 0 : ndims, all ? NULL : dims, keepdim, &out)
             : kind == 1 ? ev_all(&f->ex, x, all ? 0 : ndims, all ? NULL : dims, keepdim, &out)
                         : ev_logsumexp(&f->ex, x, all ? 0 : ndims, all ? NULL : dims, keepdim,
                                        &out);
        if (!valid || too_large) {
            if (too_large) {
                expect_too_large(rc, "any/all/logsumexp");
            } else {
                expect_err(rc, "any/all/logsumexp (invalid)");
            }
            FZ_CHECK(out == NULL, "any/all/logsumexp failed but wrote *out");
            return;
        }
        expect_ok(rc, "any/all/logsumexp");
        check_shape(out, kind == 2 ? ev_dtype_to_float(xd) : EV_BOOL, ond, oshape,
                    "any/all/logsumexp");
    } else {
        /* cumsum / cumprod, out of place or in place, default or given dtype */
        int prod = kind == 4, inplace = (u8(r) & 3) == 0;
        int dim = s8(r) % (nd + 2);
        uint8_t c = u8(r) % (EV_DTYPE_COUNT + 2);
        ev_dtype dt = c < EV_DTYPE_COUNT ? (ev_dtype)c
                      : c == EV_DTYPE_COUNT ? EV_DTYPE_NONE : (ev_dtype)(EV_DTYPE_COUNT + 7);
        int valid = fz_norm_dim0(dim, nd) != -2 && (int)c <= EV_DTYPE_COUNT;
        ev_dtype res = dt == EV_DTYPE_NONE ? (ev_dtype_is_float(xd) ? xd : EV_INT64) : dt;
        if (inplace) {
            valid = valid && !fz_expanded(x) && fz_kind_rank(res) <= fz_kind_rank(xd);
            rc = prod ? ev_cumprod_(&f->ex, x, dim, dt) : ev_cumsum_(&f->ex, x, dim, dt);
            if (valid) {
                expect_ok(rc, "cumsum_/cumprod_");
            } else {
                expect_err(rc, "cumsum_/cumprod_ (invalid)");
            }
            return;
        }
        rc = prod ? ev_cumprod(&f->ex, x, dim, dt, &out) : ev_cumsum(&f->ex, x, dim, dt, &out);
        if (!valid) {
            expect_err(rc, "cumsum/cumprod (invalid)");
            FZ_CHECK(out == NULL, "cumsum/cumprod failed but wrote *out");
            return;
        }
        expect_ok(rc, "cumsum/cumprod");
        check_shape(out, res, nd, sh, "cumsum/cumprod");
    }
    put(f, r, out);
}

/* --------------------------------------- sorts, rearranging, sync points */

static void do_sort_more(fz *f, reader *r)
{
    ev_tensor *x = pick(f, r);
    if (!x) {
        return;
    }
    int nd = ev_tensor_ndim(x);
    const int64_t *sh = ev_tensor_shape(x);
    ev_dtype xd = ev_tensor_dtype(x);
    uint8_t kind = u8(r) % 8;
    ev_tensor *out = NULL, *out2 = NULL;
    int rc;
    switch (kind) {
    case 0:
    case 1: {
        /* sort, argsort, topk */
        int dim = s8(r) % (nd + 2), desc = u8(r) & 1, which = u8(r) % 3;
        int d = fz_norm_dim0(dim, nd);
        int64_t len = d >= 0 ? sh[d] : 1;
        int64_t k = (int64_t)(u8(r) % 6) - 1; /* -1 .. 4: some out of range */
        int64_t oshape[EV_MAX_DIMS];
        memcpy(oshape, sh, sizeof(int64_t) * (size_t)nd);
        int ond = nd, valid = d != -2;
        if (which == 2) {
            valid = valid && k >= 0 && k <= len;
            if (d >= 0) {
                oshape[d] = k;
            } else if (k == 0) {
                ond = 1; /* a 0-d x with k = 0: shape [0] */
                oshape[0] = 0;
            }
            rc = ev_topk(&f->ex, x, k, dim, desc, u8(r) & 1, &out, &out2);
        } else if (which == 1) {
            rc = ev_argsort(&f->ex, x, dim, desc, u8(r) & 1, &out2);
        } else {
            rc = ev_sort(&f->ex, x, dim, desc, u8(r) & 1, &out, &out2);
        }
        if (!valid) {
            expect_err(rc, "sort/argsort/topk (invalid)");
            FZ_CHECK(!out && !out2, "sort/argsort/topk failed but wrote an output");
            return;
        }
        expect_ok(rc, "sort/argsort/topk");
        if (out) {
            check_shape(out, xd, ond, oshape, "sort/topk values");
        }
        check_shape(out2, EV_INT64, ond, oshape, "sort/topk indices");
        break;
    }
    case 2: {
        /* flip over random (maybe repeated) dims */
        int dims[EV_MAX_DIMS + 1], ndims = u8(r) % (nd + 2), valid = 1;
        unsigned seen = 0;
        for (int i = 0; i < ndims; i++) {
            dims[i] = s8(r) % (nd + 2);
            int d = fz_norm_dim0(dims[i], nd);
            unsigned bit = 1u << (d < 0 ? 0 : d);
            valid = valid && d != -2 && !(seen & bit);
            seen |= bit;
        }
        rc = ev_flip(&f->ex, x, ndims, ndims ? dims : NULL, &out);
        if (!valid) {
            expect_err(rc, "flip (invalid)");
            FZ_CHECK(out == NULL, "flip failed but wrote *out");
            return;
        }
        expect_ok(rc, "flip");
        check_shape(out, xd, nd, sh, "flip");
        break;
    }
    case 3: {
        /* roll: per-dim shifts (repeats allowed), or the flattened tensor */
        int dims[EV_MAX_DIMS + 1], ndims = u8(r) % (nd + 2), valid = 1;
        int64_t shifts[EV_MAX_DIMS + 1];
        int nshifts = (u8(r) & 7) == 0 ? ndims + 1 : ndims; /* sometimes one too many */
        for (int i = 0; i < nshifts; i++) {
            shifts[i] = (u8(r) & 1) ? i64(r) : s8(r);
        }
        for (int i = 0; i < ndims; i++) {
            dims[i] = s8(r) % (nd + 2);
            valid = valid && fz_norm_dim0(dims[i], nd) != -2;
        }
        if (ndims == 0) {
            nshifts = (u8(r) & 7) == 0 ? 0 : 1;
            shifts[0] = i64(r);
            valid = nshifts == 1;
        } else {
            valid = valid && nshifts == ndims;
        }
        rc = ev_roll(&f->ex, x, nshifts, shifts, ndims, ndims ? dims : NULL, &out);
        if (!valid) {
            expect_err(rc, "roll (invalid)");
            FZ_CHECK(out == NULL, "roll failed but wrote *out");
            return;
        }
        expect_ok(rc, "roll");
        check_shape(out, xd, nd, sh, "roll");
        break;
    }
    case 4: {
        /* tril / triu, out of place or in place */
        int upper = u8(r) & 1, inplace = (u8(r) & 3) == 0;
        int64_t diag = (u8(r) & 1) ? i64(r) : s8(r) % 6;
        if (inplace) {
            rc = upper ? ev_triu_(&f->ex, x, diag) : ev_tril_(&f->ex, x, diag);
            if (nd >= 2 && !fz_expanded(x)) {
                expect_ok(rc, "tril_/triu_");
            } else {
                expect_err(rc, "tril_/triu_ (invalid)");
            }
            return;
        }
        rc = upper ? ev_triu(&f->ex, x, diag, &out) : ev_tril(&f->ex, x, diag, &out);
        if (nd < 2) {
            expect_err(rc, "tril/triu of fewer than 2 dims");
            FZ_CHECK(out == NULL, "tril/triu failed but wrote *out");
            return;
        }
        expect_ok(rc, "tril/triu");
        check_shape(out, xd, nd, sh, "tril/triu");
        break;
    }
    case 5:
    case 6: {
        /* nonzero: a sync point on x, so it may report x's failure */
        rc = ev_nonzero(&f->ex, x, &out);
        if (rc) {
            check_wait_rc(f, rc, "nonzero");
            FZ_CHECK(out == NULL, "nonzero failed but wrote *out");
            return;
        }
        int64_t n = ev_tensor_numel(x);
        FZ_CHECK(ev_tensor_ndim(out) == 2 && ev_tensor_shape(out)[1] == nd &&
                     ev_tensor_dtype(out) == EV_INT64,
                 "nonzero: result shape or dtype");
        /* Count x's nonzero elements (as float64: no nonzero value becomes
         * 0, NaN stays NaN); x was ready, so this read cannot fail. */
        ev_tensor *c = NULL;
        expect_ok(ev_cast(&f->ex, x, EV_FLOAT64, &c), "cast for nonzero");
        double *h = malloc(sizeof(double) * (size_t)(n ? n : 1));
        expect_ok(ev_to_host(&f->ex, c, h), "to_host for nonzero");
        int64_t cnt = 0;
        for (int64_t i = 0; i < n; i++) {
            cnt += h[i] != 0;
        }
        free(h);
        ev_tensor_unref(c);
        FZ_CHECK(ev_tensor_shape(out)[0] == cnt, "nonzero: %lld rows for %lld nonzero elements",
                 (long long)ev_tensor_shape(out)[0], (long long)cnt);
        break;
    }
    default: {
        /* unique: a sync point on x */
        int ri = u8(r) & 1, rcnt = u8(r) & 1;
        ev_tensor *cnt = NULL;
        rc = ev_unique(&f->ex, x, u8(r) & 1, ri, rcnt, &out, ri ? &out2 : NULL,
                       rcnt ? &cnt : NULL);
        if (rc) {
            check_wait_rc(f, rc, "unique");
            FZ_CHECK(!out && !out2 && !cnt, "unique failed but wrote an output");
            return;
        }
        int64_t u = ev_tensor_numel(out), n = ev_tensor_numel(x);
        FZ_CHECK(ev_tensor_ndim(out) == 1 && ev_tensor_dtype(out) == xd &&
                     u <= n && (n == 0 || u >= 1),
                 "unique: values of shape [%lld] for %lld elements", (long long)u, (long long)n);
        if (ri) {
            check_shape(out2, EV_INT64, nd, sh, "unique inverse");
        }
        if (rcnt) {
            check_shape(cnt, EV_INT64, 1, &u, "unique counts");
            put(f, r, cnt);
        }
        break;
    }
    }
    if (out) {
        put(f, r, out);
    }
    if (out2) {
        put(f, r, out2);
    }
}

/* matmul's validity from the shapes and dtypes alone (ops.h). */
static int matmul_valid(ev_tensor *a, ev_tensor *b)
{
    int na = ev_tensor_ndim(a), nb = ev_tensor_ndim(b);
    const int64_t *sa = ev_tensor_shape(a), *sb = ev_tensor_shape(b);
    if (na == 0 || nb == 0 ||
        ev_promote_types(ev_tensor_dtype(a), ev_tensor_dtype(b)) == EV_BOOL) {
        return 0;
    }
    int64_t k_a = sa[na - 1], k_b = nb == 1 ? sb[0] : sb[nb - 2];
    if (k_a != k_b) {
        return 0;
    }
    int ba = na > 2 ? na - 2 : 0, bb = nb > 2 ? nb - 2 : 0, bnd;
    int64_t bshape[EV_MAX_DIMS];
    return ev_broadcast_shapes(ba, sa, bb, sb, &bnd, bshape) == 0;
}

/* A zero-size tensor may have huge dimensions beside its zero one (its
 * shape is all it has). An op that keeps a huge dimension and drops the zero
 * one (matmul of [H, 0] by [0, K], index_select along the zero dimension)
 * asks for a huge result, and the right answer is a clean EV_ENOMEM (or
 * EV_EINVAL when its sizes multiply past 2^59). */
static int fz_huge(ev_tensor *t)
{
    for (int i = 0; t && i < ev_tensor_ndim(t); i++) {
        if (ev_tensor_shape(t)[i] > ((int64_t)1 << 24)) {
            return 1;
        }
    }
    return 0;
}

static void expect_ok_or_huge(int rc, const char *what, ev_tensor *a, ev_tensor *b)
{
    /* A result whose sizes multiply past 2^59 is refused before allocating. */
    int too_large = rc == EV_EINVAL && strstr(ev_last_message(), "is too large") != NULL;
    if ((rc == EV_ENOMEM || too_large) && (fz_huge(a) || fz_huge(b))) {
        expect_err(rc, what);
    } else {
        expect_ok(rc, what);
    }
}

static void do_matmul(fz *f, reader *r)
{
    ev_tensor *a = pick(f, r), *b = pick(f, r);
    ev_tensor *out = NULL;
    if (!a || !b) {
        expect_err(ev_matmul(&f->ex, a, b, &out), "matmul with NULL");
        return;
    }
    /* The result has at most numel(a) * numel(b) elements. */
    if ((double)ev_tensor_numel(a) * (double)ev_tensor_numel(b) > FZ_MAX_RESULT) {
        return; /* over budget: see FZ_MAX_RESULT */
    }
    int rc = ev_matmul(&f->ex, a, b, &out);
    if (matmul_valid(a, b)) {
        expect_ok_or_huge(rc, "matmul", a, b);
        put(f, r, out);
    } else {
        expect_err(rc, "matmul (invalid)");
        FZ_CHECK(out == NULL, "matmul failed but wrote *out");
    }
}

/* An index tensor of any integer dtype with values in [-2, 2 * FZ_MAX_DIM):
 * some out of range (-2 as uint8 is 254). */
static ev_tensor *index_tensor(fz *f, reader *r, int nd, const int64_t *shape)
{
    static const ev_dtype dts[] = {EV_INT32, EV_INT64, EV_UINT8, EV_INT8, EV_INT16};
    ev_dtype dt = dts[u8(r) % 5];
    int64_t n = shape_numel(nd, shape);
    int64_t vals[256];
    if (n > 256) {
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        uint8_t c = u8(r);
        vals[i] = (c & 7) == 7 ? (int64_t)(c % (2 * FZ_MAX_DIM + 2)) - 2 : c % (FZ_MAX_DIM + 1);
    }
    ev_tensor *t64 = NULL, *t = NULL;
    expect_ok(ev_from_host(&f->ex, EV_INT64, nd, shape, vals, &t64), "index from_host");
    if (dt == EV_INT64) {
        return t64;
    }
    expect_ok(ev_cast(&f->ex, t64, dt, &t), "index cast");
    ev_tensor_unref(t64);
    return t;
}

static void do_index(fz *f, reader *r)
{
    ev_tensor *x = pick(f, r);
    if (!x) {
        return;
    }
    int nd = ev_tensor_ndim(x);
    const int64_t *sh = ev_tensor_shape(x);
    uint8_t kind = u8(r) % 6;
    int d = nd ? s8(r) % nd : 0;
    ev_tensor *idx = NULL, *out = NULL;
    int rc;
    if (kind <= 1) {
        int64_t len = u8(r) % 5;
        int ind = u8(r) & 1;
        idx = index_tensor(f, r, ind, &len);
        rc = kind == 0 ? ev_index_select(&f->ex, x, d, idx, &out) : ev_take(&f->ex, x, idx, &out);
        if (kind == 0 ? nd > 0 : (ev_tensor_numel(x) > 0 || ev_tensor_numel(idx) == 0)) {
            /* take from an empty tensor with indices is an index error at the wait */
            expect_ok_or_huge(rc, kind == 0 ? "index_select" : "take", x, idx);
        }
    } else if (kind <= 4 && nd > 0) {
        /* gather / scatter_add: index no larger than x outside dim */
        int64_t ishape[EV_MAX_DIMS];
        for (int i = 0; i < nd; i++) {
            ishape[i] = sh[i] ? u8(r) % (sh[i] + 1) : 0;
            if (i == (d < 0 ? d + nd : d)) {
                ishape[i] = u8(r) % (FZ_MAX_DIM + 1);
            }
        }
        idx = index_tensor(f, r, nd, ishape);
        if (!idx) {
            return;
        }
        if (kind == 2) {
            rc = ev_gather(&f->ex, x, d, idx, &out);
            expect_ok(rc, "gather");
        } else {
            /* src with index's shape and x's dtype */
            ev_tensor *src = NULL;
            expect_ok(ev_ones(&f->ex, ev_tensor_dtype(x), nd, ishape, &src), "scatter src");
            if (kind == 3) {
                rc = ev_scatter_add(&f->ex, x, d, idx, src, &out);
                expect_ok(rc, "scatter_add");
            } else {
                rc = ev_scatter_add_(&f->ex, x, d, idx, src);
                if (rc) {
                    expect_err(rc, "scatter_add_"); /* x may be expanded */
                }
            }
            ev_tensor_unref(src);
        }
    } else {
        /* where / cat / stack over random slots: accept either */
        ev_tensor *list[4];
        int n = 1 + u8(r) % 4, have = 1;
        for (int i = 0; i < n; i++) {
            list[i] = pick(f, r);
            have = have && list[i];
        }
        int dim = s8(r) % (nd + 2);
        if (!have) {
            expect_err(ev_cat(&f->ex, list, n, dim, &out), "cat with NULL");
            return;
        }
        if (kind == 5) {
            int n1, n2;
            int64_t s1[EV_MAX_DIMS], s2[EV_MAX_DIMS];
            if (ev_broadcast_shapes(ev_tensor_ndim(list[0]), ev_tensor_shape(list[0]),
                                    ev_tensor_ndim(x), ev_tensor_shape(x), &n1, s1) == 0 &&
                ev_broadcast_shapes(n1, s1, ev_tensor_ndim(list[n - 1]),
                                    ev_tensor_shape(list[n - 1]), &n2, s2) == 0 &&
                !fz_too_large(n2, s2) && shape_numel(n2, s2) > FZ_MAX_RESULT) {
                return; /* over budget: see FZ_MAX_RESULT */
            }
            rc = ev_where(&f->ex, list[0], x, list[n - 1], &out);
        } else {
            rc = (u8(r) & 1) ? ev_cat(&f->ex, list, n, dim, &out)
                             : ev_stack(&f->ex, list, n, dim, &out);
        }
        out = expect_any(rc, out, "where/cat/stack");
    }
    if (idx && rc) {
        expect_err(rc, "index op");
    }
    ev_tensor_unref(idx);
    if (out) {
        put(f, r, out);
    }
}

/* ---------------------------------------------------------------- waits */

static void do_wait(fz *f, reader *r)
{
    switch (u8(r) % 5) {
    case 0:
    case 1: {
        ev_tensor *t = pick(f, r);
        if (!t) {
            return;
        }
        size_t bytes = (size_t)ev_tensor_numel(t) * ev_dtype_size(ev_tensor_dtype(t));
        void *buf = malloc(bytes ? bytes : 1);
        check_wait_rc(f, ev_to_host(&f->ex, t, buf), "to_host");
        free(buf);
        break;
    }
    case 2: {
        ev_tensor *t = pick(f, r);
        if (!t) {
            return;
        }
        ev_error *err = NULL;
        int rc = ev_wait_obj(f->vm, ev_tensor_obj(t), &err);
        check_wait_rc(f, rc, "wait_obj");
        check_error_obj(err, rc, "wait_obj");
        break;
    }
    case 3: {
        ev_error *err = NULL;
        int rc = ev_synchronize(f->vm, &err);
        check_wait_rc(f, rc, "synchronize");
        check_error_obj(err, rc, "synchronize");
        break;
    }
    default:
        expect_ok(ev_wait_all(f->vm, UINT32_MAX), "wait_all");
        break;
    }
}

/* ------------------------------------------------- thread uids, submits */

static void do_thread(fz *f, reader *r)
{
    uint8_t c = u8(r);
    switch (c % 4) {
    case 0: {
        int n = 0;
        for (int i = 1; i <= FZ_LIMIT; i++) {
            n += f->taken[i];
        }
        uint32_t uid = 0;
        int rc = ev_vm_thread_acquire(f->vm, &uid);
        if (n == FZ_LIMIT) {
            FZ_CHECK(rc == EV_ELIMIT, "acquire past the limit returned %d", rc);
            FZ_CHECK(strstr(ev_last_message(), "EAGERVM_WORKER_THREAD_LIMIT"),
                     "ELIMIT message does not name the variable");
        } else {
            expect_ok(rc, "thread_acquire");
            FZ_CHECK(uid >= 1 && uid <= FZ_LIMIT && !f->taken[uid], "acquire gave uid %u", uid);
            f->taken[uid] = 1;
        }
        break;
    }
    case 1: {
        /* Release a random uid: taken ones succeed, others (uid 0, a double
         * release, past the limit) are EV_EINVAL. */
        uint32_t uid = u8(r) % (FZ_LIMIT + 3);
        int rc = ev_vm_thread_release(f->vm, uid);
        if (uid >= 1 && uid <= FZ_LIMIT && f->taken[uid]) {
            expect_ok(rc, "thread_release");
            f->taken[uid] = 0;
        } else {
            FZ_CHECK(rc == EV_EINVAL, "bad thread_release(%u) returned %d", uid, rc);
            expect_err(rc, "bad thread_release");
        }
        break;
    }
    default:
        /* Issue the following ops on another uid (any uid <= the limit is
         * valid, acquired or not). */
        f->ex.thread_uid = u8(r) % (FZ_LIMIT + 1);
        break;
    }
}

typedef struct kargs {
    uint8_t fail;
    uint8_t pad[7];
} kargs;

static int fz_kernel(void *arg, ev_kctx *kc)
{
    const kargs *a = arg;
    if (a->fail) {
        return ev_kctx_fail(kc, (a->fail & 1) ? EV_EKERNEL : EV_EVALUE, "fuzz kernel failed %u",
                            a->fail);
    }
    return 0;
}

static void fz_drop(void *arg)
{
    (void)arg;
    atomic_fetch_add_explicit(&drops_seen, 1, memory_order_relaxed);
}

static void fz_free(void *data)
{
    (void)data;
    atomic_fetch_add_explicit(&frees_seen, 1, memory_order_relaxed);
}

static void do_submit(fz *f, reader *r)
{
    uint8_t c = u8(r);
    ev_stream s = ev_cpu_stream(u8(r) % (FZ_LIMIT + 2)); /* FZ_LIMIT + 1 is invalid */
    int valid = s.thread_uid <= FZ_LIMIT;
    if ((c & 0x30) == 0x30) {
        s.type = EV_STREAM_TYPE_COUNT + (c & 1);
        valid = 0;
    } else if ((c & 0x30) == 0x20) {
        s.type = u8(r) % EV_STREAM_TYPE_COUNT;
    }
    if (c & 0x40) {
        s.device_type = EV_DEVICE_CUDA; /* not built */
        valid = 0;
    }
    kargs a = {.fail = (u8(r) % 4 == 0) ? (uint8_t)(1 + u8(r) % 2) : 0};
    ev_ticket tk;
    int rc;
    if (c & 0x80) {
        rc = ev_submit_barrier(f->vm, s, (c & 1) ? fz_kernel : NULL, &a, sizeof a, "fuzz barrier",
                               &tk);
    } else {
        ev_operand ops[3];
        size_t n = 0;
        for (int i = 0; i < 3; i++) {
            ev_tensor *t = pick(f, r);
            uint8_t acc = u8(r) % 4;
            if (t && acc) {
                ops[n++] = (ev_operand){ev_tensor_obj(t), acc};
            }
        }
        ev_instr_desc d = {.kernel = fz_kernel,
                           .arg = &a,
                           .arg_size = sizeof a,
                           .arg_drop = fz_drop,
                           .stream = s,
                           .operands = ops,
                           .n_operands = n,
                           .name = "fuzz kernel",
                           .site = &fz_site};
        rc = ev_submit(f->vm, &d, &tk);
        if (rc == 0) {
            atomic_fetch_add_explicit(&drops_expected, 1, memory_order_relaxed);
        }
    }
    if (!valid) {
        expect_err(rc, "submit on a bad stream");
        return;
    }
    if (f->injected && rc == EV_ENOMEM) {
        return;
    }
    expect_ok(rc, "submit");
    if (u8(r) & 1) {
        ev_error *err = NULL;
        rc = ev_wait_ticket(f->vm, tk, &err);
        check_wait_rc(f, rc, "wait_ticket");
        check_error_obj(err, rc, "wait_ticket");
    }
}

static void do_obj(fz *f, reader *r)
{
    ev_obj *o = NULL;
    int rc = ev_obj_create(f->vm, &o);
    if (f->injected && rc == EV_ENOMEM) {
        return;
    }
    expect_ok(rc, "obj_create");
    /* A writer on o, then the release: the callback runs after it. */
    if (u8(r) & 1) {
        ev_operand op = {o, EV_WRITE};
        kargs a = {0};
        ev_instr_desc d = {.kernel = fz_kernel, .arg = &a, .arg_size = sizeof a,
                           .arg_drop = fz_drop, .stream = f->ex.thread_uid <= FZ_LIMIT
                           ? ev_cpu_stream(f->ex.thread_uid) : ev_cpu_stream(0),
                           .operands = &op, .n_operands = 1, .name = "fuzz writer"};
        if (ev_submit(f->vm, &d, NULL) == 0) {
            atomic_fetch_add_explicit(&drops_expected, 1, memory_order_relaxed);
        }
    }
    rc = ev_obj_release(f->vm, o, fz_free, NULL);
    expect_ok(rc, "obj_release");
    atomic_fetch_add_explicit(&frees_expected, 1, memory_order_relaxed);
    /* Releasing NULL is promised to be harmless. */
    expect_ok(ev_obj_release(f->vm, NULL, NULL, NULL), "obj_release(NULL)");
}

/* Runs one random call with the Nth allocation failing, then resets. */
static void do_inject(fz *f, reader *r);

static void step(fz *f, reader *r, int depth)
{
    uint8_t op = u8(r);
    switch (op % 16) {
    case 0:
    case 1:
    case 2: {
        ev_tensor *t = create_valid(f, r);
        if (t) {
            put(f, r, t);
        }
        break;
    }
    case 3:
        if (op & 0x10) {
            null_out(f, r);
        } else {
            create_invalid(f, r);
        }
        break;
    case 4:
    case 5:
        do_view(f, r);
        break;
    case 6:
        do_binary(f, r);
        break;
    case 7:
        do_unary(f, r);
        break;
    case 8:
        if (op & 0x10) {
            do_reduce_more(f, r);
        } else {
            do_reduce(f, r);
        }
        break;
    case 9:
        do_matmul(f, r);
        break;
    case 10:
        if (op & 0x10) {
            do_sort_more(f, r);
        } else {
            do_index(f, r);
        }
        break;
    case 11: {
        int i = u8(r) % FZ_SLOTS;
        ev_tensor_unref(f->slot[i]);
        f->slot[i] = NULL;
        ev_tensor_unref(NULL); /* promised to be a no-op */
        break;
    }
    case 12:
        do_wait(f, r);
        break;
    case 13:
        do_thread(f, r);
        break;
    case 14:
        if (op & 0x10) {
            do_obj(f, r);
        } else {
            do_submit(f, r);
        }
        break;
    default:
        if (depth == 0 && (op & 0x30) == 0x30) {
            do_inject(f, r);
        } else {
            ev_generator_manual_seed(f->gen, u8(r));
        }
        break;
    }
}

/* The injected failure may hit any allocation of the call (or of a worker
 * meanwhile): the call must then fail cleanly or succeed, and later waits may
 * report EV_ENOMEM from a kernel that could not allocate. Checks made for
 * valid calls are relaxed by running the call through a reader copy and
 * accepting any clean outcome. */
static void do_inject(fz *f, reader *r)
{
    long n = u8(r) % 8;
    f->injected = 1;
    ev_tensor *t = NULL;
    int64_t shape[2] = {1 + u8(r) % 4, 1 + u8(r) % 4};
    ev_tensor *a = pick(f, r), *t2 = NULL, *t3 = NULL;
    int kind = u8(r) % 7;
    ev__fail_alloc_after(n);
    int rc;
    switch (kind) {
    case 4:
        rc = a ? ev_sort(&f->ex, a, 0, u8(r) & 1, 1, &t, &t2) : ev_ones(&f->ex, EV_INT32, 2, shape,
                                                                    &t);
        break;
    case 5:
        /* a sync point: also waits for a under the failing allocations */
        rc = a ? ev_unique(&f->ex, a, 1, 1, 1, &t, &t2, &t3) : ev_ones(&f->ex, EV_INT32, 2, shape,
                                                                      &t);
        break;
    case 6:
        rc = a ? ev_cumsum(&f->ex, a, 0, EV_DTYPE_NONE, &t) : ev_ones(&f->ex, EV_BOOL, 2, shape,
                                                                      &t);
        break;
    case 0:
        rc = ev_ones(&f->ex, EV_FLOAT32, 2, shape, &t);
        break;
    case 1:
        rc = a ? ev_add(&f->ex, a, a, &t) : ev_zeros(&f->ex, EV_INT64, 2, shape, &t);
        break;
    case 2:
        rc = a ? ev_sum(&f->ex, a, 0, NULL, 0, &t) : ev_eye(&f->ex, 3, -1, EV_INT32, &t);
        break;
    default:
        rc = a ? ev_contiguous(&f->ex, a, &t) : ev_arange(&f->ex, ev_scalar_int(0),
                                                          ev_scalar_int(5), ev_scalar_int(1),
                                                          EV_INT64, &t);
        break;
    }
    ev__fail_alloc_after(-1);
    if (rc) {
        FZ_CHECK(is_ev_code(rc), "injected failure gave %d", rc);
    }
    t = expect_any(rc, t, "call under allocation failure");
    FZ_CHECK(rc == 0 || (!t2 && !t3), "a call failed under allocation failure but wrote outputs");
    if (t) {
        put(f, r, t);
    }
    if (t2) {
        put(f, r, t2);
    }
    if (t3) {
        put(f, r, t3);
    }
}

/* ------------------------------------------------------------ the entry */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size, 0};
    fz f;
    memset(&f, 0, sizeof f);
    ev_vm_config cfg = {.worker_thread_limit = FZ_LIMIT, .max_pending = 64};
    if (ev_vm_create(&cfg, &f.vm) != 0) {
        fz_fail("vm_create failed");
    }
    f.ex = (ev_exec){f.vm, 0, &fz_site};
    expect_ok(ev_generator_create(u8(&r), &f.gen), "generator_create");
    atomic_store(&drops_expected, 0);
    atomic_store(&drops_seen, 0);
    atomic_store(&frees_expected, 0);
    atomic_store(&frees_seen, 0);

    for (int n = 0; n < FZ_MAX_STEPS && r.i < r.n; n++) {
        step(&f, &r, 0);
    }

    for (int i = 0; i < FZ_SLOTS; i++) {
        ev_tensor_unref(f.slot[i]);
    }
    ev_error *err = NULL;
    int rc = ev_synchronize(f.vm, &err);
    check_wait_rc(&f, rc, "final synchronize");
    check_error_obj(err, rc, "final synchronize");
    if (u8(&r) & 1) {
        for (uint32_t u = 1; u <= FZ_LIMIT; u++) {
            if (f.taken[u]) {
                expect_ok(ev_vm_thread_release(f.vm, u), "final thread_release");
            }
        }
    }
    ev_vm_destroy(f.vm);
    ev_generator_destroy(f.gen);
    FZ_CHECK(atomic_load(&drops_seen) == atomic_load(&drops_expected),
             "arg_drop ran %ld times for %ld submitted instructions", atomic_load(&drops_seen),
             atomic_load(&drops_expected));
    FZ_CHECK(atomic_load(&frees_seen) == atomic_load(&frees_expected),
             "free callbacks ran %ld times for %ld released objects", atomic_load(&frees_seen),
             atomic_load(&frees_expected));
    return 0;
}
