/* ev__move_off_cpu (src/core/cpu_move.c): a thread allowed on several CPUs
 * ends up on another one and with its affinity as it was; a thread allowed
 * on one CPU stays where it is. */
#include <pthread.h>
#include <sched.h>
#include <string.h>

#define EV_ENGINE_INTERNALS /* a file of the engine (or its test) */
#include "core/internal.h"
#include "test.h"

static void test_moves_and_restores_affinity(void)
{
    cpu_set_t before, after;
    CHECK_EQ(sched_getaffinity(0, sizeof before, &before), 0);
    if (CPU_COUNT(&before) < 2) {
        printf("   (one CPU allowed: nothing to move to)\n");
        CHECK(!ev__move_off_cpu());
        return;
    }
    int moved_away = 0;
    for (int i = 0; i < 20; i++) {
        int cpu = sched_getcpu();
        CHECK(ev__move_off_cpu());
        /* Right after the call the thread runs where it was sent; the
         * scheduler may move it back later, so count, don't insist. */
        moved_away += sched_getcpu() != cpu;
        CHECK_EQ(sched_getaffinity(0, sizeof after, &after), 0);
        CHECK(CPU_EQUAL(&before, &after));
    }
    CHECK(moved_away > 0);
}

static void test_single_cpu_stays(void)
{
    cpu_set_t before, one, after;
    CHECK_EQ(sched_getaffinity(0, sizeof before, &before), 0);
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    CHECK_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    CHECK(!ev__move_off_cpu());
    CHECK_EQ(sched_getaffinity(0, sizeof after, &after), 0);
    CHECK(CPU_EQUAL(&one, &after));
    CHECK_EQ(sched_setaffinity(0, sizeof before, &before), 0);
}

int main(void)
{
    RUN_TEST(test_moves_and_restores_affinity);
    RUN_TEST(test_single_cpu_stays);
    return 0;
}
