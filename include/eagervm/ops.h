/* eagervm ops on tensors: elementwise binary ops with NumPy broadcasting and
 * type promotion, unary ops, clamp and cast, reductions (any, all and
 * logsumexp included) and softmax, scans, sorting and top-k, matmul,
 * where/cat/stack, flips, rolls and triangles, index-driven selection, ops
 * whose result size depends on the values (nonzero, unique: sync points),
 * one_hot and cross_entropy, random numbers (randperm included), and fused
 * optimizer updates (SGD, Adam, AdamW). Conventions as in tensor.h.
 *
 * Every op checks its arguments and infers the output on the calling thread
 * (a bad call returns EV_EINVAL, EV_ETYPE or EV_EINDEX with a message naming
 * the op, the shapes or dtypes, and what was expected; nothing is queued),
 * allocates the output, then issues one instruction on ex's cpu compute
 * stream that reads the inputs and writes the output, and returns. The
 * result is a new contiguous tensor in *out (a new reference).
 *
 * The in-place form (trailing underscore) writes the result into its first
 * operand a, which must already have the broadcast shape, must not be an
 * expanded tensor, and must have a dtype the result can be cast to within its
 * kind order (bool < unsigned integer < signed integer < float: int32 +=
 * int64 is allowed and wraps, int32 += float32 is EV_ETYPE, and so is uint8
 * += int8, whose int16 result is signed), as NumPy's casting="same_kind"
 * decides (PyTorch agrees but for the last, which it allows). An input that
 * overlaps the written tensor in a different layout is copied first, so
 * results are always as if inputs were read before writing.
 */
#ifndef EAGERVM_OPS_H
#define EAGERVM_OPS_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------- elementwise ops
 *
 * The binary and unary ops are declared once, in the op table ops.def: each
 * row gives ev_<name>(ex, ...) and, for INPLACE rows, ev_<name>_(ex, ...),
 * an enum value EV_OP_<ID>, and the generic entry points below.
 *
 * Result dtypes of a binary op by its rule (R = ev_promote_types(a, b)):
 *   ARITH      R (add, mul, maximum, minimum); bool add is or, mul is and
 *   NUMERIC    R; bools are EV_ETYPE (sub: as NumPy, use logical_xor)
 *   FLOAT      R if R is a float, else float64 (div: true division, as NumPy)
 *   INTLIKE    R, with bool computed as the smallest integer dtype (int8,
 *              as NumPy) (floor_divide, remainder, pow); Python semantics: floor_divide
 *              rounds toward -inf and remainder has the divisor's sign.
 *              Integer division or remainder by 0 gives 0 and the minimum //
 *              -1 wraps, as NumPy (without its warning). An integer raised to
 *              a negative integer power fails the instruction with EV_EVALUE
 *              (DESIGN rule 6), as NumPy raises.
 *   COMPARE    bool, comparing in R (NaN != NaN)
 *   LOGICAL    bool, each operand taken as x != 0
 *   BITWISE    R for bool and integers (a float is EV_ETYPE, as NumPy and
 *              PyTorch); and, or, xor of bools stay bool
 *   SHIFT      R for integers, bool computed as the smallest integer (int8); as
 *              NumPy's left_shift and right_shift: a shift by the bit width
 *              or more, or by a negative amount, gives 0 (or -1 for a right
 *              shift of a negative value); left shifts wrap
 * Integer arithmetic wraps on overflow (two's complement), as NumPy: uint8
 * wraps modulo 256 (0 - 1 is 255), int8 and int16 likewise at their width.
 * Comparisons between uint8 and a signed dtype compare the values (in R), so
 * uint8 200 > int8 -1. maximum and minimum propagate NaN.
 *
 * Result dtypes of a unary op by its rule:
 *   SAME       the input's (abs of bool is the identity; abs of the integer
 *              minimum is the minimum, as NumPy; abs of uint8 is the identity)
 *   NUMERIC    the input's; bool is EV_ETYPE (neg, relu; neg of uint8 wraps,
 *              -x modulo 256, as NumPy)
 *   FLOAT      ev_dtype_to_float(input): floats keep their dtype; bool,
 *              uint8, int8 and int16 give float32, int32 and int64 float64
 *              (as NumPy's exp, but for its float16 of bool, uint8 and int8);
 *              gelu is the exact erf form, as PyTorch's default
 *   LOGICAL    bool (logical_not: x == 0)
 *   BITWISE    the input's, bool and integers only (bitwise_not is ~x, and
 *              logical not for bool)
 *   PREDICATE  bool, testing the input in its own dtype (isnan, isinf,
 *              isfinite: an integer is never NaN or infinite)
 * Rounding (floor, ceil, trunc, round) keeps integers as they are, as
 * PyTorch and the Array API do (NumPy returns float64); round is half to
 * even. sign keeps NaN and gives +0 for both zeros, as NumPy. Which zero
 * maximum and minimum return for +0 and -0 is unspecified, as in IEEE 754.
 */
typedef enum ev_op_rule {
    EV_RULE_ARITH, EV_RULE_NUMERIC, EV_RULE_FLOAT, EV_RULE_INTLIKE, EV_RULE_COMPARE,
    EV_RULE_LOGICAL, EV_RULE_BITWISE, EV_RULE_SHIFT, EV_RULE_SAME, EV_RULE_PREDICATE,
    EV_RULE_ACCUMULATE, EV_RULE_FLOAT_ONLY,
} ev_op_rule;

enum ev_binary_op {
#define EV_BINARY(ID, name, ...) EV_OP_##ID,
#include "eagervm/ops.def"
    EV_BINARY_OP_COUNT
};

