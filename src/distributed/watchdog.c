/* The collective timeout's heartbeats and report: when a rank starts
 * collective k it sends k's descriptor to every peer (non-blocking, on a
 * communicator of its own); polls drain what arrived. A collective that
 * waits past EAGERVM_COLLECTIVE_TIMEOUT then names the ranks that have not
 * joined it and the last collective each started. Built only with MPI. */
#include <stdio.h>
#include <string.h>

#include "distributed/dist-impl.h"

#define BEAT_TAG 7
/* Sends in flight past which new heartbeats are dropped: a peer that
 * receives nothing (lost, or far behind) must not make the list grow. */
#define BEATS_MAX 256

/* Frees the sends that finished, oldest first. */
static void beat_reap(ev_pg *pg)
{
    ev__beat **link = &pg->beats;
    while (*link) {
        ev__beat *b = *link;
        int done = 0;
        if (MPI_Testall(b->n_reqs, b->reqs, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
            done = 1; /* a failed send is finished too */
        }
        if (done) {
            *link = b->next;
            ev__free(b);
            pg->n_beats--;
        } else {
            link = &b->next;
        }
    }
}

void ev__beat_send(ev_pg *pg, const ev__coll_desc *d)
{
    pg->last[pg->rank] = *d;
    beat_reap(pg);
    if (pg->size < 2 || (pg->n_beats >= BEATS_MAX && !d->skipped)) {
        return; /* a skip is news the peers need: it always goes */
    }
    ev__beat *b = ev__malloc(sizeof *b + sizeof(MPI_Request) * (size_t)(pg->size - 1));
    if (!b) {
        return; /* only the report loses this one */
    }
    b->msg = *d;
    b->n_reqs = 0;
    for (int p = 0; p < pg->size; p++) {
        if (p != pg->rank &&
            MPI_Isend(&b->msg, (int)sizeof b->msg, MPI_BYTE, p, BEAT_TAG, pg->beat,
                      &b->reqs[b->n_reqs]) == MPI_SUCCESS) {
            b->n_reqs++;
        }
    }
    b->next = pg->beats;
    pg->beats = b;
    pg->n_beats++;
}

void ev__beat_drain(ev_pg *pg)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, BEAT_TAG, pg->beat, &flag, &st) != MPI_SUCCESS ||
            !flag) {
            return;
        }
        ev__coll_desc d;
        if (MPI_Recv(&d, (int)sizeof d, MPI_BYTE, st.MPI_SOURCE, BEAT_TAG, pg->beat,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            return;
        }
        /* Messages of one sender arrive in order; keep the latest anyway. */
        if (st.MPI_SOURCE < 0 || st.MPI_SOURCE >= pg->size) {
            continue;
        }
        d.file[sizeof d.file - 1] = '\0';
        if (d.seq > pg->last[st.MPI_SOURCE].seq) {
            pg->last[st.MPI_SOURCE] = d;
        }
        if (d.skipped && !pg->peer_skipped) {
            pg->peer_skipped = 1;
            pg->skip = d;
            pg->skip_rank = st.MPI_SOURCE;
        }
    }
}

void ev__beat_free_all(ev_pg *pg)
{
    if (pg->beats) {
        beat_reap(pg);
    }
    while (pg->beats) {
        ev__beat *b = pg->beats;
        pg->beats = b->next;
        /* An unfinished send to a lost peer: let MPI drop it. */
        for (int i = 0; i < b->n_reqs; i++) {
            if (b->reqs[i] != MPI_REQUEST_NULL) {
                MPI_Request_free(&b->reqs[i]);
            }
        }
        ev__free(b);
    }
    pg->n_beats = 0;
}

char *ev__timeout_report(ev_pg *pg, const ev__coll_desc *d, double waited_s, char *buf,
                         size_t size)
{
    ev__beat_drain(pg);
    char s[256];
    int n = snprintf(buf, size, "rank %d: collective %llu (%s) timed out after %.1f s "
                     "(EAGERVM_COLLECTIVE_TIMEOUT=%g):", pg->rank, (unsigned long long)d->seq,
                     ev__coll_desc_str(d, s, sizeof s), waited_s, pg->timeout_s);
    int missing = 0;
    for (int p = 0; p < pg->size && n >= 0 && (size_t)n < size; p++) {
        const ev__coll_desc *l = &pg->last[p];
        if (p == pg->rank || l->seq >= d->seq) {
            continue;
        }
        const char *sep = missing++ ? ";" : " ranks that have not joined it:";
        if (l->seq == 0) {
            n += snprintf(buf + n, size - (size_t)n, "%s rank %d (no collective heard of)", sep,
                          p);
        } else {
            n += snprintf(buf + n, size - (size_t)n, "%s rank %d (last started collective "
                          "%llu: %s)", sep, p, (unsigned long long)l->seq,
                          ev__coll_desc_str(l, s, sizeof s));
        }
    }
    if (!missing && n >= 0 && (size_t)n < size) {
        snprintf(buf + n, size - (size_t)n, " every rank started it, but it did not complete "
                 "(a rank may have died after starting it)");
    }
    fprintf(stderr, "eagervm: %s\n", buf);
    fflush(stderr);
    return buf;
}
