/* The elementwise instruction shared by every binary and unary op: argument
 * packing, overlap handling, submission, and the kernel that drives a loop
 * over operands of any strides and dtypes. */
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "ops/ops-impl.h"

typedef struct ew_arg {
    /* What a dense loop needs comes first: a dense instruction carries only
     * this part (see EW_DENSE_ARG_SIZE). */
    ev__loop_fn loop;
    const char *name;                 /* static */
    ev__loop_ctx ctx;
    /* Set at submission when the operands are dense alike (see ew_dense):
     * the kernel then runs from these alone and never reads a tensor struct
     * (each read would be a cache miss on the worker). */
    char *ptrs[EV__ITER_MAX_OPS];
    int64_t numel;
    int64_t row[EV__ITER_MAX_OPS];    /* per EW_ROW input: the row's length */
    /* Dtypes in a byte each, to keep the dense part small. */
    int8_t loop_in, loop_out;
    int8_t in_mode[EV__ITER_MAX_OPS]; /* per input of a dense instruction */
    int8_t in_dt[EV__ITER_MAX_OPS];
    int8_t nops;
    int8_t dense;
    ev_tensor *ops[EV__ITER_MAX_OPS]; /* [0] out, then inputs; referenced
                                         unless dense */
} ew_arg;
_Static_assert(EV_DTYPE_COUNT <= INT8_MAX, "dtypes must fit ew_arg's bytes");
#define EW_DENSE_ARG_SIZE offsetof(ew_arg, ops)
_Static_assert(sizeof(ew_arg) <= EV_INLINE_ARG_SIZE, "ew_arg must travel inline");

static void ew_drop(void *p)
{
    ew_arg *a = p;
    for (int k = 0; k < a->nops; k++) {
        ev_tensor_unref(a->ops[k]);
    }
}

/* How a dense instruction's loop reads an input: in place (dense, in the
 * loop's dtype), converted block by block (dense, another dtype: a bool
 * mask times floats), as one value broadcast (a scalar operand), or as one
 * row repeated over the leading dimensions (a bias row added to a batch:
 * x @ w + b). */
enum { EW_DIRECT, EW_CONVERT, EW_SCALAR, EW_ROW };

static int all_strides_zero(const ev_tensor *t)
{
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] != 1 && t->strides[d] != 0) {
            return 0;
        }
    }
    return 1;
}

/* For an input t broadcast to the C-contiguous out: the length of the row
 * it repeats when it is contiguous along its trailing dimensions (strides
 * as out's) and broadcast (stride 0) along the leading ones, so that out's
 * element i reads t's element i % row; 0 otherwise. */
static int64_t row_len(const ev_tensor *t, const ev_tensor *out)
{
    int d = t->ndim;
    int64_t row = 1;
    while (d > 0 && (t->shape[d - 1] == 1 || t->strides[d - 1] == out->strides[d - 1])) {
        d--;
        row *= t->shape[d];
    }
    for (int e = 0; e < d; e++) {
        if (t->shape[e] != 1 && t->strides[e] != 0) {
            return 0;
        }
    }
    return row;
}

/* 1 if the output is dense and in the loop's dtype, and each input (of the
 * output's shape: inputs were broadcast to it) is laid out as the output,
 * is one broadcast value, or (the output C-contiguous) repeats one
 * contiguous row: then the loop runs over the whole buffer without an
 * iterator, and the instruction carries pointers only. Sets in_mode, in_dt
 * and row. */
