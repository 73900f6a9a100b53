/* sim_globals: a program's globals stay its own task's under torx-sim
 * (docs/sim.md#how-a-job-runs). Every task keeps its rank in a global;
 * every other task sends rank 0 a few multi-packet messages, and rank 0
 * answers each. Answering wakes a sender, and the wake lets other tasks run
 * in the middle of rank 0's call, so this checks that rank 0 gets its own
 * globals back before its callbacks read them. It also checks the opposite
 * for libtorx's process-wide section (torx_process), which this program
 * holds, libtorx being linked into it: every task counts itself there, and
 * rank 0, which hears from every other task, must see them all. Prints
 * "sim_globals: ok" or names what went wrong. Runs under mpiexec too (one
 * task a process: the count is 1).
 *
 *   sim_globals [BYTES]
 */
#include <torx/msg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H_PING 1
#define H_PONG 2
#define ROUNDS 4
#define MAX_BYTES 16384 /* the message size, bytes: the argument, 2000 by default */

#define MAX_TASKS 64

static int my_rank = -1;                        /* the global under test */
static int wrong_seen;                          /* callbacks that read another task's my_rank */
static int pings;                               /* rank 0: pings received */
static volatile int ping_in, pong_in, was_sent; /* flags for torx_wait */
static int pending[MAX_TASKS];                  /* rank 0: pings to answer, by sender */
static char buf[MAX_BYTES], sink[MAX_BYTES];
static size_t bytes = 2000; /* several packets: the callback runs after the handler */
/* shared by the tasks of a process, as libtorx's own process-wide state */
static int started __attribute__((section("torx_process")));

static void check(torx_ctx_t *ctx)
{
    if (my_rank != torx_rank(ctx) && !wrong_seen++)
        fprintf(stderr, "sim_globals: task %d read my_rank %d in a callback\n", torx_rank(ctx),
                my_rank);
}

static void ping_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t n)
{
    (void)n;
    check(ctx);
    if (st == TORX_OK)
        pending[(int)(long)arg]++, pings++, ping_in = 1;
}

static void pong_done(torx_ctx_t *ctx, void *arg, torx_status_t st, size_t n)
{
    (void)arg, (void)n;
    check(ctx);
    if (st == TORX_OK)
        pong_in = 1;
}

static void on_msg(torx_ctx_t *ctx, void *harg, const torx_recv_info_t *info, torx_recv_t *recv)
{
    check(ctx);
    const int ping = harg != NULL;
    *recv = (torx_recv_t){.buf = sink,
                          .len = bytes,
                          .done = ping ? ping_done : pong_done,
                          .arg = (void *)(long)info->src};
}

static void sent(torx_ctx_t *ctx, torx_msg_t *msg, void *arg)
{
    (void)msg, (void)arg;
    check(ctx);
    was_sent = 1;
}

static int fail(const char *what)
{
    fprintf(stderr, "sim_globals: %s: %s\n", what, torx_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        char *end;
        const long n = strtol(argv[1], &end, 10);
        if (argc > 2 || *end || end == argv[1] || n < 1 || n > MAX_BYTES) {
            fprintf(stderr, "usage: sim_globals [BYTES]   (1 to %d; '%s' is not)\n", MAX_BYTES,
                    argv[1]);
            return 2;
        }
        bytes = (size_t)n;
    }
    const torx_init_attr_t attr = {.mode = -1};
    torx_ctx_t *ctx;
    if (torx_init(&attr, &ctx) != TORX_OK)
        return fail("init");
    my_rank = torx_rank(ctx);
    const int size = torx_size(ctx);
    __atomic_fetch_add(&started, 1, __ATOMIC_RELAXED);
    if (size < 2 || size > MAX_TASKS) {
        fprintf(stderr, "sim_globals: needs 2 to %d tasks, not %d\n", MAX_TASKS, size);
        return 2;
    }
    torx_register(ctx, H_PING, on_msg, (void *)1);
    torx_register(ctx, H_PONG, on_msg, NULL);
    memset(buf, my_rank & 0xff, bytes);
    torx_msg_t msg;
    if (my_rank == 0) {
        /* the answers go back to back, without a wait between them: each
         * wakes its worker, and the callbacks of the next advance must
         * still see rank 0's globals */
        static torx_msg_t answer[MAX_TASKS];
        for (int answered = 0; answered < (size - 1) * ROUNDS;) {
            if (torx_wait(ctx, &ping_in) != TORX_OK)
                return fail("wait");
            ping_in = 0;
            check(ctx);
            for (int r = 1; r < size; r++)
                while (pending[r]) {
                    pending[r]--;
                    while (torx_msg_pending(&answer[r]))
                        if (torx_advance(ctx) < 0)
                            return fail("advance");
                    if (torx_send(ctx, &answer[r], r, H_PONG, NULL, 0, buf, bytes, TORX_PROTO_AUTO,
                                  sent, NULL) != TORX_OK)
                        return fail("send");
                    answered++;
                }
        }
        for (int r = 1; r < size; r++)
            while (torx_msg_pending(&answer[r]))
                if (torx_advance(ctx) < 0)
                    return fail("advance");
    } else {
        for (int i = 0; i < ROUNDS; i++) {
            was_sent = 0;
            if (torx_send(ctx, &msg, 0, H_PING, NULL, 0, buf, bytes, TORX_PROTO_AUTO, sent, NULL) !=
                    TORX_OK ||
                torx_wait(ctx, &was_sent) != TORX_OK || torx_wait(ctx, &pong_in) != TORX_OK)
                return fail("send");
            pong_in = 0;
            check(ctx);
        }
    }
    if (torx_finalize(ctx) != TORX_OK)
        return fail("finalize");
    if (wrong_seen)
        return 1;
    /* under torx-sim every task is in this process; under mpiexec, one */
    const int want = getenv("TORX_SIM_TASKS") ? size : 1;
    if (my_rank == 0 && __atomic_load_n(&started, __ATOMIC_RELAXED) != want) {
        fprintf(stderr,
                "sim_globals: %d tasks counted in the process-wide section, %d expected: "
                "each task was given its own copy\n",
                started, want);
        return 1;
    }
    if (my_rank == 0)
        printf("sim_globals: ok (%d tasks, %d pings answered)\n", size, pings);
    return 0;
}
