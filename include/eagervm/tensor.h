/* eagervm tensor layer: dtypes, tensors, storages, views, the caching
 * allocator, creation and copies, built on the engine in vm.h.
 *
 * A tensor is an opaque, reference-counted handle: dtype, shape, strides (in
 * elements), a storage offset, and a reference to a storage. Its metadata never
 * changes after creation; a view is a new tensor that shares the storage. A
 * storage owns one engine object, so every read or write of any view of it is
 * ordered by the engine (DESIGN rule 2), and one block from the caching
 * allocator, which goes back to the allocator only after the last instruction
 * touching it has finished (DESIGN rule 4).
 *
 * Conventions (as in vm.h): functions that can fail return 0 or a negative
 * EV_E* code and keep a message for the calling OS thread (ev_last_message()).
 * Functions that produce a tensor store a new reference in *out, which the
 * caller drops with ev_tensor_unref(); on failure *out is left unchanged.
 * Functions that issue work take an ev_exec and return once the work is
 * queued: argument checks and shape inference happen before, so a bad call
 * fails here and queues nothing (DESIGN rule 5). Every function is thread-safe
 * in the sense that distinct calls on shared tensors are safe; the program
 * order of the issuing thread decides what a kernel sees.
 *
 * Lifetime: every tensor of a runtime must be released before ev_vm_destroy().
 */
#ifndef EAGERVM_TENSOR_H
#define EAGERVM_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "vm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ dtypes */

/* The kind of a dtype, which decides type promotion. Unsigned integers
 * (uint8) are of kind EV_KIND_INT too; ev_dtype_info.is_unsigned tells them
 * apart. */
enum ev_dtype_kind { EV_KIND_BOOL = 0, EV_KIND_INT = 1, EV_KIND_FLOAT = 2 };

/* X-macro list of dtypes: enum suffix, name, storage C type, kind, and the
 * dtype kernels compute in. Append only. A narrow float (float16, bfloat16)
 * is added with a uint16_t storage type and FLOAT32 as its compute dtype:
 * kernels run in the compute dtype and only the casts learn the new type.
 * The narrow integers compute in int32 that way: every integer op is exact
 * there and wraps to the narrow width when the result is stored, as NumPy's
 * uint8/int8/int16 loops give. */
#define EV_DTYPE_MAP(X)                                   \
    X(BOOL, "bool", uint8_t, EV_KIND_BOOL, BOOL)          \
    X(INT32, "int32", int32_t, EV_KIND_INT, INT32)        \
    X(INT64, "int64", int64_t, EV_KIND_INT, INT64)        \
    X(FLOAT32, "float32", float, EV_KIND_FLOAT, FLOAT32)  \
    X(FLOAT64, "float64", double, EV_KIND_FLOAT, FLOAT64) \
    X(UINT8, "uint8", uint8_t, EV_KIND_INT, INT32)        \
    X(INT8, "int8", int8_t, EV_KIND_INT, INT32)           \
    X(INT16, "int16", int16_t, EV_KIND_INT, INT32)

typedef enum ev_dtype {
#define EV_DTYPE_ENUM(id, name, ctype, kind, compute) EV_##id,
    EV_DTYPE_MAP(EV_DTYPE_ENUM)
#undef EV_DTYPE_ENUM
    EV_DTYPE_COUNT
} ev_dtype;

/* Static facts about one dtype. bool is stored as one byte holding 0 or 1. */
typedef struct ev_dtype_info {
    const char *name;  /* "float32" */
    size_t size;       /* bytes per element */
    int kind;          /* enum ev_dtype_kind */
    ev_dtype compute;  /* the dtype kernels compute in */
    int is_unsigned;   /* 1 for an unsigned integer dtype (uint8), else 0 */
} ev_dtype_info;

