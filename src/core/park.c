/* Parking and waking threads on a 32-bit word (Linux futex). */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define EV_ENGINE_INTERNALS /* a file of the engine (or its test) */
#include "core/internal.h"

void ev__park(_Atomic uint32_t *word, uint32_t expected, int64_t timeout_ns)
{
    struct timespec ts, *tsp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = timeout_ns / 1000000000;
        ts.tv_nsec = timeout_ns % 1000000000;
        tsp = &ts;
    }
    /* The kernel compares *word with expected atomically with going to sleep,
     * so a wake between our check and this call is not lost. */
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, tsp, NULL, 0);
}

void ev__wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

void ev__wake_one(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void ev__lock_slow(ev__lock *l)
{
    for (int i = 0; i < 200; i++) {
        uint32_t free_state = 0;
        if (atomic_load_explicit(&l->state, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&l->state, &free_state, 1,
                                                  memory_order_acquire, memory_order_relaxed)) {
            return;
        }
        ev__cpu_relax();
    }
    atomic_fetch_add_explicit(&l->waiters, 1, memory_order_seq_cst);
    for (;;) {
        uint32_t free_state = 0;
        if (atomic_compare_exchange_strong_explicit(&l->state, &free_state, 1,
                                                    memory_order_acquire, memory_order_relaxed)) {
            break;
        }
        /* 1 ms at most: an unlock that read `waiters` before our count was
         * visible does not wake us (see ev__lock_release). */
        ev__park(&l->state, 1, 1000000);
    }
    atomic_fetch_sub_explicit(&l->waiters, 1, memory_order_relaxed);
}
