/* Status names, the per-task state (the last-error message, TORX_VERBOSE),
 * and start-up logging. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "pkt_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TORXP_LOGLINE_BYTES 1024

/* One state per thread on the host: errors raised in a communication thread
 * must not overwrite the one the application thread is about to read. A
 * device that runs many tasks in one thread hooks in its own per task. */
static _Thread_local torxp_task_state_t thread_state = {.verbose = TORXP_VERBOSE_UNREAD};
/* Set once before any task runs (or by tests, between jobs): relaxed
 * atomics suffice, nothing else rides on it. */
static TORXP_PROCESS_WIDE torxp_task_state_t *(*task_state_hook)(void);

torxp_task_state_t *torxp_task_state(void)
{
    torxp_task_state_t *(*hook)(void) = __atomic_load_n(&task_state_hook, __ATOMIC_RELAXED);
    /* NULL from the hook: no task of the device runs now (between sim
     * jobs, or a process forked after one), so the thread's own */
    torxp_task_state_t *ts = hook ? hook() : NULL;
    return ts ? ts : &thread_state;
}

void torxp_set_task_state_hook(torxp_task_state_t *(*hook)(void))
{
    __atomic_store_n(&task_state_hook, hook, __ATOMIC_RELAXED);
}

const char *torx_status_str(torx_status_t status)
{
    switch (status) {
    case TORX_OK:
        return "TORX_OK";
    case TORX_AGAIN:
        return "TORX_AGAIN";
    case TORX_NO_ROOM:
        return "TORX_NO_ROOM";
    case TORX_ERR_INVAL:
        return "TORX_ERR_INVAL";
    case TORX_ERR_NOMEM:
        return "TORX_ERR_NOMEM";
    case TORX_ERR_SYS:
        return "TORX_ERR_SYS";
    case TORX_ERR_ENV:
        return "TORX_ERR_ENV";
    case TORX_ERR_PEER:
        return "TORX_ERR_PEER";
    case TORX_ERR_PROTO:
        return "TORX_ERR_PROTO";
    case TORX_ERR_UNSUPPORTED:
        return "TORX_ERR_UNSUPPORTED";
    case TORX_ERR_TRUNCATE:
        return "TORX_ERR_TRUNCATE";
    }
    return "TORX_UNKNOWN_STATUS";
}

const char *torx_last_error(void)
{
    return torxp_task_state()->last_error;
}

