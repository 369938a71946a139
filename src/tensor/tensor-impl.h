/* Internal contract of the tensor layer: the tensor and storage structs, the
 * caching allocator, strided casts, the N-d iterator and instruction submission
 * shared by src/tensor/ and src/ops/. Never installed. */
#ifndef EV_TENSOR_IMPL_H
#define EV_TENSOR_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/services.h"
#include "eagervm/tensor.h"

/* ------------------------------------------------------------------ dtypes */

/* C storage type of each dtype, for kernels written per dtype. */
#define EV__CTYPE_BOOL uint8_t
#define EV__CTYPE_INT32 int32_t
#define EV__CTYPE_INT64 int64_t
#define EV__CTYPE_FLOAT32 float
#define EV__CTYPE_FLOAT64 double
#define EV__CTYPE_UINT8 uint8_t
#define EV__CTYPE_INT8 int8_t
#define EV__CTYPE_INT16 int16_t

/* ev_dtype_get_info's table (dtype.c), read inline here: ev__dsize runs
 * several times per op, and the call with its bounds check cost 8
 * instructions each. */
extern const ev_dtype_info ev__dtype_table[EV_DTYPE_COUNT];

/* d's element size; d must be a valid dtype (internal callers only). */
static inline size_t ev__dsize(ev_dtype d)
{
    return ev__dtype_table[d].size;
}

/* Converts a host scalar to dtype d (as a cast does) and stores it at dst. */
void ev__scalar_store(ev_dtype d, ev_scalar s, void *dst);
/* The smallest signed integer dtype (int8): what bool arithmetic that NumPy
 * does in an integer type (floor_divide, remainder, pow, shifts) gives. */
ev_dtype ev__smallest_int(void);

/* Converts n elements from src (dtype sd, stride ss bytes) to dst (dtype dd,
 * stride ds bytes). Strides may be 0 on the source (broadcast) and negative.
 * Float to integer follows x86 (what NumPy gives there): NaN and values out of
 * range become the integer minimum, without C undefined behaviour; for the
 * narrow integers (uint8, int8, int16) the value is converted to int32 so,
 * then wrapped to the narrow width (300.0 -> uint8 44, NaN -> 0). Integer to
 * a narrower integer wraps. Any to bool is x != 0. Source and destination
 * must not overlap unless identical. */
void ev__cast_strided(void *dst, ev_dtype dd, int64_t ds, const void *src, ev_dtype sd,
                      int64_t ss, int64_t n);

/* --------------------------------------------------------------- allocator */

/* One block of device memory. The record is owned by the allocator while the
 * block sits in its cache and by the storage while it is in use; it lives as
 * long as the memory (no record is allocated when a cached block is reused). */
typedef struct ev__block {
    void *ptr;               /* 64-byte aligned start handed out */
    void *base;              /* what ev__malloc returned (owned) */
    size_t size;             /* usable bytes (the size class) */
    struct ev__block *next;  /* free-list link while cached */
    uint8_t device_type;
    uint8_t device_index;
} ev__block;

/* Hands out a block of at least nbytes (> 0). On a system failure it empties
 * the cache and retries once. Thread-safe. Errors: EV_ENOMEM (message names
 * the size and the allocator's state), EV_EINVAL (no such device). */
int ev__alloc(int device_type, int device_index, size_t nbytes, ev__block **out);
/* Returns a block to its allocator's cache; accepts NULL. Thread-safe (called
 * from workers by storage free callbacks). */
void ev__dealloc(ev__block *b);
/* 1 if b would serve a request of nbytes (same size class; for large blocks,
 * at most 1/8 wasted), as a cached block would. */
int ev__block_fits(const ev__block *b, size_t nbytes);
/* Counts b, handed from one storage to the next without the cache, in the
 * allocator's statistics. */
void ev__alloc_count_reuse(const ev__block *b);

/* ------------------------------------------------- intra-op parallelism */

/* Runs fn over [0, n) in chunks of at least grain elements, split between
 * the calling worker and the helper threads of its runtime's pool (made
 * when first needed, joined by ev_vm_destroy), and returns when every chunk
 * is done. fn must be safe to run on disjoint ranges at once. It takes the
 * threads the core budget grants (see ev__parallel_enter); with n < 2 grain,
 * a grant of 1, no helpers, the pool busy with another kernel's loop, or a
 * caller that is not a worker, it runs fn(0, n) on the caller. */