/* The facts about dtype, or NULL if it is not a valid dtype. Static storage. */
EV_API const ev_dtype_info *ev_dtype_get_info(ev_dtype dtype);
/* The name of dtype ("float32"), or "invalid" for a value out of range. */
EV_API const char *ev_dtype_name(ev_dtype dtype);
/* Bytes per element; 0 for an invalid dtype. */
EV_API size_t ev_dtype_size(ev_dtype dtype);
/* 1 for a floating dtype, else 0. */
EV_API int ev_dtype_is_float(ev_dtype dtype);
/* Looks a dtype up by its name. Errors: EV_EINVAL (unknown name). */
EV_API int ev_dtype_from_name(const char *name, ev_dtype *out);
/* The smallest and largest value of a bool or integer dtype (bool: 0 and 1,
 * uint8: 0 and 255, int8: -128 and 127, ...) in *min and *max. Errors:
 * EV_EINVAL for a float or invalid dtype. Pure; thread-safe. */
EV_API int ev_dtype_int_range(ev_dtype dtype, int64_t *min, int64_t *max);

/* The dtype NumPy gives an array operation on arrays of dtypes a and b
 * (numpy.result_type), for every pair of the dtypes above:
 *   - bool with any dtype gives that dtype;
 *   - two integers of the same signedness give the wider; an unsigned one
 *     with a signed one gives the signed one if it is wider, else the
 *     smallest signed integer wider than the unsigned one (uint8 with int8
 *     gives int16, uint8 with int16 int16, uint8 with int32 int32);
 *   - float32 < float64; an integer with a float gives the smallest float
 *     wider than the integer (uint8, int8 and int16 with float32 give
 *     float32; int32 with float32 gives float64, as in NumPy), capped at
 *     float64.
 * Returns EV_DTYPE_COUNT if either argument is invalid. Pure; thread-safe. */
EV_API ev_dtype ev_promote_types(ev_dtype a, ev_dtype b);

/* The floating dtype a float-valued function (exp, sqrt, true division of
 * integers excepted, see ops.h) returns for an input of dtype d: d itself if
 * it is a float, else the smallest float wider than d: bool, uint8, int8 and
 * int16 give float32 (NumPy gives float16, which eagervm does not have, for
 * bool, uint8 and int8), int32 and int64 give float64, as NumPy does. */
EV_API ev_dtype ev_dtype_to_float(ev_dtype d);

/* ----------------------------------------------------------------- scalars */

/* A host value with a dtype; bool and integers live in i, floats in f. */
typedef struct ev_scalar {
    ev_dtype dtype;
    union {
        int64_t i;
        double f;
    } v;
} ev_scalar;

static inline ev_scalar ev_scalar_int(int64_t v)
{
    ev_scalar s;
    s.dtype = EV_INT64;
    s.v.i = v;
    return s;
}

static inline ev_scalar ev_scalar_float(double v)
{
    ev_scalar s;
    s.dtype = EV_FLOAT64;
    s.v.f = v;
    return s;
}

static inline ev_scalar ev_scalar_bool(int v)
{
    ev_scalar s;
    s.dtype = EV_BOOL;
    s.v.i = v != 0;
    return s;
}

/* ---------------------------------------------------------- exec context */

/* Where an op issues its work: the runtime, the thread uid whose cpu compute
 * stream (ev_cpu_stream(thread_uid)) runs it, and the site reported if it
 * fails (borrowed as in vm.h; may be NULL). Passed to every op; the caller
 * owns it and may change it between calls. */
typedef struct ev_exec {
    ev_vm *vm;
    uint32_t thread_uid;
    const ev_site *site;
} ev_exec;

/* ----------------------------------------------------------------- tensors */

#define EV_MAX_DIMS 8

typedef struct ev_tensor ev_tensor;

/* Adds a reference and returns t (NULL stays NULL). Thread-safe. */
EV_API ev_tensor *ev_tensor_ref(ev_tensor *t);
/* Drops a reference; accepts NULL. When the last reference to a storage goes,
 * its memory returns to the allocator once every instruction issued so far
 * that touches it has finished. Thread-safe; never blocks. */
