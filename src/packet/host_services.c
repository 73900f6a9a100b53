/* Time, waiting and threads for the layers above the devices
 * (pkt_internal.h, docs/packet-layer.md#time-waiting-and-threads): each
 * call takes dev's op when it has one (sim), else the host's own, here.
 * The clocks are inline in pkt_internal.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "pkt_internal.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static struct timespec ts_of_ns(uint64_t ns)
{
    return (struct timespec){.tv_sec = (time_t)(ns / 1000000000u),
                             .tv_nsec = (long)(ns % 1000000000u)};
}

void torxp_nap(torx_pkt_dev_t *dev, uint64_t ns)
{
    if (dev && dev->ops->nap) {
        dev->ops->nap(dev, ns);
        return;
    }
    struct timespec left = ts_of_ns(ns);
    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
}

void torxp_yield(torx_pkt_dev_t *dev)
{
    if (dev && dev->ops->yield) {
        dev->ops->yield(dev);
        return;
    }
    sched_yield();
}

torx_status_t torxp_word_wait(torx_pkt_dev_t *dev, uint32_t *word, uint32_t expected,
                              int64_t timeout_ns)
{
    if (dev && dev->ops->word_wait)
        return dev->ops->word_wait(dev, word, expected, timeout_ns);
    const int saved_errno = errno;
    struct timespec ts;
    if (timeout_ns >= 0)
        ts = ts_of_ns((uint64_t)timeout_ns);
    /* FUTEX_WAIT's timeout is relative. EAGAIN: the word differs; EINTR: a
     * signal, a spurious wake the caller's recheck absorbs. */
    const long r = syscall(SYS_futex, word, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, expected,
                           timeout_ns >= 0 ? &ts : NULL, NULL, 0);
    const int timed_out = r != 0 && errno == ETIMEDOUT;
    errno = saved_errno;
    return timed_out ? TORX_AGAIN : TORX_OK;
}

torx_status_t torxp_room_wait(torx_pkt_dev_t *dev, uint32_t *word, uint32_t expected,
                              int64_t timeout_ns)
{
    if (dev && dev->ops->room_wait)
        return dev->ops->room_wait(dev, word, expected, timeout_ns);
    torxp_yield(dev);
    return TORX_OK;
}

void torxp_word_wake(torx_pkt_dev_t *dev, uint32_t *word)
{
    if (dev && dev->ops->word_wake) {
        dev->ops->word_wake(dev, word);
        return;
    }
    syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL, NULL, 0);
}

torx_status_t torxp_thread_start(torx_pkt_dev_t *dev, torxp_thread_t *thread, void *(*fn)(void *),
                                 void *arg)
{
    if (dev && dev->ops->thread_start)
        return dev->ops->thread_start(dev, thread, fn, arg);
    thread->dev_thread = NULL;
    /* The thread takes no signals: they belong to the application's
     * threads. It inherits the mask in force while it is created. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    const int err = pthread_create(&thread->pthread, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err)
        return torxp_error(TORX_ERR_SYS, "torx: pthread_create: %s", strerror(err));
    return TORX_OK;
}

void torxp_thread_join(torx_pkt_dev_t *dev, torxp_thread_t *thread)
{
    if (dev && dev->ops->thread_join) {
        dev->ops->thread_join(dev, thread);
        return;
    }
    pthread_join(thread->pthread, NULL);
}