void ev__parallel_for(int64_t n, int64_t grain, void (*fn)(int64_t lo, int64_t hi, void *ctx),
                      void *ctx);
/* ev__parallel_for on any thread, for work an API call must finish before
 * it returns (from_host's copy): a thread that is not a worker uses the
 * pool of vm, counting itself as a busy kernel in the budget, so helpers
 * join it only where vm's workers leave cores free. */
void ev__parallel_for_caller(ev_vm *vm, int64_t n, int64_t grain,
                             void (*fn)(int64_t lo, int64_t hi, void *ctx), void *ctx);

/* The core budget shared by every large op of the process (split loops,
 * BLAS calls): returns how many threads, the caller's own included, the
 * op starting on the calling thread may use: at most the configured total
 * divided by the kernels busy now (the busy workers of the caller's
 * runtime, or the large ops in flight if more), and no more than the total
 * less what the other large ops hold; at least 1. Pair with
 * ev__parallel_leave(grant) when the op ends. */
int ev__parallel_enter(void);
void ev__parallel_leave(int grant);

/* Threads (the caller included) one large op may use when it runs alone:
 * EAGERVM_INTRAOP_THREADS or the CPUs this process may use, read once;
 * starts no thread. */
int ev__intraop_threads(void);

/* Below this many elements an elementwise loop runs on its worker alone. */
#define EV__PARALLEL_GRAIN ((int64_t)1 << 16)

/* ---------------------------------------------------------------- tensors */

/* A reference-counted piece of memory and the engine object that orders every
 * access to it. Owned by the tensors that reference it. */
typedef struct ev__storage {
    atomic_int refs;
    ev_vm *vm;          /* borrowed: the runtime outlives every tensor */
    ev_obj *obj;        /* owned: handed to ev_obj_release with the block */
    ev__block *block;   /* owned; NULL when nbytes == 0; guarded by the
                           reuse lock while parked */
    size_t nbytes;
    /* Stream-ordered reuse (stream_reuse.c). */
    bool was_parked;    /* set before release, read by the free after it */
    bool parked;        /* on the reuse list; guarded by the reuse lock */
    uint32_t park_uid;  /* the stream its pending uses run on */
    struct ev__storage *park_prev, *park_next;
    /* Bumped by every instruction issued that writes the storage, with
     * the name and site of the last one (ev_tensor_version). Relaxed: a
     * reader orders itself with the writer by program order or a wait. */
    atomic_uint_least64_t version;
    atomic_int aliases; /* of refs, the handles made by ev_tensor_alias */
    _Atomic(const char *) last_write_name;
    _Atomic(const ev_site *) last_write_site;
} ev__storage;

/* Counts an issued instruction that writes s (ev_tensor_version), naming
 * it: every submit path that writes a storage calls this. */
static inline void ev__storage_written(ev__storage *s, const char *name, const ev_site *site)
{
    atomic_fetch_add_explicit(&s->version, 1, memory_order_relaxed);
    atomic_store_explicit(&s->last_write_name, name, memory_order_relaxed);
    atomic_store_explicit(&s->last_write_site, site, memory_order_relaxed);
}

/* Stream-ordered reuse: when the last tensor on a storage of at least
 * EV__REUSE_MIN bytes goes while instructions on one stream still use it,
 * its block may back the next storage allocated for that stream at once
 * (the new object is ordered after them; see ev_obj_create_after). Without
 * it, a thread issuing large ops ahead of its worker would take fresh, cold
 * memory for every result. */
#define EV__REUSE_MIN ((size_t)64 << 10)
/* Offers s (no references left, not yet released) for reuse; returns 1 if
 * it was parked. Call before ev_obj_release. */
int ev__reuse_park(ev__storage *s);
/* A parked block that fits nbytes, whose pending uses all run on thread
 * uid of vm, or NULL. The caller owns the block. */
ev__block *ev__reuse_take(ev_vm *vm, uint32_t uid, size_t nbytes);
/* For the free of a storage that was parked: unparks it and returns its
 * block, or NULL if the block was taken. */
ev__block *ev__reuse_unpark(ev__storage *s);

/* Metadata is immutable after creation, so any thread may read it; ext, an
 * upper layer's state, is set at most once (see ev_tensor_ext_set). */