EV_API void ev_tensor_unref(ev_tensor *t);
/* ev_tensor_unref on each of ts[0..n) (NULL entries allowed), in order.
 * Freeing a tensor reads its struct, then its storage, then what the
 * storage holds, each a cache miss when the tensor is cold; a batch asks
 * for each step of every tensor before waiting on any, so freeing many cold
 * tensors (a graph's saved tensors) waits a few times instead of a few times
 * per tensor. */
EV_API void ev_tensor_unref_n(ev_tensor *const *ts, size_t n);

/* Metadata accessors. They never block and never fail on a valid tensor; the
 * arrays they return have ev_tensor_ndim() entries and live as long as t. */
EV_API ev_dtype ev_tensor_dtype(const ev_tensor *t);
EV_API int ev_tensor_ndim(const ev_tensor *t);
EV_API const int64_t *ev_tensor_shape(const ev_tensor *t);
/* Strides in elements (may be 0 after expand, and negative after a slice
 * with a negative step; elements then lie below ev_tensor_data()). */
EV_API const int64_t *ev_tensor_strides(const ev_tensor *t);
/* Offset of element [0,...,0] from the start of the storage, in elements. */
EV_API int64_t ev_tensor_offset(const ev_tensor *t);
/* Number of elements (1 for a 0-d tensor, 0 if any dimension is 0). */
EV_API int64_t ev_tensor_numel(const ev_tensor *t);
/* 1 if the elements are laid out in C order without gaps, ascending from
 * ev_tensor_data() (dimensions of size 1 may have any stride; an empty
 * tensor counts as contiguous). */
EV_API int ev_tensor_is_contiguous(const ev_tensor *t);
/* 1 if a and b view the same storage. */
EV_API int ev_tensor_same_storage(const ev_tensor *a, const ev_tensor *b);
/* How many instructions issued so far write t's storage (any view of it),
 * counted when each is issued: an in-place op bumps it at once, before it
 * runs. Lets an upper layer notice that a tensor it saved was modified. */
EV_API uint64_t ev_tensor_version(const ev_tensor *t);
/* The instruction name and site (either may be NULL) of the last write
 * counted by ev_tensor_version. */
EV_API void ev_tensor_last_write(const ev_tensor *t, const char **name, const ev_site **site);
/* A new handle on t's elements: same dtype, shape, strides, offset and
 * storage, but none of t's ext state. */
EV_API int ev_tensor_alias(ev_tensor *t, ev_tensor **out);

/* 1 if the caller's reference is the only one to t and to its storage (no
 * other tensor or view shares the elements). */
EV_API int ev_tensor_is_unique(const ev_tensor *t);

/* 1 if another tensor (a view: t's base, or a view of t) shares t's
 * storage, not counting handles made by ev_tensor_alias. */
EV_API int ev_tensor_has_views(const ev_tensor *t);

/* An upper layer's state on one tensor (autograd keeps requires_grad, the
 * gradient and the graph edge there). Embed it as the first member of your
 * struct; release runs once, after the tensor's last reference went: at
 * once, or, when a worker dropped it, on the next thread that submits to the
 * runtime (never on a worker). */
typedef struct ev_tensor_ext ev_tensor_ext;
struct ev_tensor_ext {
    void (*release)(ev_tensor_ext *self);
};
/* t's ext state, or NULL. Thread-safe. */
EV_API ev_tensor_ext *ev_tensor_ext_get(const ev_tensor *t);
/* Sets t's ext state if it has none and returns ext; if another call set
 * one first, returns that one (and the caller keeps ext). Thread-safe. */
EV_API ev_tensor_ext *ev_tensor_ext_set(ev_tensor *t, ev_tensor_ext *ext);