enum ev_unary_op {
#define EV_UNARY(ID, name, ...) EV_OP_##ID,
#include "eagervm/ops.def"
    EV_UNARY_OP_COUNT
};

/* "add" for EV_OP_ADD; "invalid" for other values. */
EV_API const char *ev_binary_op_name(int op);
/* The dtype op gives for inputs of dtypes a and b, or EV_ETYPE if op does not
 * support them (message says why). Pure; does not touch any tensor. */
EV_API int ev_binary_result_dtype(int op, ev_dtype a, ev_dtype b, ev_dtype *out);
/* out = a op b (broadcast). */
EV_API int ev_binary(const ev_exec *ex, int op, ev_tensor *a, ev_tensor *b, ev_tensor **out);
/* a = a op b, in place (b broadcast to a's shape); EV_EINVAL for an op
 * without an in-place form. */
EV_API int ev_binary_(const ev_exec *ex, int op, ev_tensor *a, ev_tensor *b);

/* "neg" for EV_OP_NEG; "invalid" for other values. */
EV_API const char *ev_unary_op_name(int op);
/* The dtype op gives for an input of dtype x, or EV_ETYPE (message says why). */
EV_API int ev_unary_result_dtype(int op, ev_dtype x, ev_dtype *out);
/* out = op(x). */
EV_API int ev_unary(const ev_exec *ex, int op, ev_tensor *x, ev_tensor **out);
/* x = op(x), in place; EV_EINVAL for an op without an in-place form. */
EV_API int ev_unary_(const ev_exec *ex, int op, ev_tensor *x);

/* One function per row, and one for its in-place form:
 * ev_add(ex, a, b, &out), ev_add_(ex, a, b); ev_sin(ex, x, &out), ev_sin_(ex, x). */
#define EV__DECL_INPLACE_INPLACE(decl) decl
#define EV__DECL_INPLACE_OUT_OF_PLACE(decl)
#define EV_BINARY(ID, name, rule, inplace, ...)                                          \
    EV_API int ev_##name(const ev_exec *ex, ev_tensor *a, ev_tensor *b, ev_tensor **out); \
    EV__DECL_INPLACE_##inplace(EV_API int ev_##name##_(const ev_exec *ex, ev_tensor *a,  \
                                                       ev_tensor *b);)
#define EV_UNARY(ID, name, rule, inplace, ...)                                    \
    EV_API int ev_##name(const ev_exec *ex, ev_tensor *x, ev_tensor **out);      \
    EV__DECL_INPLACE_##inplace(EV_API int ev_##name##_(const ev_exec *ex, ev_tensor *x);)
#include "eagervm/ops.def"

/* Limits x to [min, max]; either bound may be NULL (no limit). The result
 * keeps x's dtype; a float bound for an integer x is EV_ETYPE (cast x first),
 * bool x is EV_ETYPE, and both bounds NULL is EV_EINVAL. Where min > max
 * every element becomes max (as NumPy's clip). NaN stays NaN. */
EV_API int ev_clamp(const ev_exec *ex, ev_tensor *x, const ev_scalar *min, const ev_scalar *max,
                    ev_tensor **out);
EV_API int ev_clamp_(const ev_exec *ex, ev_tensor *x, const ev_scalar *min,
                     const ev_scalar *max);

/* A copy of x converted to dtype: any to bool is x != 0; integer to a
 * narrower integer wraps (int32 300 -> uint8 44, -1 -> uint8 255); float to
 * integer truncates toward zero, and NaN or out-of-range values give the
 * integer minimum for int32 and int64 (what NumPy gives on x86); for uint8,
 * int8 and int16 the float is converted to int32 so and then wrapped, which
 * is also NumPy's x86 result (300.0 -> uint8 44, -1.0 -> 255, -129.0 -> int8
 * 127, NaN, inf and 1e10 -> 0). Never undefined behaviour. Always a new
 * tensor, even when dtype is x's. */
EV_API int ev_cast(const ev_exec *ex, ev_tensor *x, ev_dtype dtype, ev_tensor **out);


/* ------------------------------------------------------------- reductions
 *
 * dims selects the dimensions to reduce: dims == NULL reduces every
 * dimension (ndims must then be 0); otherwise dims has ndims distinct entries,
 * each may be negative, and ndims == 0 reduces nothing (as NumPy's axis=()).
 * A 0-d tensor accepts dimension 0 or -1 (as PyTorch). With keepdim the
 * reduced dimensions stay with size 1, otherwise they are removed.
 *
 * The reductions over dims (sum, mean, prod, max, min, any, all,
 * logsumexp) are rows of the op table ops.def; their rules: ACCUMULATE
 * (sum, prod), FLOAT_ONLY (mean), SAME (max, min), LOGICAL (any, all),
 * FLOAT (logsumexp).
 *
 * Result dtypes (as PyTorch):
 *   sum prod       int64 for bool and every integer input (wrapping; NumPy
 *                  sums uint8 to uint64 and int8 to int64, PyTorch all to
 *                  int64); the input's dtype for floats
 *   mean var std   the input's dtype; EV_ETYPE for bool and integers (cast
 *                  first, as PyTorch requires)
 *   max min        the input's dtype; NaN propagates
 *   argmax argmin  int64; the first occurrence wins, and NaN counts as the
 *                  largest (argmax) or smallest (argmin) value, as NumPy
 * Empty reductions: sum gives 0, prod 1, mean, var and std NaN; max, min,
 * argmax and argmin over zero elements (with a non-empty result) fail at the
 * call with EV_EVALUE, as NumPy does.
 *
 * Accuracy: float sums (sum, mean) run in the input's dtype. Reducing the
 * innermost dimensions is pairwise (blocks of 128 with 8 running partials,
 * as NumPy): the error grows as O(log n). Reducing outer dimensions of a
 * dense tensor adds whole rows, flushing a partial row every 128 rows: the
 * error grows as O(128 + n/128). float32 results match a float64 reference
 * within about 1e-6 relative for well-conditioned data (tests check 1e-6 on
 * 10^6 and 2*10^4 terms). prod multiplies in order. var and std accumulate in
 * float64 (two passes: mean, then the sum of squared deviations) and round
 * once. */
