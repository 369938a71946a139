/* The debug check (EAGERVM_DISTRIBUTED_DEBUG=1): before each collective the
 * ranks all-gather its descriptor on a communicator of their own and compare
 * them, so a desync fails with every rank's collective and line instead of
 * hanging or mixing up buffers. Also the descriptors' formatting. Built only
 * with MPI. */
#include <stdio.h>
#include <string.h>

#include "distributed/dist-impl.h"

void ev__coll_desc_site(ev__coll_desc *d, const ev_site *site)
{
    const char *file = site && site->file ? site->file : "?";
    size_t len = strlen(file);
    /* The end of a long path says more than its start. */
    if (len >= sizeof d->file) {
        file += len - (sizeof d->file - 1);
    }
    snprintf(d->file, sizeof d->file, "%s", file);
    d->line = site ? site->line : 0;
}

char *ev__coll_desc_str(const ev__coll_desc *d, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s", ev_coll_name(d->kind));
    if (d->dtype >= 0 && n >= 0 && (size_t)n < size) {
        char s[EV__SHAPE_STR_SIZE];
        n += snprintf(buf + n, size - (size_t)n, " %s%s", ev_dtype_name((ev_dtype)d->dtype),
                      ev__shape_str(d->ndim, d->shape, s, sizeof s));
    }
    if (d->op >= 0 && n >= 0 && (size_t)n < size) {
        n += snprintf(buf + n, size - (size_t)n, " op=%s", ev_dist_op_name(d->op));
    }
    if (d->root >= 0 && n >= 0 && (size_t)n < size) {
        n += snprintf(buf + n, size - (size_t)n, " src=%d", d->root);
    }
    if (n >= 0 && (size_t)n < size) {
        snprintf(buf + n, size - (size_t)n, " at %s:%d", d->file, d->line);
    }
    return buf;
}

int ev__check_start(ev_pg *pg, const ev__coll_desc *mine, ev__coll_desc *gathered,
                    MPI_Request *req)
{
    return MPI_Iallgather(mine, (int)sizeof *mine, MPI_BYTE, gathered, (int)sizeof *mine,
                          MPI_BYTE, pg->check, req);
}

/* 1 if two ranks' descriptors name the same collective (the site may
 * differ: ranks may issue it from different lines). */
static int same(const ev__coll_desc *a, const ev__coll_desc *b)
{
    if (a->seq != b->seq || a->kind != b->kind || a->op != b->op || a->root != b->root ||
        a->dtype != b->dtype || a->ndim != b->ndim) {
        return 0;
    }
    return memcmp(a->shape, b->shape, sizeof a->shape[0] * (size_t)a->ndim) == 0;
}

int ev__check_compare(const ev_pg *pg, const ev__coll_desc *gathered, char *buf, size_t size)
{
    int ok = 1;
    for (int r = 1; r < pg->size && ok; r++) {
        ok = same(&gathered[0], &gathered[r]);
    }
    if (ok) {
        return 0;
    }
    const ev__coll_desc *mine = &gathered[pg->rank];
    int n = snprintf(buf, size, "collective %llu differs across ranks:",
                     (unsigned long long)mine->seq);
    for (int r = 0; r < pg->size && n >= 0 && (size_t)n < size; r++) {
        char d[256];
        n += snprintf(buf + n, size - (size_t)n, "%s rank %d %s", r ? ";" : "", r,
                      ev__coll_desc_str(&gathered[r], d, sizeof d));
    }
    return EV_ESTATE;
}