/* The engine object of t's storage (for submitting custom instructions that
 * read or write t; borrowed, valid while t is referenced). */
EV_API ev_obj *ev_tensor_obj(const ev_tensor *t);
/* Address of element [0,...,0]. Reading or writing it is only safe inside a
 * kernel that declared t's object, or on the host after a wait on it. */
EV_API void *ev_tensor_data(const ev_tensor *t);

/* Broadcasts two shapes as NumPy does (aligned at the right; a dimension of 1
 * stretches). Writes the result into out_shape (EV_MAX_DIMS entries) and its
 * length into *out_ndim. Errors: EV_EINVAL naming both shapes. */
EV_API int ev_broadcast_shapes(int ndim_a, const int64_t *shape_a, int ndim_b,
                               const int64_t *shape_b, int *out_ndim, int64_t *out_shape);

/* ------------------------------------------------------------------ views
 *
 * Views share t's storage and copy nothing; they need no exec and issue no
 * work. Dimension arguments may be negative (counted from the end). Errors:
 * EV_EINDEX for a dimension out of range, EV_EINVAL for other bad arguments,
 * EV_ENOMEM. Each message names the function and the shapes involved. */

/* A view with a new shape of the same element count; one entry may be -1 to
 * be inferred. Fails with EV_EINVAL if t's strides do not allow it (use
 * ev_reshape, which copies then). */
EV_API int ev_view(ev_tensor *t, int ndim, const int64_t *shape, ev_tensor **out);
/* Like ev_view, but when the strides do not allow a view it issues a copy
 * into a new contiguous tensor on ex (the result then shares nothing). */
EV_API int ev_reshape(const ev_exec *ex, ev_tensor *t, int ndim, const int64_t *shape,
                      ev_tensor **out);
/* Swaps two dimensions. */
EV_API int ev_transpose(ev_tensor *t, int dim0, int dim1, ev_tensor **out);
/* Reorders the dimensions: result dimension i is t's dimension dims[i]; dims
 * has ev_tensor_ndim(t) entries and is a permutation. */
EV_API int ev_permute(ev_tensor *t, const int *dims, ev_tensor **out);
/* Broadcasts t to shape (ndim >= t's ndim, aligned at the right); a
 * dimension of size 1 stretches with stride 0, and -1 keeps t's size. The
 * result aliases elements: writing through it is rejected by in-place ops. */
EV_API int ev_expand(ev_tensor *t, int ndim, const int64_t *shape, ev_tensor **out);
/* Python slicing t[..., start:stop:step, ...] on dimension dim, with the
 * bounds Python writes (those of PySlice_Unpack) and the rules of
 * PySlice_AdjustIndices: a negative start or stop counts from the end
 * (adds size); then, for step > 0, both are clamped to [0, size] and the
 * view takes start, start + step, ... while < stop; for step < 0, both are
 * clamped to [-1, size - 1] and the view takes start, start + step, ...
 * while > stop. Any int64 bound is accepted; an omitted bound is the
 * extreme on its side: for step > 0, start 0 and stop INT64_MAX; for
 * step < 0, start INT64_MAX (the last element) and stop INT64_MIN (past the
 * first; -1 would mean the last element, as in Python). So t[::-1] is
 * ev_slice(t, d, INT64_MAX, INT64_MIN, -1) and t[5:1:-2] is (5, 1, -2).
 * The result has ceil(|stop - start| / |step|) elements in that direction
 * (0 if stop is not beyond start), element 0 at the clamped start, and
 * stride strides[dim] * step, which is negative for a negative step (a
 * view with a negative stride is not contiguous). Errors: EV_EINVAL for
 * step 0. */
EV_API int ev_slice(ev_tensor *t, int dim, int64_t start, int64_t stop, int64_t step,
                    ev_tensor **out);
