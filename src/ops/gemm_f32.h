/* Internal contract of our float32 gemm (gemm_f32.c): C = A B + beta C for
 * operands of any element strides (row-major, transposed, sliced), with an
 * AVX-512 micro-kernel on packed panels. The file depends on nothing else
 * of the library (libc only), so tests and benchmarks build it directly;
 * the caller brings the packing workspace and, for threads, runs the tasks
 * of a grid (ev__sgemm_grid) wherever it likes.
 *
 * Reproducibility: every element of C is summed in the same order whatever
 * the grid, the task that computes it or the thread count (k is cut into
 * blocks that depend on k alone; each block is summed from 0 in order and
 * added to C in order), so results are bit-identical across thread counts
 * and partitions, on every CPU that runs the AVX-512 kernel. */
#ifndef EV_GEMM_F32_H
#define EV_GEMM_F32_H

#include <stddef.h>
#include <stdint.h>

/* One product. Pointers are borrowed for the call. Strides are in elements
 * and may be anything (a dimension of size 1 may have any stride); A and B
 * are read only, C (row-major, column stride 1, row stride ldc >= n when
 * m > 1) is written, and read only if beta != 0. C must not overlap A or
 * B. */
typedef struct ev__sgemm {
    int64_t m, n, k;            /* C is m x n, A is m x k, B is k x n */
    const float *a;             /* borrowed; may be NULL when k == 0 */
    int64_t a_rs, a_cs;         /* A[i][p] = a[i * a_rs + p * a_cs] */
    const float *b;             /* borrowed; may be NULL when k == 0 */
    int64_t b_rs, b_cs;         /* B[p][j] = b[p * b_rs + j * b_cs] */
    float *c;                   /* borrowed */
    int64_t ldc;                /* C[i][j] = c[i * ldc + j] */
    float beta;                 /* 0: C's old values are never read (NaN ok) */
    int upper;                  /* 1: only C[i][j] with j >= i is wanted (a Gram
                                 * matrix, mirrored by the caller): tiles wholly
                                 * below the diagonal are skipped, the others
                                 * written whole */
} ev__sgemm;

/* How a product is cut into tasks: rows x cols tiles of C, each of at most
 * rows_per x cols_per elements (multiples of the micro-tile), numbered row-
 * major. Fixed by ev__sgemm_grid; any task may run on any thread. */
typedef struct ev__sgemm_grid {
    int64_t rows, cols;         /* tasks along C's rows and columns */
    int64_t rows_per, cols_per; /* C rows / columns per task (the last may be short) */
} ev__sgemm_grid;

/* 1 if this CPU runs the AVX-512 kernel (checked once; thread-safe). Without
 * it the other entry points must not be called. */
int ev__sgemm_supported(void);

/* Cuts g into at most max_tasks tasks (>= 1) that keep the packing each one
 * repeats small; one task when max_tasks is 1 or the product is small. */
ev__sgemm_grid ev__sgemm_grid_for(const ev__sgemm *g, int max_tasks);

/* Floats of workspace one task of g on grid needs (64-byte aligned, not
 * shared between tasks running at once); grid NULL: the single task of
 * ev__sgemm_run. */
size_t ev__sgemm_work_floats(const ev__sgemm *g, const ev__sgemm_grid *grid);

/* Computes task t (0 <= t < rows * cols) of grid: its tile of C, over all
 * of k. work: ev__sgemm_work_floats(g) floats, 64-byte aligned. */
void ev__sgemm_task(const ev__sgemm *g, const ev__sgemm_grid *grid, int64_t t, float *work);

/* The whole product on the calling thread (one task). */
void ev__sgemm_run(const ev__sgemm *g, float *work);

#endif
