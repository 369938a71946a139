/* Internal contract of the ops layer: the one elementwise instruction that
 * binary and unary ops (and later where, clamp-like ops) issue, the line
 * walker of scans and sorts, and the sort keys sort and unique share. */
#ifndef EV_OPS_IMPL_H
#define EV_OPS_IMPL_H

#include <string.h>

#include "eagervm/ops.h"
#include "tensor/tensor-impl.h"

/* The loops are built for the baseline x86-64 (SSE2, 4 floats a step) and
 * again for AVX2 (8) and AVX-512 (16); the loader picks one for the CPU it
 * runs on. Files that use it compile with fp-contract=off, which keeps
 * a * b + c two roundings in every build, so each CPU computes the same
 * bits. */
/* Not under sanitizers: ifunc resolvers run before their runtimes start. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define EV__SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define EV__SIMD_CLONES_BUILT 1 /* ev_config_get reports the clone chosen */
#else
#define EV__SIMD_CLONES
#endif

/* The lane loops are unrolled before the vectorizer sees them, so that
 * the lanes live in registers (a rolled inner loop keeps them in memory). */
#if defined(__GNUC__) && !defined(__clang__)
#define LANE_UNROLL _Pragma("GCC unroll 64")
#else
#define LANE_UNROLL
#endif

/* The instruction name of an op table row's in-place form, or NULL. */
#define EV__INPLACE_NAME_INPLACE(name) #name "_"
#define EV__INPLACE_NAME_OUT_OF_PLACE(name) NULL

/* Loop failure codes left in ev__loop_ctx.err. */
enum { EV__LOOP_OK = 0, EV__LOOP_NEG_INT_POW = 1 };

/* Issues out = loop(in...) as one instruction named name (a static string).
 * The inputs are broadcast to out's shape; one that overlaps out in another
 * layout is copied first. The loop computes from loop_in to loop_out; the
 * operands are converted as needed. ctx is copied. */
int ev__elementwise(const ev_exec *ex, const char *name, ev_tensor *out, ev_tensor *const *in,
                    int nin, ev_dtype loop_in, ev_dtype loop_out, ev__loop_fn loop,
                    const ev__loop_ctx *ctx);

/* 1 if a result of dtype r may be written into a tensor of dtype into
 * (NumPy's casting="same_kind": the kind does not go up in the order bool <
 * unsigned integer < signed integer < float). */
int ev__can_cast_same_kind(ev_dtype r, ev_dtype into);

/* Issues a binary op a <op> b whose result dtype is res, computed by loop
 * from loop_in to loop_out: into a new tensor of the broadcast shape, handed
 * out in *out (owned), or (inplace) into a after checking that the result
 * fits it (shape, same-kind cast, no expanded elements). Messages name the
 * op. */
int ev__binary_issue(const ev_exec *ex, const char *name, ev_tensor *a, ev_tensor *b,
                     ev_dtype res, ev_dtype loop_in, ev_dtype loop_out, ev__loop_fn loop,
                     int inplace, ev_tensor **out);

/* ------------------------------------------------------------------ lines
 *
 * Ops that work on whole lines along one dimension (scans, sorts, top-k)
 * walk their operands line by line (lines.c). Every operand has the shape of
 * ops[0] outside the dimension; along it each has its own length. */
typedef struct ev__lines {
    int nops;
    int nd;                                         /* dimensions other than dim */
    int64_t count;                                  /* lines: product of their sizes */
    int64_t shape[EV_MAX_DIMS];                     /* their sizes, outermost first */
    int64_t strides[EV__ITER_MAX_OPS][EV_MAX_DIMS]; /* their byte strides */
    int64_t len[EV__ITER_MAX_OPS];                  /* elements per line */
    int64_t step[EV__ITER_MAX_OPS];                 /* byte stride along the line */
    char *data[EV__ITER_MAX_OPS];                   /* borrowed; NULL for a NULL op */
} ev__lines;

/* Lines of nops operands along dim (-1: the operands are 0-d and form one
 * line of one element). A NULL operand gets NULL data and zero strides. */
void ev__lines_init(ev__lines *l, int nops, ev_tensor *const *ops, int dim);
/* Byte offsets off[k] of the first element of line `line` in each operand,
 * and its multi-index over the other dimensions in idx (for ev__lines_next). */