torx_status_t torxp_error(torx_status_t status, const char *fmt, ...)
{
    /* Format into a scratch buffer first: callers may pass torx_last_error()
     * itself as an argument to wrap a lower layer's message, and vsnprintf
     * into an overlapping buffer is undefined. errno is preserved so a caller
     * can still report it after recording the message. */
    int saved_errno = errno;
    char tmp[TORXP_ERRMSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        snprintf(tmp, sizeof tmp, "torx: (unformattable error message '%s')", fmt);
    memcpy(torxp_task_state()->last_error, tmp, sizeof tmp);
    errno = saved_errno;
    return status;
}

/* TORX_VERBOSE for logs that have no device yet, read once per task (per
 * thread on the host). Parsed quietly (a bad value means 0): logging must
 * not overwrite the caller's last error, and torx_pkt_open reports bad
 * values properly. TORX_VERBOSE=-1 silences even warnings (test suites
 * that count stderr lines as failures). */
static int verbose_from_env(void)
{
    torxp_task_state_t *ts = torxp_task_state();
    int v = ts->verbose;
    if (v != TORXP_VERBOSE_UNREAD)
        return v;
    v = 0;
    const char *s = getenv("TORX_VERBOSE");
    if (s && *s) {
        char *end;
        errno = 0;
        long l = strtol(s, &end, 10);
        if (errno == 0 && *end == '\0' && l >= -1 && l <= 3)
            v = (int)l;
    }
    ts->verbose = v;
    return v;
}

void torxp_log(const torx_pkt_dev_t *dev, int level, const char *fmt, ...)
{
    int verbose = dev ? dev->verbose : verbose_from_env();
    if (level > verbose)
        return;
    int saved_errno = errno;
    char line[TORXP_LOGLINE_BYTES];
    int off = dev ? snprintf(line, sizeof line, "torx[%d]: ", dev->rank)
                  : snprintf(line, sizeof line, "torx[?]: ");
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + off, sizeof line - (size_t)off - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    size_t len = (size_t)off + (size_t)n;
    if (len > sizeof line - 2)
        len = sizeof line - 2; /* truncated: keep room for the newline */
    line[len++] = '\n';
    /* One write per line, so lines of many tasks sharing stderr do not
     * interleave mid-line. A failed log write has nowhere to be reported. */
    const char *p = line;
    while (len > 0) {
        ssize_t w = write(STDERR_FILENO, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        p += w;
        len -= (size_t)w;
    }
    errno = saved_errno;
}

torx_status_t torxp_dev_fail(torx_pkt_dev_t *dev, torx_status_t st, const char *fmt, ...)
{
    char msg[TORXP_ERRMSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (dev->failed == TORX_OK) {
        dev->failed = st;
        torxp_error(st, "torx: %s", msg);
        torxp_log(dev, 0, "%s; the device cannot go on", msg);
    }
    return st;
}

void torxp_dev_malformed(torx_pkt_dev_t *dev, const char *fmt, ...)
{
    char msg[TORXP_ERRMSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dev->malformed++;
    torxp_error(TORX_ERR_PROTO, "torx: protocol error: %s; dropped", msg);
    torxp_log(dev, 0, "protocol error: %s; dropped", msg);
}

#ifdef TORX_FAULT_INJECTION
/* Fault injection (tests only; see pkt_internal.h). The variables are read
 * once, strictly; the counters are atomic because co mode's thread
 * allocates and injects too. They stay process-wide, not per task
 * (torxp_task_state): a device that runs many tasks in one process counts
 * the calls of all of them together, which the fault tests (one task per
 * process) never meet. */
static const char *const fault_vars[TORXP_FAULT_KINDS] = {"TORX_FAULT_ALLOC", "TORX_FAULT_INJECT"};
static unsigned long fault_calls[TORXP_FAULT_KINDS];

unsigned long torxp_fault_calls(int kind)
{
    return __atomic_load_n(&fault_calls[kind], __ATOMIC_RELAXED);
}

bool torxp_fault(int kind)
{
    static long fail_at[TORXP_FAULT_KINDS];
    static pid_t read_by; /* the process that read the variables: a forked
                           * task counts its own calls, with its own settings */
    if (__atomic_load_n(&read_by, __ATOMIC_ACQUIRE) != getpid()) {
        for (int k = 0; k < TORXP_FAULT_KINDS; k++)
            __atomic_store_n(&fault_calls[k], 0, __ATOMIC_RELAXED);
        for (int k = 0; k < TORXP_FAULT_KINDS; k++) {
            long v = 0;
            const char *s = getenv(fault_vars[k]);
            char *end;
            /* Not torx_env_int: that records errors, and this runs inside
             * other calls. A bad value is a loud test setup error. */
            if (s && *s && ((v = strtol(s, &end, 10)) < 0 || *end)) {
                fprintf(stderr, "torx: %s='%s' is not a count\n", fault_vars[k], s);
                abort();
            }
            fail_at[k] = v;
        }
        __atomic_store_n(&read_by, getpid(), __ATOMIC_RELEASE);
    }
    const unsigned long n = __atomic_add_fetch(&fault_calls[kind], 1, __ATOMIC_RELAXED);
    if (fail_at[kind] <= 0 || n != (unsigned long)fail_at[kind])
        return false;
    torxp_log(NULL, 0, "fault injection: failing %s call %lu (%s)",
              kind == TORXP_FAULT_ALLOC ? "allocation" : "injection", n, fault_vars[kind]);
    return true;
}
#endif

/* What a failing task tells the others in a start-up vote. */
typedef struct vote_why {
    char host[64];
    char msg[384];
} vote_why_t;

torx_status_t torxp_boot_vote(torx_boot_t *boot, torx_status_t mine, const char *what)
{
    const int n = boot->size;
    int32_t my_status = mine;
    int32_t *statuses = torxp_calloc((size_t)n, sizeof *statuses);
    if (!statuses)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory for the start-up vote");
    torx_status_t brc = boot->allgather(boot, &my_status, statuses, sizeof my_status);
    int failed = -1;
    for (int r = 0; brc == TORX_OK && r < n && failed < 0; r++)
        if (statuses[r] != TORX_OK)
            failed = r;
    free(statuses);
    if (brc != TORX_OK)
        return mine != TORX_OK ? mine : brc;
    if (failed < 0)
        return TORX_OK;
    /* Somebody failed: every task takes part in one more allgather, of the
     * failing tasks' hosts and messages, so each names the first of them
     * with its own words (a task's stderr may be lost with its launcher). */
    vote_why_t my_why;
    memset(&my_why, 0, sizeof my_why);
    if (gethostname(my_why.host, sizeof my_why.host - 1) != 0)
        snprintf(my_why.host, sizeof my_why.host, "?");
    if (mine != TORX_OK) {
        const char *m = torx_last_error();
        if (!strncmp(m, "torx: ", 6))
            m += 6;
        memcpy(my_why.msg, m, strnlen(m, sizeof my_why.msg - 1)); /* a task's words, cut */
    }
    vote_why_t *whys = torxp_calloc((size_t)n, sizeof *whys);
    const torx_status_t wrc =
        whys ? boot->allgather(boot, &my_why, whys, sizeof my_why) : TORX_ERR_NOMEM;
    if (mine == TORX_OK) { /* a failing task keeps its own message */
        if (wrc == TORX_OK)
            torxp_error(TORX_ERR_PEER, "torx: rank %d on host %.63s failed to %s: %.383s", failed,
                        whys[failed].host, what,
                        whys[failed].msg[0] ? whys[failed].msg : "(no message)");
        else
            torxp_error(TORX_ERR_PEER, "torx: rank %d failed to %s (see its message)", failed,
                        what);
    }
    free(whys);
    return mine != TORX_OK ? mine : TORX_ERR_PEER;
}