struct ev_tensor {
    atomic_int refs;
    ev_dtype dtype;
    _Atomic(ev_tensor_ext *) ext;
    int ndim;
    bool is_alias;                  /* made by ev_tensor_alias */
    int64_t numel;
    int64_t offset;                 /* elements from the storage start */
    ev__storage *storage;           /* one reference owned */
    /* Last, and written only up to ndim: a tensor of up to 2 dimensions
     * lies on 2 lines (structs are line-aligned, errors.c). */
    int64_t shape[EV_MAX_DIMS];
    int64_t strides[EV_MAX_DIMS];   /* in elements */
};
_Static_assert(offsetof(ev_tensor, shape) == 48, "a tensor's header is 48 bytes");

static inline char *ev__tensor_base(const ev_tensor *t)
{
    return t->storage->block ? (char *)t->storage->block->ptr : NULL;
}

/* Address of element [0,...,0] (NULL for an empty storage). */
static inline char *ev__tensor_ptr(const ev_tensor *t)
{
    char *b = ev__tensor_base(t);
    return b ? b + t->offset * (int64_t)ev__dsize(t->dtype) : NULL;
}

/* Checks a shape argument: ndim in range, sizes >= 0, and their product,
 * zeros counted as ones, at most INT64_MAX / 16 (so no size arithmetic on
 * any tensor overflows). fn names the caller in the message. */
int ev__check_shape(const char *fn, int ndim, const int64_t *shape);
/* Checks an exec context (non-NULL, with a vm). */
int ev__check_exec(const char *fn, const ev_exec *ex);
/* Checks a tensor argument (non-NULL). */
int ev__check_tensor(const char *fn, const char *what, const ev_tensor *t);
/* Normalises a possibly negative dimension for a tensor of ndim dimensions.
 * Errors: EV_EINDEX with a message naming fn and the valid range. */
int ev__norm_dim(const char *fn, int dim, int ndim, int *out);
/* Formats a shape as "[2, 3]" into buf; returns buf. */
char *ev__shape_str(int ndim, const int64_t *shape, char *buf, size_t size);
#define EV__SHAPE_STR_SIZE (EV_MAX_DIMS * 22 + 4)

/* A new contiguous tensor with a new storage (contents uninitialised).
 * Shapes derived from valid inputs (a broadcast, a cat, a matmul) can still
 * be too large, so they are checked here as ev__check_shape does.
 * Errors: EV_EINVAL naming fn if the sizes, zeros counted as ones, multiply
 * past INT64_MAX / 16; EV_ENOMEM. */
int ev__tensor_new(const char *fn, const ev_exec *ex, ev_dtype dtype, int ndim,
                   const int64_t *shape, ev_tensor **out);
/* As ev__tensor_new, but laid out as the inputs `likes` are when every one
 * of them of this shape is a dense permuted block in one and the same
 * order (a transposed operand, say): NumPy's and PyTorch's rule for the
 * results of elementwise ops and casts, so that `a.T + b.T` streams memory
 * instead of transposing. Otherwise (mixed layouts, views with gaps, only
 * broadcast operands) C order. NULL entries are skipped. */
int ev__tensor_new_like(const char *fn, const ev_exec *ex, ev_dtype dtype, int ndim,
                        const int64_t *shape, ev_tensor *const *likes, int nlikes,
                        ev_tensor **out);
/* 1 if t's elements fill one block of numel elements with positive strides
 * in some order of its dimensions (contiguous, or a permuted contiguous
 * layout such as a transpose); 0 for an empty t. */
int ev__tensor_is_dense(const ev_tensor *t);
/* 1 if a and b have one shape and step through it alike (strides compared
 * where a dimension is longer than 1): a flat loop from each one's first
 * element then pairs their elements. */
int ev__same_strides(const ev_tensor *a, const ev_tensor *b);
/* A new tensor struct viewing t's storage with the given layout. */
int ev__tensor_alias(const ev_tensor *t, ev_dtype dtype, int ndim, const int64_t *shape,
                     const int64_t *strides, int64_t offset, ev_tensor **out);
/* 1 if a and b have the same storage, offset, shape and strides. */
int ev__same_layout(const ev_tensor *a, const ev_tensor *b);
/* 1 if a and b may share memory (same storage and overlapping extents). */
int ev__may_overlap(const ev_tensor *a, const ev_tensor *b);
/* 1 if some dimension of size > 1 has stride 0 (elements alias each other). */
int ev__has_internal_overlap(const ev_tensor *t);