enum ev_reduce_op {
#define EV_REDUCE(ID, name, ...) EV_REDUCE_##ID,
#include "eagervm/ops.def"
    EV_REDUCE_OP_COUNT
};

/* "sum" for EV_REDUCE_SUM; "invalid" for other values. */
EV_API const char *ev_reduce_op_name(int op);
/* Reduces x over dims with op (enum ev_reduce_op); one named function per
 * row of the op table does the same: ev_sum(ex, x, ndims, dims, keepdim, &out). */
EV_API int ev_reduce(const ev_exec *ex, int op, ev_tensor *x, int ndims, const int *dims,
                     int keepdim, ev_tensor **out);

#define EV_REDUCE(ID, name, ...)                                                      \
    EV_API int ev_##name(const ev_exec *ex, ev_tensor *x, int ndims, const int *dims, \
                         int keepdim, ev_tensor **out);
#include "eagervm/ops.def"

/* Index of the largest (smallest) element along *dim, or of the flattened
 * tensor when dim is NULL (the result is then 0-d, or all-ones-shaped with
 * keepdim, as PyTorch). */
EV_API int ev_argmax(const ev_exec *ex, ev_tensor *x, const int *dim, int keepdim,
                     ev_tensor **out);
EV_API int ev_argmin(const ev_exec *ex, ev_tensor *x, const int *dim, int keepdim,
                     ev_tensor **out);

/* Variance (and its square root) over dims: sum((x - mean)^2) / max(0, N -
 * correction), where N is the number of reduced elements; correction 1 is
 * the unbiased estimate (PyTorch's default), 0 the population one. */
EV_API int ev_var(const ev_exec *ex, ev_tensor *x, int ndims, const int *dims, double correction,
                  int keepdim, ev_tensor **out);
EV_API int ev_std(const ev_exec *ex, ev_tensor *x, int ndims, const int *dims, double correction,
                  int keepdim, ev_tensor **out);

/* ev_any and ev_all (rows of ops.def, rule LOGICAL): whether any (all) of
 * the elements over dims is nonzero: bool results for
 * every input dtype, each element taken as x != 0, so NaN counts as true (as
 * NumPy and PyTorch). Over zero elements any gives false and all true. Dims
 * and keepdim as for ev_reduce; each output stops reading at the first
 * element that decides it. Errors as ev_reduce (EV_EINVAL, EV_EINDEX). */

/* ev_logsumexp (a row of ops.def, rule FLOAT): log(sum(exp(x))) over dims,
 * computed stably as m + log(sum(exp(x - m))),
 * m the largest reduced element, so large values never overflow. The
 * result dtype is ev_dtype_to_float(x) (floats keep theirs, bool gives
 * float32, integers float64); each output is computed in float64 and
 * rounded once. A NaN gives NaN; otherwise +inf among the elements gives
 * +inf, and elements all -inf, or none at all, give -inf (as PyTorch). Dims
 * and keepdim as for ev_reduce; errors as ev_reduce. */

/* exp(x - max) / sum(exp(x - max)) along dim, and its logarithm computed as
 * (x - max) - log(sum(exp(x - max))): stable for large inputs. Float inputs
 * only (EV_ETYPE otherwise); the result has x's shape and dtype. */
EV_API int ev_softmax(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor **out);
EV_API int ev_log_softmax(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor **out);


/* ------------------------------------------------------------------ scans
 *
 * Cumulative sums and products along dimension dim (negative counts from
 * the end; a 0-d x takes 0 or -1 and gives a 0-d copy): out[..., i, ...] is
 * the sum (product) of x[..., 0..i, ...]. The result has x's shape and the
 * dtype `dtype` or, for EV_DTYPE_NONE, the default of PyTorch: int64 for
 * bool and integer inputs, x's dtype for floats. Given a dtype, x is first
 * converted to it (as ev_cast), then accumulated:
 *   integers  in 64 bits, wrapping on overflow (two's complement), and
 *             stored wrapped to the dtype's width, as NumPy and PyTorch;
 *   floats    in float64, each partial result rounded once to the dtype
 *             (float32 as PyTorch's CPU kernel: more accurate than NumPy's
 *             float32 accumulation); NaN and infinities propagate as IEEE
 *             arithmetic does;
 *   bool      as logical or (cumsum) and and (cumprod), as bool add and mul
 *             are (NumPy's cumsum with dtype=bool).
 * Lines along dim are split over the intra-op threads. Errors: EV_EINDEX
 * (dim out of range), EV_EINVAL (out is NULL, dtype neither a dtype nor
 * EV_DTYPE_NONE).
 *
 * The in-place forms (PyTorch's Tensor.cumsum_ and cumprod_) write the
 * result into x by the rules of this header's first comment: x must not be
 * expanded (EV_EINVAL), and the result dtype must cast to x's within its
 * kind order (EV_ETYPE otherwise): int32 x accumulates in int64 and wraps
 * to int32, but bool x needs dtype EV_BOOL and uint8 x dtype EV_UINT8 (their
 * default result, int64, is signed; PyTorch writes it into them anyway),
 * and an integer x cannot take a float dtype. */

/* "No dtype given": the op's default result dtype (as dtype=None). Not a
 * valid dtype anywhere else. */