static int ew_dense(ew_arg *a)
{
    /* A dense block in any order: a transposed result of transposed inputs
     * is one flat loop too. */
    const ev_tensor *out = a->ops[0];
    if (out->dtype != (ev_dtype)a->loop_out || !ev__tensor_is_dense(out)) {
        return 0;
    }
    for (int k = 1; k < a->nops; k++) {
        const ev_tensor *t = a->ops[k];
        a->in_dt[k] = (int8_t)t->dtype;
        a->row[k] = 0;
        if (ev__same_strides(t, out)) {
            a->in_mode[k] = t->dtype == (ev_dtype)a->loop_in ? EW_DIRECT : EW_CONVERT;
        } else if (all_strides_zero(t)) {
            a->in_mode[k] = EW_SCALAR;
        } else if (ev_tensor_is_contiguous(out) && (a->row[k] = row_len(t, out)) > 1) {
            a->in_mode[k] = EW_ROW;
        } else {
            return 0;
        }
    }
    return 1;
}

/* A dense loop split in chunks: each chunk runs with its own copy of the
 * loop context, and a failure in any of them is kept here. */
typedef struct ew_split {
    const ew_arg *a;
    _Atomic int err;
} ew_split;

/* Bytes per buffer of a dense loop with converted or broadcast inputs: runs
 * of 2,048 float32 (1,024 float64). Shorter runs cost more calls of the
 * loop, and make a scalar multiply of floats into a new tensor a quarter
 * slower. */
#define EW_BUF_BYTES 8192

/* Fills dst with n elements (n a multiple of row) of dtype dd, each byte
 * size dsz: src's row of row elements of dtype sd, repeated. The row is
 * converted once, then copied in doubling runs. */
static void fill_repeated(char *dst, ev_dtype dd, int64_t dsz, const char *src, ev_dtype sd,
                          int64_t row, int64_t n)
{
    if (dd == sd) {
        memcpy(dst, src, (size_t)(row * dsz));
    } else {
        ev__cast_strided(dst, dd, dsz, src, sd, (int64_t)ev__dsize(sd), row);
    }
    for (int64_t have = row; have < n;) {
        int64_t m = have < n - have ? have : n - have;
        memcpy(dst + have * dsz, dst, (size_t)(m * dsz));
        have += m;
    }
}

static void ew_dense_range(int64_t lo, int64_t hi, void *p)
{
    ew_split *sp = p;
    const ew_arg *a = sp->a;
    ev_dtype lin = (ev_dtype)a->loop_in;
    int64_t so = (int64_t)ev__dsize((ev_dtype)a->loop_out), si = (int64_t)ev__dsize(lin);
    const void *in[EV__ITER_MAX_OPS];
    int direct = 1;
    for (int k = 1; k < a->nops; k++) {
        direct &= a->in_mode[k] == EW_DIRECT;
    }
    ev__loop_ctx ctx = a->ctx;
    if (direct) {
        for (int k = 1; k < a->nops; k++) {
            in[k - 1] = a->ptrs[k] + lo * si;
        }
        a->loop(a->ptrs[0] + lo * so, in, hi - lo, &ctx);
    } else {
        /* Runs of at most a buffer when an input goes through one: a
         * converted input block by block; a broadcast value fills its
         * buffer once. A row is read in place (in the loop's dtype) or
         * converted run by run when long; a short one is repeated in its
         * buffer once, so that runs span several rows. Runs end where a
         * row (or its repeats) ends. */
        _Alignas(64) char buf[EV__ITER_MAX_OPS - 1][EW_BUF_BYTES];
        const int64_t block = EW_BUF_BYTES / si; /* elements per run */
        int64_t rep[EV__ITER_MAX_OPS]; /* a row's elements in its buffer; 0: none */
        int buffered = 0;
        for (int k = 1; k < a->nops; k++) {
            ev_dtype dt = (ev_dtype)a->in_dt[k];
            int64_t row = a->row[k];
            rep[k] = 0;
            if (a->in_mode[k] == EW_SCALAR) {
                fill_repeated(buf[k - 1], lin, si, a->ptrs[k], dt, 1,
                              hi - lo < block ? hi - lo : block);
                buffered = 1;
            } else if (a->in_mode[k] == EW_CONVERT) {
                buffered = 1;
            } else if (a->in_mode[k] == EW_ROW && row <= block / 2) {
                /* Enough copies for any run of this range from any offset. */
                int64_t copies = block / row, need = (hi - lo + row - 1) / row + 1;
                copies = copies < need ? copies : need;
                rep[k] = copies * row;
                fill_repeated(buf[k - 1], lin, si, a->ptrs[k], dt, row, rep[k]);
            } else if (a->in_mode[k] == EW_ROW && dt != lin) {
                buffered = 1;
            }
        }
        for (int64_t i = lo, m; i < hi; i += m) {
            m = hi - i;
            m = buffered && m > block ? block : m;
            for (int k = 1; k < a->nops; k++) {
                if (a->in_mode[k] == EW_ROW) {
                    int64_t left = (rep[k] ? rep[k] : a->row[k]) - i % a->row[k];
                    m = m < left ? m : left;
                }
            }
            for (int k = 1; k < a->nops; k++) {
                ev_dtype dt = (ev_dtype)a->in_dt[k];
                int64_t es = (int64_t)ev__dsize(dt);
                switch (a->in_mode[k]) {
                case EW_DIRECT:
                    in[k - 1] = a->ptrs[k] + i * si;
                    break;
                case EW_CONVERT:
                    ev__cast_strided(buf[k - 1], lin, si, a->ptrs[k] + i * es, dt, es, m);
                    in[k - 1] = buf[k - 1];
                    break;
                case EW_SCALAR:
                    in[k - 1] = buf[k - 1];
                    break;
                default: { /* EW_ROW */
                    int64_t off = i % a->row[k];
                    if (rep[k]) {
                        in[k - 1] = buf[k - 1] + off * si;
                    } else if (dt == lin) {
                        in[k - 1] = a->ptrs[k] + off * si;
                    } else {
                        ev__cast_strided(buf[k - 1], lin, si, a->ptrs[k] + off * es, dt, es, m);
                        in[k - 1] = buf[k - 1];
                    }
                    break;
                }
                }
            }
            a->loop(a->ptrs[0] + i * so, in, m, &ctx);
        }
    }
    if (ctx.err) {
        atomic_store_explicit(&sp->err, ctx.err, memory_order_relaxed);
    }
}