/* Submits one instruction on ex's cpu compute stream that reads the storages
 * of reads[] and writes those of writes[] (NULL entries are skipped). arg is
 * copied; drop runs on the copy after the kernel. If submission fails, drop
 * runs on arg itself here, so the caller never leaks what arg references. */
int ev__submit(const ev_exec *ex, const char *name, ev_kernel_fn kernel, const void *arg,
               size_t arg_size, void (*drop)(void *), ev_tensor *const *reads, int n_reads,
               ev_tensor *const *writes, int n_writes);

/* A view of t broadcast to shape (as ev_expand, -1 not allowed); fn names
 * the caller in the error message. */
int ev__broadcast_to(const char *fn, ev_tensor *t, int ndim, const int64_t *shape,
                     ev_tensor **out);

/* Issues dst <- src (src broadcast to dst's shape, converted to its dtype).
 * No checks beyond broadcasting; used by ev_copy_, contiguous and reshape. */
int ev__copy(const ev_exec *ex, const char *name, ev_tensor *dst, ev_tensor *src);

/* Copies an n x m block of elements of esz bytes (1, 2, 4 or 8): row i of
 * dst (rows ds elements apart, each contiguous) is column i of src (columns
 * ss elements apart, each contiguous), in cache-sized tiles (copy.c). */
void ev__transpose_block(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n,
                         int64_t m, size_t esz);

/* ---------------------------------------------------------------- iterator */

#define EV__ITER_MAX_OPS 4

/* Walks operands of one shape together, in rows along the innermost
 * (coalesced) dimension. Operand 0 is conventionally the output. */
typedef struct ev__iter {
    int ndim;                                   /* >= 1 after coalescing */
    int nops;
    int64_t numel;
    int64_t shape[EV_MAX_DIMS];                 /* [0] innermost */
    int64_t strides[EV__ITER_MAX_OPS][EV_MAX_DIMS]; /* bytes, [0] innermost */
    char *data[EV__ITER_MAX_OPS];               /* borrowed */
} ev__iter;

/* Builds an iterator over tensors that all have the shape of ops[0] (expand
 * inputs first). Dimensions of size 1 are dropped and dimensions contiguous
 * across all operands merged, so a contiguous case is one long row. */
void ev__iter_init(ev__iter *it, int nops, ev_tensor *const *ops);
/* As ev__iter_init, but in the memory order of ops[0], the output each
 * element of which is written once: a transposed output of transposed
 * inputs is walked as one dense run. For kernels whose result does not
 * depend on the visiting order (elementwise ops, copies, fills). */
void ev__iter_init_by_output(ev__iter *it, int nops, ev_tensor *const *ops);
/* The same from raw layouts: data[k] and strides[k] (bytes, outermost first)
 * of nops operands of shape `shape`. */
void ev__iter_init_raw(ev__iter *it, int nops, int ndim, const int64_t *shape,
                       char *const *data, const int64_t (*strides)[EV_MAX_DIMS]);

/* Called once per row: ptrs[k] is operand k's first element in the row,
 * strides[k] its step in bytes, n the row length. */
typedef void (*ev__row_fn)(char **ptrs, const int64_t *strides, int64_t n, void *user);
void ev__iter_rows(const ev__iter *it, ev__row_fn fn, void *user);

/* ------------------------------------------------------- elementwise loops */

/* Parameters and the failure flag of an elementwise loop. */
typedef struct ev__loop_ctx {
    double f0, f1;    /* float parameters (clamp bounds) */
    int64_t i0, i1;   /* integer parameters */
    int err;          /* set by a loop that meets an invalid value */
} ev__loop_ctx;

/* A loop over n contiguous elements in its compute dtypes. in[k] may equal
 * out when they are the same array (in-place ops). */
typedef void (*ev__loop_fn)(void *out, const void *const *in, int64_t n, ev__loop_ctx *ctx);

/* Runs loop over an iterator of (out, in...) whose dtypes may differ from the
 * loop's: rows that match are handed over directly; others go through small
 * buffers with ev__cast_strided, in blocks. */
void ev__run_loop(const ev__iter *it, const ev_dtype *op_dtypes, ev_dtype loop_in,
                  ev_dtype loop_out, ev__loop_fn loop, ev__loop_ctx *ctx);

#endif