#define EV_DTYPE_NONE ((ev_dtype)-1)

EV_API int ev_cumsum(const ev_exec *ex, ev_tensor *x, int dim, ev_dtype dtype, ev_tensor **out);
EV_API int ev_cumprod(const ev_exec *ex, ev_tensor *x, int dim, ev_dtype dtype,
                      ev_tensor **out);
EV_API int ev_cumsum_(const ev_exec *ex, ev_tensor *x, int dim, ev_dtype dtype);
/* The gradient of cumprod(x, dim) given grad (x's shape; floats): for each
 * element, the sum over the later outputs of grad times the product of the
 * other factors, computed in float64 by a running product from the front and
 * a running sum from the back (no division, so exact when x holds zeros).
 * x's shape and dtype. One instruction. */
EV_API int ev_cumprod_backward(const ev_exec *ex, ev_tensor *x, ev_tensor *grad, int dim,
                               ev_tensor **out);
EV_API int ev_cumprod_(const ev_exec *ex, ev_tensor *x, int dim, ev_dtype dtype);


/* ------------------------------------------------------ sorting and top-k
 *
 * Along dimension dim (negative counts from the end; a 0-d x takes 0 or -1
 * and counts as one element). Every dtype sorts by its value (bool as
 * false < true). NaN sorts as the largest value: last in ascending order,
 * first in descending order, as NumPy and PyTorch; all NaNs are equal, and
 * -0.0 equals +0.0. Indices are int64 positions along dim. The sort is a
 * stable merge sort of each line (O(n log n) for a line of n, with 24 n
 * bytes of scratch), so equal elements always keep their order in x, in
 * descending order too; `stable` is accepted for PyTorch's signature
 * (stable=False allows any order of equal elements, and this is one).
 * Lines are split over the intra-op threads. Errors: EV_EINDEX (dim out of
 * range), EV_EINVAL (an output pointer is NULL; for topk, k out of range). */

/* values: x sorted along dim (x's shape and dtype, a new contiguous tensor);
 * indices: where each value is in x along dim (int64, x's shape). */
EV_API int ev_sort(const ev_exec *ex, ev_tensor *x, int dim, int descending, int stable,
                   ev_tensor **values, ev_tensor **indices);
/* The indices of ev_sort alone. */
EV_API int ev_argsort(const ev_exec *ex, ev_tensor *x, int dim, int descending, int stable,
                      ev_tensor **indices);
/* The k largest (largest != 0) or smallest elements along dim and their
 * indices; k in [0, size of dim] (EV_EINVAL otherwise); both results have
 * x's shape with dim resized to k. They are the first k of a stable sort
 * (descending when largest), in that order, whatever `sorted` says: values
 * in order (descending for largest), NaN first among the largest, and among
 * equal values the one earlier in x first (PyTorch leaves the order of ties,
 * and with sorted=False of everything, unspecified; this order is one it
 * allows). A 0-d x takes k 0 or 1: k = 1 gives 0-d results, k = 0 gives
 * 1-d results of size 0 (PyTorch gives a 0-d tensor holding no value). */
EV_API int ev_topk(const ev_exec *ex, ev_tensor *x, int64_t k, int dim, int largest, int sorted,
                   ev_tensor **values, ev_tensor **indices);


/* ------------------------------------------------------------------ matmul
 *
 * Matrix product with NumPy's matmul semantics: 1-D . 1-D is a 0-d dot
 * product; a 1-D a is a row (its dimension removed from the result), a 1-D b
 * a column (likewise); operands with more than 2 dimensions are stacks of
 * matrices whose batch dimensions broadcast. The result dtype is
 * ev_promote_types(a, b) (bool is EV_ETYPE); mixed dtypes are cast first.
 * float32 and float64 run on OpenBLAS when the build found it (transposed
 * views are passed as such, other strides are copied first), integers on a
 * built-in kernel that wraps like NumPy (uint8, int8 and int16 accumulate in
 * int32 and are cast to the result dtype by a second instruction, which
 * gives the same wrapped values). Errors: EV_EINVAL for 0-d operands,
 * mismatched inner dimensions, or batch dimensions that do not broadcast
 * (the message names both shapes). */
EV_API int ev_matmul(const ev_exec *ex, ev_tensor *a, ev_tensor *b, ev_tensor **out);


/* ---------------------------------------------------- selection and joins
 *
 * Argument orders as in PyTorch. Index tensors have any integer dtype
 * (EV_ETYPE for bool and floats; NumPy takes every integer dtype too).
 * Their values are only read by the kernel: an index out of range fails the
 * instruction with EV_EINDEX and the message
 * "<op>: index I is out of bounds for dimension D with size S", reported at
 * the next sync point on the output (DESIGN rule 6); the call itself has
 * already returned 0. Negative indices are out of range, except for take
 * (as NumPy and PyTorch). */

/* x where cond else y, all three broadcast together; cond must be bool; the
 * result dtype is ev_promote_types(x, y). */
EV_API int ev_where(const ev_exec *ex, ev_tensor *cond, ev_tensor *x, ev_tensor *y,
                    ev_tensor **out);
/* Joins n >= 1 tensors along an existing dimension dim; all have the same
 * ndim (>= 1) and sizes except along dim; the result dtype promotes all.
 * Issues one copy per non-empty input. */
EV_API int ev_cat(const ev_exec *ex, ev_tensor *const *tensors, int n, int dim, ev_tensor **out);
/* Joins n >= 1 tensors of one shape along a new dimension dim (in
 * [-ndim-1, ndim]). */
EV_API int ev_stack(const ev_exec *ex, ev_tensor *const *tensors, int n, int dim,
                    ev_tensor **out);