/* Runs the loop over an iterator's elements (ev__run_loop takes inputs
 * transposed against the output a tile at a time). */
static void ew_run(const ev__iter *it, const ev_dtype *dt, const ew_arg *a, ev__loop_ctx *ctx)
{
    ev__run_loop(it, dt, (ev_dtype)a->loop_in, (ev_dtype)a->loop_out, a->loop, ctx);
}

/* A strided loop split along its outermost dimension: each chunk runs the
 * iterator over its own slice of it (rows longer than that dimension stay
 * whole), with its own copy of the context. */
typedef struct ew_strided_split {
    const ew_arg *a;
    const ev__iter *it;
    const ev_dtype *dt;
    _Atomic int err;
} ew_strided_split;

static void ew_strided_range(int64_t lo, int64_t hi, void *p)
{
    ew_strided_split *sp = p;
    ev__iter sub = *sp->it;
    int d = sub.ndim - 1;
    for (int k = 0; k < sub.nops; k++) {
        sub.data[k] += lo * sub.strides[k][d];
    }
    sub.numel = sub.numel / sub.shape[d] * (hi - lo);
    sub.shape[d] = hi - lo;
    ev__loop_ctx ctx = sp->a->ctx;
    ew_run(&sub, sp->dt, sp->a, &ctx);
    if (ctx.err) {
        atomic_store_explicit(&sp->err, ctx.err, memory_order_relaxed);
    }
}

