/* Parking and waking threads on a 32-bit word (Linux futex). */
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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