/* The entries index[j] of x along dim (index 0-d or 1-d); the result has x's
 * shape with dim resized to index's length. */
EV_API int ev_index_select(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index,
                           ev_tensor **out);
/* out[i][j][k] = x[i][index[i][j][k]][k] for dim 1 (likewise for others);
 * index has x's ndim and is no larger than x outside dim; out has index's
 * shape. */
EV_API int ev_gather(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index,
                     ev_tensor **out);
/* x taken as 1-d in C order, indexed by index; out has index's shape. */
EV_API int ev_take(const ev_exec *ex, ev_tensor *x, ev_tensor *index, ev_tensor **out);
/* A copy of x with x[i][index[i][j][k]][k] += src[i][j][k] for dim 1
 * (likewise for others); src has x's dtype; index has x's ndim, is no larger
 * than src anywhere and than x outside dim. Repeated indices accumulate.
 * scatter_add_ writes into x itself (not an expanded tensor); if it fails
 * inside the kernel, x is poisoned. */
EV_API int ev_scatter_add(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index,
                          ev_tensor *src, ev_tensor **out);
EV_API int ev_scatter_add_(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index,
                           ev_tensor *src);


/* ------------------------------------------- flips, rolls and triangles
 *
 * Copies of x (as PyTorch's flip, roll, tril and triu: new contiguous
 * tensors of x's shape and dtype, any dtype and strides) with the elements
 * moved or zeroed; one instruction each. Dimensions may be negative
 * (counted from the end); a 0-d x takes 0 or -1. Errors: EV_EINDEX (a
 * dimension out of range), EV_EINVAL (other bad arguments, out NULL). */

/* x reversed along each of the ndims dimensions in dims; ndims 0 (dims may
 * then be NULL) gives a plain copy. A dimension given twice is EV_EINVAL,
 * as in PyTorch. */
EV_API int ev_flip(const ev_exec *ex, ev_tensor *x, int ndims, const int *dims, ev_tensor **out);
/* x rolled: along dims[j], the element at i moves to (i + shifts[j]) mod
 * size (shifts of any sign and size); a dimension given more than once
 * rolls by the sum of its shifts (as PyTorch and NumPy). nshifts must equal
 * ndims, except that with ndims 0 (dims may then be NULL) the flattened
 * tensor rolls by shifts[0] (nshifts must be 1) and the result keeps x's
 * shape. Otherwise EV_EINVAL. */
EV_API int ev_roll(const ev_exec *ex, ev_tensor *x, int nshifts, const int64_t *shifts, int ndims,
                   const int *dims, ev_tensor **out);
/* The lower (tril) or upper (triu) triangle of each matrix in x's last two
 * dimensions: x[..., i, j] where j - i <= diagonal (tril) or j - i >=
 * diagonal (triu), 0 elsewhere; diagonal 0 is the main diagonal, > 0 above
 * it, < 0 below, any value allowed. x needs at least 2 dimensions
 * (EV_EINVAL); batches of any shape, empty ones included. */
EV_API int ev_tril(const ev_exec *ex, ev_tensor *x, int64_t diagonal, ev_tensor **out);
EV_API int ev_triu(const ev_exec *ex, ev_tensor *x, int64_t diagonal, ev_tensor **out);
/* The same in place: the elements of x outside the triangle become 0, the
 * others are not touched (the instruction writes x and reads nothing). x
 * must not be expanded (EV_EINVAL). */
EV_API int ev_tril_(const ev_exec *ex, ev_tensor *x, int64_t diagonal);
EV_API int ev_triu_(const ev_exec *ex, ev_tensor *x, int64_t diagonal);


/* ---------------------------------------- results sized by the values
 *
 * The size of these results depends on x's values, which the call must
 * know to make them, so each call is a sync point on x (like ev_to_host,
 * and like the Python module's boolean-mask indexing): it blocks until x is
 * ready (ev_wait_obj on x's storage, which waits for the writers of x
 * issued so far and nothing else), reads x on the calling thread, then
 * issues one instruction that writes the results and returns. The results
 * are as asynchronous as any op's from there on; the kernel reads only what
 * the call found, so writes to x issued later cannot change them. If an
 * instruction that wrote x failed, the call returns that failure's code
 * (EV_EPOISON or the kernel's) with a message naming the op and the
 * failure, and makes nothing. Other errors: EV_EINVAL (out pointers),
 * EV_ENOMEM. Thread-safe as every op; the calling thread holds no lock
 * while it waits. */

/* The indices of the nonzero elements of x (x != 0, so NaN counts), in C
 * order, as an int64 tensor of shape (n, ndim) (PyTorch's nonzero): row r
 * holds the multi-index of the r-th nonzero element. A 0-d x gives shape
 * (1, 0) or (0, 0). Any dtype and strides. */
EV_API int ev_nonzero(const ev_exec *ex, ev_tensor *x, ev_tensor **out);
/* The distinct values of x flattened (torch.unique with dim=None):
 *   values   1-d, x's dtype, sorted ascending as ev_sort orders them;
 *   inverse  int64 of x's shape: where each element of x is in values
 *            (made only when return_inverse; inverse may then be NULL);
 *   counts   int64, values' length: how often each value occurs (made only
 *            when return_counts; counts may then be NULL).
 * Values compare as in ev_sort: -0.0 equals +0.0 and the one met first in
 * C order is kept; all NaNs collapse into one value, last, as NumPy >= 1.24
 * does (equal_nan=True; PyTorch keeps each NaN apart). sorted is accepted
 * for PyTorch's signature: the values come sorted either way, an order
 * sorted=False allows. The call sorts x's keys on the calling thread
 * (O(n log n), 24 n bytes of scratch). */
