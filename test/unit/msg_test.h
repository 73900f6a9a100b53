/* Helpers shared by the message-layer tests (test_msg*.c). */
#ifndef TORX_TEST_MSG_H
#define TORX_TEST_MSG_H

#include <torx/msg.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Every test message's header: who sent it, and its place in the sender's
 * sequence, so receivers check order per sender. */
typedef struct test_hdr {
    uint32_t sender;
    uint32_t seq;
} test_hdr_t;

/* Byte i of message seq from sender: varies with all three, and with i's
 * higher bits, so a misplaced 256-byte block shows. */
static inline uint8_t test_pattern(uint32_t sender, uint32_t seq, size_t i)
{
    return (uint8_t)(i * 131u + (i >> 8) * 17u + seq * 7u + sender * 29u);
}

/* Records a failure inside a handler or callback, where a task cannot
 * return; the task checks r->errors at the end. Prints the first few. */
#define RUN_CHECK(r, cond, ...)                                                                   \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            if ((r)->errors++ < 10) {                                                             \
                fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);          \
                fprintf(stderr, __VA_ARGS__);                                                     \
                fputc('\n', stderr);                                                              \
            }                                                                                     \
        }                                                                                         \
    } while (0)

static inline void test_bump(void *arg)
{
    ++*(int *)arg;
}

/* A send done callback counting into an int. */
static inline void test_count_msg(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)ctx;
    (void)msg;
    ++*(int *)arg;
}

#endif