static int ew_kernel(void *p, ev_kctx *kc)
{
    ew_arg *a = p;
    if (a->dense) {
        if (a->numel > 0) {
            ew_split sp = {a, 0};
            ev__parallel_for(a->numel, EV__PARALLEL_GRAIN, ew_dense_range, &sp);
            a->ctx.err = atomic_load_explicit(&sp.err, memory_order_relaxed);
        }
    } else {
        ev_dtype dt[EV__ITER_MAX_OPS];
        for (int k = 0; k < a->nops; k++) {
            dt[k] = a->ops[k]->dtype;
        }
        ev__iter it;
        ev__iter_init_by_output(&it, a->nops, a->ops);
        int64_t outer = it.shape[it.ndim - 1];
        if (it.numel >= 2 * EV__PARALLEL_GRAIN && outer > 1) {
            ew_strided_split sp = {a, &it, dt, 0};
            int64_t per = it.numel / outer; /* elements per outer index */
            ev__parallel_for(outer, (EV__PARALLEL_GRAIN + per - 1) / per, ew_strided_range, &sp);
            a->ctx.err = atomic_load_explicit(&sp.err, memory_order_relaxed);
        } else {
            ew_run(&it, dt, a, &a->ctx);
        }
    }
    if (a->ctx.err == EV__LOOP_NEG_INT_POW) {
        return ev_kctx_fail(kc, EV_EVALUE, "%s: integers to negative integer powers are not "
                            "allowed", a->name);
    }
    return 0;
}

int ev__elementwise(const ev_exec *ex, const char *name, ev_tensor *out, ev_tensor *const *in,
                    int nin, ev_dtype loop_in, ev_dtype loop_out, ev__loop_fn loop,
                    const ev__loop_ctx *ctx)
{
    ew_arg a;
    /* Field by field: a memset of the struct costs more on every op. */
    for (int k = 0; k < EV__ITER_MAX_OPS; k++) {
        a.ops[k] = NULL;
        a.ptrs[k] = NULL;
    }
    a.dense = 0;
    a.numel = 0;
    a.nops = 1;
    a.ops[0] = ev_tensor_ref(out);
    a.loop_in = (int8_t)loop_in;
    a.loop_out = (int8_t)loop_out;
    a.loop = loop;
    a.name = name;
    a.ctx = *ctx;
    int rc = 0;
    for (int k = 0; k < nin; k++) {
        ev_tensor *src = in[k];
        ev_tensor *tmp = NULL;
        if (src != out && !ev__same_layout(src, out) && ev__may_overlap(src, out)) {
            /* An input that overlaps the output in another layout would be
             * read after parts of it were written: read it all first. */
            rc = ev_contiguous(ex, src, &tmp);
            if (rc == 0 && tmp == src) {
                /* Already contiguous, but still overlapping: force a copy. */
                ev_tensor_unref(tmp);
                rc = ev__tensor_new(name, ex, src->dtype, src->ndim, src->shape, &tmp);
                if (rc == 0 && (rc = ev__copy(ex, name, tmp, src)) != 0) {
                    ev_tensor_unref(tmp);
                }
            }
            if (rc) {
                goto fail;
            }
            src = tmp;
        }
        if (src->ndim == out->ndim &&
            memcmp(src->shape, out->shape, (size_t)out->ndim * sizeof(int64_t)) == 0) {
            a.ops[a.nops] = ev_tensor_ref(src); /* no view needed */
        } else {
            rc = ev__broadcast_to(name, src, out->ndim, out->shape, &a.ops[a.nops]);
        }
        ev_tensor_unref(tmp);
        if (rc) {
            goto fail;
        }
        a.nops++;
    }
    a.dense = ew_dense(&a);
    if (a.dense) {
        /* A storage's memory does not move while the tensors here hold it. */
        a.numel = out->numel;
        for (int k = 0; k < a.nops; k++) {
            a.ptrs[k] = ev__tensor_ptr(a.ops[k]);
        }
    }
    if (a.dense) {
        /* The kernel needs only the pointers, and the engine keeps the
         * memory until the instruction has run: the tensors go here, on the
         * thread whose cache holds their counts, not on the worker. A
         * storage the program drops next is then released now, and its
         * block can serve the next large op of this stream (stream-ordered
         * reuse) instead of coming back after the worker ran. */
        rc = ev__submit(ex, name, ew_kernel, &a, EW_DENSE_ARG_SIZE, NULL, &a.ops[1],
                        a.nops - 1, &a.ops[0], 1);
        ew_drop(&a);
        return rc;
    }
    return ev__submit(ex, name, ew_kernel, &a, sizeof a, ew_drop, &a.ops[1], a.nops - 1,
                      &a.ops[0], 1);

fail:
    ew_drop(&a);
    return rc;
}