EV_API int ev_unique(const ev_exec *ex, ev_tensor *x, int sorted, int return_inverse,
                     int return_counts, ev_tensor **values, ev_tensor **inverse,
                     ev_tensor **counts);


/* ------------------------------------------------ encodings and losses
 *
 * As the selection ops above, these read class indices (any integer dtype,
 * so uint8 labels go in as they are; EV_ETYPE otherwise) only inside the
 * kernel: an index out of range fails
 * the instruction with EV_EINDEX, reported at the next sync point on the
 * output (DESIGN rule 6), with a message naming the bad index and the number
 * of classes. Negative indices are out of range (as PyTorch). */

/* One-hot encoding, as PyTorch's one_hot: an int64 tensor of shape
 * index.shape + [num_classes] that is 1 at [..., index[...]] and 0
 * elsewhere. num_classes must be > 0 (EV_EINVAL): inferring it from
 * max(index) + 1 would need a sync, which the caller does (the Python
 * binding does it for num_classes=-1). index may be 0-d (the result is then
 * 1-d) and have any strides; it needs ndim < EV_MAX_DIMS (EV_EINVAL). The
 * kernel fails with "one_hot: index I is out of range for num_classes C". */
EV_API int ev_one_hot(const ev_exec *ex, ev_tensor *index, int64_t num_classes,
                      ev_tensor **out);

/* How a loss combines its per-sample values: none keeps them, mean averages
 * them (NaN for zero samples, as PyTorch), sum adds them (0 for none). */
#define EV_REDUCTION_MAP(X) \
    X(NONE, none)           \
    X(MEAN, mean)           \
    X(SUM, sum)

enum ev_reduction {
#define EV_REDUCTION_ENUM(id, name) EV_REDUCTION_##id,
    EV_REDUCTION_MAP(EV_REDUCTION_ENUM)
#undef EV_REDUCTION_ENUM
    EV_REDUCTION_COUNT
};

/* "mean" for EV_REDUCTION_MEAN; "invalid" for other values. */
EV_API const char *ev_reduction_name(int reduction);

/* Cross-entropy of logits against class indices, as PyTorch's
 * cross_entropy without weights, ignore_index or label smoothing: the loss
 * of sample n is logsumexp(logits[n, :]) - logits[n, target[n]], with the
 * log-sum-exp taken stably as m + log(sum(exp(x - m))), m the row maximum,
 * so large logits never overflow. logits is (N, C) float32 or float64,
 * target (N,) of an integer dtype, any strides. The result has logits' dtype:
 * shape (N,) for EV_REDUCTION_NONE, 0-d for MEAN and SUM. One instruction;
 * each row is computed in float64 and the mean or sum accumulates in float64
 * and rounds once (more accurate than a float32 reference). A NaN logit
 * gives a NaN loss for its row. Errors at the call: EV_EINVAL (shapes,
 * reduction), EV_ETYPE (dtypes); in the kernel: EV_EINDEX, "cross_entropy:
 * target T is out of range for C classes (sample n)". */
EV_API int ev_cross_entropy(const ev_exec *ex, ev_tensor *logits, ev_tensor *target,
                            int reduction, ev_tensor **out);
/* Its gradient with respect to logits, in one instruction: (softmax(logits)
 * - onehot(target)) times grad (shape (N,) for EV_REDUCTION_NONE, 0-d
 * otherwise; divided by N for MEAN), each element computed in float64 and
 * rounded once; the result has logits' shape and dtype, contiguous. Errors
 * as ev_cross_entropy (and EV_EINVAL for grad's shape). */
EV_API int ev_cross_entropy_backward(const ev_exec *ex, ev_tensor *logits, ev_tensor *target,
                                     ev_tensor *grad, int reduction, ev_tensor **out);


/* ---------------------------------------------------------- random numbers
 *
 * Counter-based: every value is a pure function of (seed, offset, element
 * index) through Philox4x32-10 (Salmon et al., SC'11; the generator of
 * cuRAND, PyTorch and JAX), so a result never depends on which worker runs
 * the kernel, or when. Each call reserves its counters from the generator on
 * the calling thread, before it returns: the values of a call are fixed by
 * the generator's state at the call and by the program order of calls on
 * that generator, whatever runs afterwards (reseeding included).
 *
 * The state is a seed and an offset counting the 32-bit random words
 * consumed, always a multiple of 4 (one Philox block is 4 words). Element i
 * of a result (C order, also for the in-place forms on strided views) uses
 * words offset + i*w .. offset + i*w + w - 1, where w is 1 for rand/uniform_
 * in float32, 2 for rand/uniform_ in float64, 2 for normal values (elements
 * 2j and 2j+1 share the block of Box-Muller pair j) and 2 or 4 for randint
 * (below); word
 * k is lane k % 4 of Philox block k / 4, with counter (k / 4 as 64 bits, 0, 0)
 * and key (seed low 32 bits, seed high 32 bits). A call advances the offset
 * by numel * w rounded up to 4. A call that fails its checks leaves the
 * generator untouched; one that fails later in submission may advance it.
 *
 * Every gen argument may be NULL for the process-wide default generator. */

/* A generator: a seed and an offset behind a small lock. Opaque. */
typedef struct ev_generator ev_generator;

/* The whole state of a generator; offset is a multiple of 4. */
typedef struct ev_generator_state {
    uint64_t seed;
    uint64_t offset; /* 32-bit words consumed since the seed was set */
} ev_generator_state;

/* A new generator with the given seed and offset 0; the caller owns it and
 * frees it with ev_generator_destroy(). Errors: EV_EINVAL (out is NULL),
 * EV_ENOMEM. Thread-safe. */