void ev__lines_seek(const ev__lines *l, int64_t line, int64_t *idx, int64_t *off);
/* Moves idx and off on to the next line (C order over the other dims). */
void ev__lines_next(const ev__lines *l, int64_t *idx, int64_t *off);

/* Normalises dim for x, accepting 0 and -1 for a 0-d x (as PyTorch): *out
 * is then -1. Errors: EV_EINDEX naming fn and the valid range. */
int ev__norm_dim0(const char *fn, int dim, const ev_tensor *x, int *out);

/* Copies one element of esz bytes (a dtype's size: 1, 2, 4 or 8). */
static inline void ev__copy_elem(char *dst, const char *src, size_t esz)
{
    switch (esz) {
    case 1: memcpy(dst, src, 1); break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    default: memcpy(dst, src, 8); break;
    }
}

/* Copies n elements of esz bytes from src to dst, each side stepping by its
 * own byte stride (any sign); the two must not overlap. Bytes are moved
 * as they are, so this serves every dtype (ev__cast_strided would convert
 * through the value). */
#define EV__REVERSE_RUN(T)                                                 \
    do {                                                                   \
        T *restrict d_ = (T *)dst;                                         \
        const T *restrict s_ = (const T *)src;                             \
        for (int64_t i = 0; i < n; i++) {                                  \
            d_[i] = s_[-i];                                                \
        }                                                                  \
    } while (0)

static inline void ev__copy_run(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n,
                                size_t esz)
{
    if (ds == (int64_t)esz && ss == (int64_t)esz) {
        if (n > 0) {
            memcpy(dst, src, (size_t)n * esz);
        }
        return;
    }
    if (ds == (int64_t)esz && ss == -(int64_t)esz) {
        /* A reversed row (flip, negative-step views): a loop per element
         * size, which GCC vectorizes (a permute a vector) where the
         * element copy below is one call a value. */
        switch (esz) {
        case 1: EV__REVERSE_RUN(uint8_t); break;
        case 2: EV__REVERSE_RUN(uint16_t); break;
        case 4: EV__REVERSE_RUN(uint32_t); break;
        default: EV__REVERSE_RUN(uint64_t); break;
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        ev__copy_elem(dst + i * ds, src + i * ss, esz);
    }
}
#undef EV__REVERSE_RUN

/* ------------------------------------------------------------ sort keys
 *
 * Sorting (sort.c, shared with unique) turns each element into a 64-bit
 * key whose unsigned order is the order of the values: integers and bool by
 * their value as int64, floats by their value as float64 with -0.0 taken as
 * +0.0 and every NaN as one key above +inf. So one stable merge sort serves
 * every dtype, whatever its storage type. */
typedef struct ev__sort_item {
    uint64_t key;
    int64_t idx; /* the element's position */
} ev__sort_item;

/* Loads the keys of n elements of dtype dt at src (stride bytes apart) into
 * items[0..n), with positions first, first + 1, ... */
void ev__sort_load(ev__sort_item *items, const char *src, ev_dtype dt, int64_t stride,
                   int64_t n, int64_t first);
/* Sorts items[0..n) by key, ascending and stable (equal keys keep their
 * order); scratch has room for n items. */
void ev__sort_items(ev__sort_item *items, ev__sort_item *scratch, int64_t n);
/* The packed form (sort.c): for float32 and the integers of 4 bytes or
 * fewer, and n <= 2^32, a 32-bit key above the 32-bit position in one word,
 * whose unsigned order is the stable order. ev__sort_packable says whether
 * dt and n allow it; ev__sort_load_packed loads n words (positions first,
 * first + 1, ..., below 2^32); ev__sort_words sorts them ascending (scratch
 * has room for n); ev__sort_unpack_value writes the value of a key in dt to
 * out, or returns 0 for the keys that stand for more than one value (zero
 * and NaN of float32), whose element must then be read. */
int ev__sort_packable(ev_dtype dt, int64_t n);
void ev__sort_load_packed(uint64_t *w, const char *src, ev_dtype dt, int64_t stride, int64_t n,
                          int64_t first);
void ev__sort_words(uint64_t *w, uint64_t *scratch, int64_t n);
int ev__sort_unpack_value(uint32_t key, ev_dtype dt, void *out);

/* The max (want_max) or min of x[0..n), n > 0, NaN if there is one, by the
 * widest vectors the CPU has (reduce.c, from extrema.h). */
float ev__extreme_f32(const float *x, int64_t n, int want_max);

#endif