/* The destination of a binary op: a new tensor of the broadcast shape, or
 * (inplace) a new reference to a once the result is known to fit it. */
static int binary_dest(const ev_exec *ex, const char *name, ev_tensor *a, ev_tensor *b,
                       ev_dtype res, int inplace, ev_tensor **dst)
{
    int nd;
    int64_t shape[EV_MAX_DIMS];
    char sa[EV__SHAPE_STR_SIZE], sb[EV__SHAPE_STR_SIZE], sc[EV__SHAPE_STR_SIZE];
    if (ev_broadcast_shapes(a->ndim, a->shape, b->ndim, b->shape, &nd, shape) != 0) {
        return ev__set_message(EV_EINVAL, "%s: shapes %s and %s cannot be broadcast together",
                               name, ev__shape_str(a->ndim, a->shape, sa, sizeof sa),
                               ev__shape_str(b->ndim, b->shape, sb, sizeof sb));
    }
    if (!inplace) {
        /* Laid out as the operands are (a.T + b.T is transposed too). */
        return ev__tensor_new_like(name, ex, res, nd, shape, (ev_tensor *[]){a, b}, 2, dst);
    }
    int same = nd == a->ndim;
    for (int i = 0; same && i < nd; i++) {
        same = shape[i] == a->shape[i];
    }
    if (!same) {
        return ev__set_message(EV_EINVAL, "%s: the result of shape %s does not fit the "
                               "in-place operand of shape %s (b of shape %s must "
                               "broadcast to it)", name,
                               ev__shape_str(nd, shape, sa, sizeof sa),
                               ev__shape_str(a->ndim, a->shape, sb, sizeof sb),
                               ev__shape_str(b->ndim, b->shape, sc, sizeof sc));
    }
    if (!ev__can_cast_same_kind(res, a->dtype)) {
        return ev__set_message(EV_ETYPE, "%s: the result dtype %s cannot be cast to the "
                               "in-place operand's dtype %s", name, ev_dtype_name(res),
                               ev_dtype_name(a->dtype));
    }
    if (ev__has_internal_overlap(a)) {
        return ev__set_message(EV_EINVAL, "%s: the in-place operand is an expanded tensor "
                               "(some elements share memory)", name);
    }
    *dst = ev_tensor_ref(a);
    return 0;
}

int ev__binary_issue(const ev_exec *ex, const char *name, ev_tensor *a, ev_tensor *b,
                     ev_dtype res, ev_dtype loop_in, ev_dtype loop_out, ev__loop_fn loop,
                     int inplace, ev_tensor **out)
{
    ev_tensor *dst;
    int rc = binary_dest(ex, name, a, b, res, inplace, &dst);
    if (rc) {
        return rc;
    }
    ev__loop_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ev_tensor *in[2] = {a, b};
    rc = ev__elementwise(ex, name, dst, in, 2, loop_in, loop_out, loop, &ctx);
    if (rc || inplace) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

/* NumPy's kind order b < u < i < f: an unsigned integer result goes into a
 * signed tensor, a signed one never into an unsigned tensor. */
static int kind_rank(ev_dtype d)
{
    const ev_dtype_info *i = ev_dtype_get_info(d);
    return i->kind == EV_KIND_BOOL ? 0 : i->kind == EV_KIND_INT ? 2 - i->is_unsigned : 3;
}

int ev__can_cast_same_kind(ev_dtype r, ev_dtype into)
{
    return kind_rank(r) <= kind_rank(into);
}