EV_API int ev_generator_create(uint64_t seed, ev_generator **out);
/* Frees gen; accepts NULL and ignores the default generator. Kernels never
 * read the generator (a call copies what it needs), so gen may be destroyed
 * right after issuing work from it, but not while another thread uses it. */
EV_API void ev_generator_destroy(ev_generator *gen);
/* The process-wide default generator, seeded 0 at startup; never freed.
 * Never fails; thread-safe. */
EV_API ev_generator *ev_default_generator(void);
/* Sets gen's seed and resets its offset to 0 (NULL: the default). Work
 * already issued keeps the values of the old state. Thread-safe. */
EV_API void ev_generator_manual_seed(ev_generator *gen, uint64_t seed);
/* Reads gen's state into *out (one consistent pair). Errors: EV_EINVAL (out
 * is NULL). Thread-safe; never blocks for long. */
EV_API int ev_generator_get_state(ev_generator *gen, ev_generator_state *out);
/* Replaces gen's state, so the calls that follow replay the values issued
 * after that state was read. Errors: EV_EINVAL (state is NULL, or its offset
 * is not a multiple of 4). Thread-safe. */
EV_API int ev_generator_set_state(ev_generator *gen, const ev_generator_state *state);

/* Uniform values in [0, 1) of a float dtype: float32 takes the top 24 bits
 * of one word (multiples of 2^-24), float64 the top 53 bits of two (multiples
 * of 2^-53). Errors: EV_ETYPE (bool or integer dtype), EV_EINVAL (invalid
 * dtype, bad shape), as for creation in tensor.h. */
EV_API int ev_rand(const ev_exec *ex, ev_generator *gen, ev_dtype dtype, int ndim,
                   const int64_t *shape, ev_tensor **out);
/* Standard normal values of a float dtype by the Box-Muller transform:
 * elements 2j and 2j+1 are r*cos(t) and r*sin(t) of pair j (block j of the
 * call), with r = sqrt(-2 log u1), u1 in (0, 1] (never log 0) and t = 2 pi
 * u2. float64: u1 = ((r1 >> 11) + 1) 2^-53 and u2 = (r2 >> 11) 2^-53, r1
 * and r2 the 64-bit values of words 0-1 and 2-3 (|z| <= 8.6). float32 is
 * computed in float32 from the high words of those: u1 = (w1 >> 1) 2^-31 +
 * 2^-33 rounded, u2 = (w3 >> 8) 2^-24 (|z| < 6.8), so it agrees with
 * float64 to float32 precision. log, sqrt, sin and cos are the kernel's own
 * (vectorized, within a few ulp of libm's; the same bits on every x86-64
 * CPU). No rejection, so each value stays a pure function of its counter.
 * Errors as ev_rand. */
EV_API int ev_randn(const ev_exec *ex, ev_generator *gen, ev_dtype dtype, int ndim,
                    const int64_t *shape, ev_tensor **out);
/* Integers uniform in [low, high) of an integer dtype. With n = high -
 * low (up to 2^64 - 1), a value is low + floor(r * n / 2^b) (Lemire's
 * multiply-high, without rejection, so counters stay fixed): r has b = 64
 * bits (w = 2) when n <= 2^32, else b = 128 bits (w = 4). The bias this
 * leaves is below n / 2^b relative per value: under 2^-32 when n <= 2^32 and
 * under 2^-64 otherwise, far below what any test of a sample can see.
 * Errors: EV_EINVAL (high <= low; low or high - 1 outside the dtype's
 * range; bad shape), EV_ETYPE (bool or float dtype). */
EV_API int ev_randint(const ev_exec *ex, ev_generator *gen, int64_t low, int64_t high,
                      ev_dtype dtype, int ndim, const int64_t *shape, ev_tensor **out);
/* Fills t in place with values uniform in [lo, hi): lo + (hi - lo) * u with u
 * as in ev_rand, computed in float64 and rounded to t's dtype, then kept
 * below hi (rounding could reach it); lo == hi fills lo. For float32 the
 * bounds are first rounded to float32. t must be a float tensor (EV_ETYPE)
 * and not expanded (EV_EINVAL); lo <= hi, both finite, hi - lo finite in
 * t's dtype (EV_EINVAL). Any strides: values follow t's C order. */
EV_API int ev_uniform_(const ev_exec *ex, ev_generator *gen, ev_tensor *t, double lo,
                       double hi);
/* Fills t in place with mean + std * z, z as in ev_randn. t as in
 * ev_uniform_; mean finite, std finite and >= 0 (EV_EINVAL). */
EV_API int ev_normal_(const ev_exec *ex, ev_generator *gen, ev_tensor *t, double mean,
                      double std);
/* A random permutation of 0 .. n-1 (n >= 0) as a 1-d tensor of an integer
 * dtype (n - 1 must fit it; EV_EINVAL), by a Fisher-Yates shuffle whose
 * draws are counter-indexed: for i = n-1 down to 1, position i swaps with j
 * = floor(r_i * (i + 1) / 2^64), r_i the 64-bit value of words 2i and 2i+1
 * (w = 2, bias below n / 2^64 per draw, no rejection). The result is a pure
 * function of (seed, offset, n), whichever worker runs it; the call advances
 * the offset by 2n rounded up to 4. Errors: EV_EINVAL (n < 0, too large,
 * out is NULL), EV_ETYPE (bool or a float dtype). */
EV_API int ev_randperm(const ev_exec *ex, ev_generator *gen, int64_t n, ev_dtype dtype,
                       ev_tensor **out);

