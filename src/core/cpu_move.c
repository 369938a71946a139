/* Moving the calling thread off the CPU it runs on (see ev__move_off_cpu in
 * internal.h): a worker that finds the peer it waits for queued on its own
 * CPU gets out of the peer's way. */
#include <sched.h>

#define EV_ENGINE_INTERNALS /* a file of the engine (or its test) */
#include "core/internal.h"

bool ev__move_off_cpu(void)
{
    int me = sched_getcpu();
    cpu_set_t allowed, others;
    if (me < 0 || sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        return false;
    }
    others = allowed;
    CPU_CLR(me, &others);
    if (CPU_COUNT(&others) == 0 || sched_setaffinity(0, sizeof others, &others) != 0) {
        return false;
    }
    /* The kernel moved us before returning; now free to go anywhere again
     * (should this fail, as when a cpuset shrinks meanwhile, the thread
     * keeps every CPU but one). */
    sched_setaffinity(0, sizeof allowed, &allowed);
    return true;
}