/* A view of t's storage with the given shape, strides and offset (in
 * elements from the storage start, as ev_tensor_offset counts), whatever
 * t's own layout: the view an autograd layer needs to name one view's
 * elements inside another tensor over the same storage. Every element the
 * view reaches must lie inside the storage. Errors: EV_EINVAL (bad shape,
 * an element outside the storage, NULL arguments). */
EV_API int ev_as_strided(ev_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                         int64_t offset, ev_tensor **out);
/* Removes dimension dim if its size is 1; otherwise returns a view with the
 * same shape (as PyTorch does). */
EV_API int ev_squeeze(ev_tensor *t, int dim, ev_tensor **out);
/* Removes every dimension of size 1. */
EV_API int ev_squeeze_all(ev_tensor *t, ev_tensor **out);
/* Inserts a dimension of size 1 at position dim, in [-ndim-1, ndim]. */
EV_API int ev_unsqueeze(ev_tensor *t, int dim, ev_tensor **out);
/* A new reference to t itself if it is contiguous, else a contiguous copy
 * issued on ex. */
EV_API int ev_contiguous(const ev_exec *ex, ev_tensor *t, ev_tensor **out);

/* --------------------------------------------------------------- creation
 *
 * New tensors are contiguous and own a new storage. shape has ndim entries
 * (0 <= ndim <= EV_MAX_DIMS; ndim 0 makes a 0-d tensor, shape may then be
 * NULL), each >= 0. Errors: EV_EINVAL (bad ndim, negative size, bad dtype),
 * EV_ENOMEM (the allocator could not find the memory, even after emptying its
 * cache), and the engine's submit errors. */

/* Uninitialised contents; issues no work. */
EV_API int ev_empty(const ev_exec *ex, ev_dtype dtype, int ndim, const int64_t *shape,
                    ev_tensor **out);
EV_API int ev_zeros(const ev_exec *ex, ev_dtype dtype, int ndim, const int64_t *shape,
                    ev_tensor **out);
EV_API int ev_ones(const ev_exec *ex, ev_dtype dtype, int ndim, const int64_t *shape,
                   ev_tensor **out);
/* Every element set to value converted to dtype (as a cast does). */
EV_API int ev_full(const ev_exec *ex, ev_dtype dtype, int ndim, const int64_t *shape,
                   ev_scalar value, ev_tensor **out);
/* The 1-d tensor start, start+step, ... up to but not including stop, with
 * ceil((stop-start)/step) elements, as numpy.arange. Integer dtypes with
 * integer scalars compute exactly in int64, then cast (values past a narrow
 * dtype wrap, as NumPy's: 250..259 as uint8 is 250..255, 0..3); otherwise
 * element i is start + i*step computed in float64, then cast. Errors:
 * EV_EINVAL for step 0 or a non-finite bound. */
EV_API int ev_arange(const ev_exec *ex, ev_scalar start, ev_scalar stop, ev_scalar step,
                     ev_dtype dtype, ev_tensor **out);
/* num evenly spaced values from start to stop inclusive, as numpy.linspace
 * (computed in float64, the last element exactly stop, then cast).
 * Errors: EV_EINVAL for num < 0. */
EV_API int ev_linspace(const ev_exec *ex, double start, double stop, int64_t num,
                       ev_dtype dtype, ev_tensor **out);
/* The n x m identity (m < 0 means m = n). */
EV_API int ev_eye(const ev_exec *ex, int64_t n, int64_t m, ev_dtype dtype, ev_tensor **out);

/* A new tensor filled from host memory src (numel * dtype size bytes in C
 * order). The copy happens during the call (the storage is new, so no
 * instruction can touch it yet); src is only read during the call. */
EV_API int ev_from_host(const ev_exec *ex, ev_dtype dtype, int ndim, const int64_t *shape,
                        const void *src, ev_tensor **out);

/* A sync point: waits until t is ready (ev_wait_obj on its storage's object)
 * and copies its elements in C order into dst (numel * dtype size bytes, in
 * t's dtype). Blocks. Errors: EV_EPOISON (or the failure's code) when an
 * instruction that wrote t failed; the message then says which one, where it
 * was issued and why, and dst is untouched. */