/* ------------------------------------------------------ optimizer updates
 *
 * One step of an optimizer on one parameter as one instruction: it reads
 * grad and writes param and the optimizer's state buffers in a single pass
 * (PyTorch's single-tensor SGD, Adam and AdamW: the same formulas and the
 * same order of float operations, so the results agree with torch.optim's to
 * float32 rounding; PyTorch's vectorised loops fuse some multiply-adds, these
 * never do). Every float operation is done in the tensors' dtype, the scalar
 * hyperparameters converted to it first, as PyTorch's in-place ops do.
 *
 * param, grad and the buffers must all have one shape and one dtype,
 * float32 or float64 (EV_ETYPE otherwise); param must be dense (contiguous,
 * or a permutation of a contiguous layout such as a transpose) and every
 * other tensor laid out as param (the same strides), and no two of them may
 * share memory (EV_EINVAL, naming the argument and what was expected). The
 * hyperparameters are checked as torch.optim checks them (EV_EINVAL, naming
 * the value). An empty param issues nothing. The calls return at once: the
 * update runs after every earlier op on these tensors and before every later
 * one; the kernel itself cannot fail (a failed op before it poisons what it
 * writes, as for any op). Large parameters are split over the intra-op
 * threads. Thread-safe as other ops. */

/* SGD with momentum (PyTorch's _single_tensor_sgd), elementwise:
 *   g = maximize ? -grad : grad
 *   if weight_decay != 0:  g = g + weight_decay * param
 *   if momentum != 0:
 *       buf = first_step ? g : buf * momentum + (1 - dampening) * g
 *       g = nesterov ? g + momentum * buf : buf
 *   param = param + (-lr) * g
 * momentum_buf is required when momentum != 0 (first_step: it is only
 * written, so it may hold anything) and neither read nor written otherwise
 * (it may be NULL, and first_step is ignored). Errors: lr < 0, momentum < 0, weight_decay < 0, any of them
 * or dampening NaN, nesterov without momentum > 0 and dampening == 0. */
EV_API int ev_sgd_update_(const ev_exec *ex, ev_tensor *param, ev_tensor *grad,
                          ev_tensor *momentum_buf, double lr, double momentum, double dampening,
                          double weight_decay, int nesterov, int maximize, int first_step);

/* Adam, or AdamW when decoupled (PyTorch's _single_tensor_adam, not
 * capturable), elementwise, for step t >= 1 (the count of updates of this
 * param, this one included: the caller keeps it). The bias corrections are
 * computed on the calling thread in float64 as torch.optim computes them:
 * bc1 = 1 - beta1^t, bc2 = 1 - beta2^t, step_size = lr / bc1, bc2_sqrt =
 * bc2^0.5 (pow). Then
 *   g = maximize ? -grad : grad
 *   if weight_decay != 0:  decoupled ? param = param * (1 - lr * weight_decay)
 *                                    : g = g + weight_decay * param
 *   exp_avg = lerp(exp_avg, g, 1 - beta1)    (PyTorch's two-sided lerp)
 *   exp_avg_sq = exp_avg_sq * beta2 + ((1 - beta2) * g) * g
 *   if max_exp_avg_sq (amsgrad): max_exp_avg_sq = maximum(max_exp_avg_sq, exp_avg_sq)
 *                                (NaN propagates) and is used below instead
 *   denom = sqrt(exp_avg_sq) / bc2_sqrt + eps
 *   param = param + ((-step_size) * exp_avg) / denom
 * max_exp_avg_sq may be NULL (no amsgrad). Errors: lr < 0, eps < 0,
 * weight_decay < 0, beta1 or beta2 outside [0, 1), any of them NaN,
 * step < 1. */
EV_API int ev_adam_update_(const ev_exec *ex, ev_tensor *param, ev_tensor *grad,
                           ev_tensor *exp_avg, ev_tensor *exp_avg_sq, ev_tensor *max_exp_avg_sq,
                           int64_t step, double lr, double beta1, double beta2, double eps,
                           double weight_decay, int decoupled, int maximize);

/* The same updates for n parameters (0 <= n <= 13000) as one instruction,
 * the multi-tensor form (what torch.optim calls foreach): entry i of each
 * array belongs to parameter i and is checked as one update's arguments are
 * (a failure names the index); the hyperparameters are shared, first_steps
 * (SGD; NULL: none) and steps (Adam) are per parameter. momentum_bufs may be
 * NULL when momentum is 0, max_exp_avg_sqs without amsgrad. The results are
 * those of n calls of the one-parameter form, bit for bit; but as the
 * updates run at once, no tensor an update writes may overlap any tensor of
 * another parameter (EV_EINVAL: a parameter listed twice, say). The elements
 * of all the parameters are split over the intra-op threads end to end, so
 * many small parameters use the cores as one large one does. n == 0 (or
 * only empty parameters) issues nothing. Errors as the one-parameter forms,
 * and EV_ENOMEM. */
EV_API int ev_sgd_update_multi_(const ev_exec *ex, int n, ev_tensor *const *params,
                                ev_tensor *const *grads, ev_tensor *const *momentum_bufs,
                                const int *first_steps, double lr, double momentum,
                                double dampening, double weight_decay, int nesterov,
                                int maximize);
EV_API int ev_adam_update_multi_(const ev_exec *ex, int n, ev_tensor *const *params,
                                 ev_tensor *const *grads, ev_tensor *const *exp_avgs,
                                 ev_tensor *const *exp_avg_sqs,
                                 ev_tensor *const *max_exp_avg_sqs, const int64_t *steps,
                                 double lr, double beta1, double beta2, double eps,
                                 double weight_decay, int decoupled, int maximize);

#ifdef __cplusplus
}
#endif
#endif
