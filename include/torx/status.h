/* torx status codes, shared by every layer of libtorx.
 *
 * Non-negative values are not errors: TORX_AGAIN ("nothing yet, call again")
 * and TORX_NO_ROOM ("a FIFO is full, nothing was taken, retry later") are
 * ordinary flow control. Negative values are errors; torx_last_error() then
 * holds a sentence naming what was wrong (the variable and value, the file and
 * line, the system call and its errno text).
 */
#ifndef TORX_STATUS_H
#define TORX_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum torx_status {
    TORX_OK = 0,
    TORX_AGAIN = 1,           /* not complete yet / nothing to read */
    TORX_NO_ROOM = 2,         /* FIFO full: nothing taken, retry later */
    TORX_ERR_INVAL = -1,      /* bad argument */
    TORX_ERR_NOMEM = -2,      /* out of memory (or /dev/shm space) */
    TORX_ERR_SYS = -3,        /* a system call failed */
    TORX_ERR_ENV = -4,        /* bad TORX_* environment value */
    TORX_ERR_PEER = -5,       /* a peer task is missing or dead */
    TORX_ERR_PROTO = -6,      /* tasks disagree (e.g. mismatched collective op) */
    TORX_ERR_UNSUPPORTED = -7, /* not available on this device or build */
    TORX_ERR_TRUNCATE = -8     /* a message was longer than its receive buffer */
} torx_status_t;

/* NAME     torx_status_str - the name of a status code
 * DESCRIPTION
 *   The constant's name for status, e.g. "TORX_NO_ROOM", for messages.
 * RETURN VALUE
 *   A static string; "TORX_UNKNOWN_STATUS" for a value outside the enum.
 * SEE ALSO torx_last_error
 */
const char *torx_status_str(torx_status_t status);

/* NAME     torx_last_error - what the last error was about
 * DESCRIPTION
 *   The detailed message (at most 511 characters) of the last error libtorx
 *   raised in the calling thread: each thread has its own, so the co-mode
 *   thread never overwrites the application's.
 * RETURN VALUE
 *   The message, or "" when no error was raised in this thread yet.
 * NOTES
 *   Successful calls do not clear it, and any later libtorx call may
 *   replace it: read it right after the call that returned the error.
 * SEE ALSO torx_status_str
 */
const char *torx_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* TORX_STATUS_H */