EV_API int ev_to_host(const ev_exec *ex, ev_tensor *t, void *dst);

/* Copies src into dst, converting to dst's dtype as ev_cast does; src is
 * broadcast to dst's shape. Any strides on either side. Issues one
 * instruction that reads src and writes dst. If the two share a storage with
 * overlapping but different layouts, src is first copied to a temporary, so
 * the result is as if src were read completely first. Errors: EV_EINVAL
 * (shapes do not broadcast, dst is expanded). */
EV_API int ev_copy_(const ev_exec *ex, ev_tensor *dst, ev_tensor *src);
/* Sets every element of t to value converted to t's dtype. */
EV_API int ev_fill_(const ev_exec *ex, ev_tensor *t, ev_scalar value);

/* -------------------------------------------------------------- allocator */

/* Statistics of the caching allocator of one device, in bytes. */
typedef struct ev_allocator_stats {
    uint64_t in_use;       /* handed out to live storages (block sizes), and
                              small blocks other threads freed and keep for
                              their next allocations (up to 16 each, folded
                              back when they read the stats or exit) */
    uint64_t reserved;     /* held from the system: in use plus cached */
    uint64_t peak_in_use;  /* highest in_use since start or reset_peak */
    uint64_t cached;       /* reserved - in_use: ready for reuse */
    uint64_t n_allocs;     /* blocks handed out, cached or not */
    uint64_t n_cache_hits; /* of those, served from the cache */
    uint64_t n_sys_allocs; /* blocks taken from the system */
    uint64_t n_oom_retries;/* system failures that emptied the cache and retried */
    uint64_t n_stream_reuses; /* of the cache hits, blocks whose last uses were
                                 still queued on the allocating stream */
} ev_allocator_stats;

/* The allocator is one per device and lives for the process (shared by every
 * runtime in it, like PyTorch's). device_type is enum ev_device_type; only
 * EV_DEVICE_CPU exists yet. Thread-safe; never blocks for long. Errors:
 * EV_EINVAL (no such device). */
EV_API int ev_allocator_get_stats(int device_type, int device_index, ev_allocator_stats *out);
/* Returns every cached (free) block to the system. Blocks in use stay. */
EV_API int ev_allocator_empty_cache(int device_type, int device_index);
/* Sets peak_in_use to the current in_use. */
EV_API int ev_allocator_reset_peak(int device_type, int device_index);

/* --------------------------------------------------------- intra-op threads */

/* How large ops (loops split over a runtime's intra-op helpers, BLAS calls)
 * shared the cores: each asks for threads when it starts and gets at most
 * `threads` divided by the kernels busy then (at least 1, its own), less
 * what the others already hold. Process-wide. */
typedef struct ev_intraop_stats {
    int threads;            /* what one large op alone may use, its own thread
                               included: EAGERVM_INTRAOP_THREADS or the CPUs */
    int helpers;            /* helper threads of the live runtimes' pools */
    int running;            /* large ops running now */
    int granted;            /* threads they hold now */
    int peak_granted;       /* the most held at once since start or reset */
    int last_grant;         /* what the last large op got */
    int max_grant;          /* the most one op got since start or reset */
    int max_shared_grant;   /* the most one op got while another kernel was
                               busy, since start or reset */
    uint64_t large_ops;     /* large ops started */
    uint64_t shared_ops;    /* of those, started while another kernel was busy */
} ev_intraop_stats;

/* Fills *out; safe from any thread. Errors: EV_EINVAL (out is NULL). */
EV_API int ev_intraop_get_stats(ev_intraop_stats *out);
/* Starts the "since reset" maxima again from the current state. */
EV_API void ev_intraop_reset_peak(void);

#ifdef __cplusplus
}
#endif
#endif
