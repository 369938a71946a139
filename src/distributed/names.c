/* The names of reduction ops and collectives, in every build (with MPI or
 * without), from the X-macro lists of distributed.h. */
#include "eagervm/distributed.h"

const char *ev_dist_op_name(int op)
{
    static const char *const names[] = {
#define EV_DIST_OP_NAME(id, name) name,
        EV_DIST_OP_MAP(EV_DIST_OP_NAME)
#undef EV_DIST_OP_NAME
    };
    _Static_assert(sizeof names / sizeof names[0] == EV_DIST_OP_COUNT, "one name per op");
    return op >= 0 && op < EV_DIST_OP_COUNT ? names[op] : "invalid";
}

const char *ev_coll_name(int kind)
{
    static const char *const names[] = {
#define EV_COLL_NAME(id, name) name,
        EV_COLL_MAP(EV_COLL_NAME)
#undef EV_COLL_NAME
    };
    _Static_assert(sizeof names / sizeof names[0] == EV_COLL_COUNT, "one name per kind");
    return kind >= 0 && kind < EV_COLL_COUNT ? names[kind] : "invalid";
}
