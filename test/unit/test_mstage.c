/* The multi-reader staging area of the shm device (torx_mstage_*), through
 * the public API, in four-task fork jobs (shape 4x1x1x1): task 0 streams
 * pieces of mixed sizes through the smallest area to three readers that
 * start at different times and release in different orders (at once, a
 * pair at a time in reverse, and late), so the area fills, wraps and takes
 * room back only once every reader is done with a piece; forged and stale
 * descriptors refused; misuse; the area turned off; bad and mismatched
 * TORX_MSTAGE_BYTES. */
#include "harness.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static const torx_shape_t SHAPE4 = {4, 1, 1, 1};

#define WAIT_S 60.0
#define PIECES 600
#define READERS 3
#define AREA 65536
#define TYPE_PIECE 1
#define TYPE_DONE 2

static const size_t piece_sizes[] = {1, 32768, 1000, 20000, 777, 32767, 3, 4096, 64, 12345};

static size_t piece_len(unsigned i)
{
    return piece_sizes[i % (sizeof piece_sizes / sizeof piece_sizes[0])];
}

static uint8_t pat(unsigned piece, size_t i)
{
    return (uint8_t)((piece * 131u) ^ (i * 7u) ^ (i >> 8));
}

typedef struct desc {
    torx_stage_ref_t ref;
    uint32_t piece;
} desc_t;

static int writer(torx_boot_t *boot, torx_pkt_dev_t *dev)
{
    const size_t max = torx_mstage_max(dev);
    TASK_CHECK(max == AREA / 2, "torx_mstage_max %zu with TORX_MSTAGE_BYTES=%d", max, AREA);
    static uint8_t buf[AREA];
    torx_stage_ref_t ref;
    TASK_CHECK(torx_mstage_put(dev, buf, 0, READERS, &ref) == TORX_ERR_INVAL, "0 bytes staged");
    TASK_CHECK(torx_mstage_put(dev, buf, max + 1, READERS, &ref) == TORX_ERR_INVAL,
               "more than torx_mstage_max staged");
    TASK_CHECK(torx_mstage_put(dev, buf, 8, 0, &ref) == TORX_ERR_INVAL, "staged for no reader");
    TASK_CHECK(torx_mstage_put(dev, NULL, 8, READERS, &ref) == TORX_ERR_INVAL, "NULL data");

    unsigned full = 0, wraps = 0;
    for (unsigned i = 0; i < PIECES; i++) {
        const size_t n = piece_len(i);
        for (size_t k = 0; k < n; k++)
            buf[k] = pat(i, k);
        torx_status_t rc;
        unsigned spins = 0;
        const double t0 = test_now();
        while ((rc = torx_mstage_put(dev, buf, n, READERS, &ref)) == TORX_NO_ROOM) {
            full++;
            TASK_CHECK(test_now() - t0 < WAIT_S, "piece %u: no room for %g s", i, WAIT_S);
            torx_pkt_poll(dev);
            test_relax(&spins);
        }
        TASK_CHECK(rc == TORX_OK, "piece %u: %s", i, torx_last_error());
        TASK_CHECK(ref.len == n, "piece %u: ref %u+%u", i, ref.off, ref.len);
        if (i && ref.off == 64)
            wraps++;
        memset(buf, 0xEE, n); /* the area holds its own copy */
        const desc_t d = {ref, i};
        for (int r = 1; r <= READERS; r++)
            TASK_CHECK(test_inject_wait(dev, test_coord_of(SHAPE4, r), TYPE_PIECE, &d, sizeof d) ==
                           TORX_OK,
                       "descriptor %u to %d", i, r);
    }
    TASK_CHECK(full > 0, "the area never filled (the readers start late)");
    TASK_CHECK(wraps > 0, "no piece wrapped");
    /* Every reader says when it has checked and released everything; then
     * the whole area is free again: two pieces of the most fit at once. */
    for (int done = 0; done < READERS;) {
        unsigned spins = 0;
        const double t0 = test_now();
        while (!torx_pkt_poll(dev)) {
            TASK_CHECK(test_now() - t0 < WAIT_S, "no word from the readers");
            test_relax(&spins);
        }
        const torx_pkt_hdr_t *p = torx_pkt_peek(dev);
        done += p && p->sw[0] == TYPE_DONE;
        torx_pkt_consume(dev);
    }
    torx_stage_ref_t a, b;
    TASK_CHECK(torx_mstage_put(dev, buf, max, 1, &a) == TORX_OK &&
                   torx_mstage_put(dev, buf, max, 1, &b) == TORX_OK,
               "released pieces still hold the area: %s", torx_last_error());
    TASK_CHECK(torx_mstage_put(dev, buf, max, 1, &ref) == TORX_NO_ROOM,
               "a third piece of the most fitted");
    return 0;
}

/* Reader 1 releases each piece at once; reader 2 holds a piece until it
 * has read the next, then releases the two newest first; reader 3 starts
 * last. */
static int reader(torx_boot_t *boot, torx_pkt_dev_t *dev)
{
    const torx_coord_t src = test_coord_of(SHAPE4, 0);
    const int me = boot->rank;
    usleep((useconds_t)(me == 3 ? 300 : 100) * 1000);
    unsigned next = 0, spins = 0;
    desc_t held = {{0, 0}, 0};
    bool holding = false;
    const double t0 = test_now();
    while (next < PIECES) {
        TASK_CHECK(test_now() - t0 < WAIT_S, "piece %u never came", next);
        if (!torx_pkt_poll(dev)) {
            test_relax(&spins);
            continue;
        }
        const torx_pkt_hdr_t *p = torx_pkt_peek(dev);
        TASK_CHECK(p && p->sw[0] == TYPE_PIECE && p->payload_len == sizeof(desc_t),
                   "a packet that is no descriptor");
        desc_t d;
        torx_pkt_read(p, &d, 0, sizeof d);
        torx_pkt_consume(dev);
        TASK_CHECK(d.piece == next, "descriptor %u, expected %u", d.piece, next);
        const torx_stage_ref_t bad[] = {{d.ref.off + 64, d.ref.len},
                                        {d.ref.off + 1, d.ref.len},
                                        {d.ref.off, d.ref.len + 1},
                                        {d.ref.off, 0},
                                        {0, d.ref.len},
                                        {AREA * 2, d.ref.len}};
        for (unsigned b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            const uint8_t *x = torx_mstage_data(dev, src, bad[b]);
            /* a forged ref may happen to name another live piece of the
             * same length; never one of another length or misaligned */
            TASK_CHECK(x == NULL || (bad[b].off % 64 == 0 && bad[b].len == d.ref.len &&
                                     bad[b].off != d.ref.off),
                       "piece %u: a forged ref %u+%u accepted", next, bad[b].off, bad[b].len);
        }
        TASK_CHECK(torx_mstage_data(dev, test_coord_of(SHAPE4, 7), d.ref) == NULL,
                   "read from off the torus");
        const uint8_t *data = torx_mstage_data(dev, src, d.ref);
        TASK_CHECK(data != NULL, "piece %u (%u+%u) refused", next, d.ref.off, d.ref.len);
        for (size_t k = 0; k < d.ref.len; k++)
            TASK_CHECK(data[k] == pat(next, k), "reader %d piece %u byte %zu: %u, expected %u", me,
                       next, k, data[k], pat(next, k));
        if (me == 2) {
            if (holding) {
                torx_mstage_release(dev, src, d.ref);
                torx_mstage_release(dev, src, held.ref);
                holding = false;
            } else {
                held = d;
                holding = true;
            }
        } else {
            torx_mstage_release(dev, src, d.ref);
        }
        next++;
    }
    if (holding)
        torx_mstage_release(dev, src, held.ref);
    TASK_CHECK(test_inject_wait(dev, src, TYPE_DONE, NULL, 0) == TORX_OK, "done packet");
    return 0;
}

static int stream_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    setenv("TORX_MSTAGE_BYTES", "65536", 1);
    torx_pkt_dev_t *dev;
    TASK_CHECK(test_open(boot, SHAPE4, &dev) == TORX_OK, "%s", torx_last_error());
    const int rc = boot->rank == 0 ? writer(boot, dev) : reader(boot, dev);
    if (rc == 0)
        TASK_CHECK(boot->barrier(boot) == TORX_OK, "final barrier");
    torx_pkt_close(dev);
    return rc;
}

START_TEST(stream_to_three_readers)
{
    RUN_JOB(4, stream_task, NULL);
}
END_TEST

/* Room comes back in order, once every reader has released: a piece for
 * two readers stays readable and holds its room (and the room of the
 * pieces after it) after one release; a stray release after the last
 * cannot wrap the count. */
static int count_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    setenv("TORX_MSTAGE_BYTES", "65536", 1);
    torx_pkt_dev_t *dev;
    TASK_CHECK(test_open(boot, SHAPE4, &dev) == TORX_OK, "%s", torx_last_error());
    const torx_coord_t me = test_coord_of(SHAPE4, boot->rank);
    if (boot->rank == 0) {
        static uint8_t buf[AREA / 2];
        memset(buf, 0x5A, sizeof buf);
        const size_t max = sizeof buf;
        torx_stage_ref_t a, b, c;
        TASK_CHECK(torx_mstage_put(dev, buf, max, 2, &a) == TORX_OK, "%s", torx_last_error());
        TASK_CHECK(torx_mstage_put(dev, buf, max, 1, &b) == TORX_OK, "%s", torx_last_error());
        TASK_CHECK(torx_mstage_put(dev, buf, max, 1, &c) == TORX_NO_ROOM, "room past two halves");
        torx_mstage_release(dev, me, b);
        TASK_CHECK(torx_mstage_put(dev, buf, max, 1, &c) == TORX_NO_ROOM,
                   "room came back past a held piece");
        torx_mstage_release(dev, me, a);
        TASK_CHECK(torx_mstage_data(dev, me, a) != NULL, "a piece with a reader left is gone");
        TASK_CHECK(torx_mstage_put(dev, buf, max, 1, &c) == TORX_NO_ROOM,
                   "room came back with a reader left");
        torx_mstage_release(dev, me, a);
        TASK_CHECK(torx_mstage_data(dev, me, a) == NULL, "a released piece still readable");
        torx_mstage_release(dev, me, a); /* stray: does nothing */
        TASK_CHECK(torx_mstage_put(dev, buf, max, 1, &c) == TORX_OK, "room did not come back: %s",
                   torx_last_error());
        TASK_CHECK(torx_mstage_put(dev, buf, max, 1, &c) == TORX_OK, "room did not come back: %s",
                   torx_last_error());
    }
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    torx_pkt_close(dev);
    return 0;
}

START_TEST(readers_counted)
{
    RUN_JOB(4, count_task, NULL);
}
END_TEST

static int off_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    setenv("TORX_MSTAGE_BYTES", "0", 1);
    torx_pkt_dev_t *dev;
    TASK_CHECK(test_open(boot, SHAPE4, &dev) == TORX_OK, "%s", torx_last_error());
    torx_stage_ref_t ref = {64, 8};
    char buf[8] = {0};
    TASK_CHECK(torx_mstage_max(dev) == 0, "area off, yet max %zu", torx_mstage_max(dev));
    TASK_CHECK(torx_mstage_put(dev, buf, 8, 1, &ref) == TORX_ERR_INVAL, "staged while off");
    TASK_CHECK(strstr(torx_last_error(), "TORX_MSTAGE_BYTES=0") != NULL, "error says why: %s",
               torx_last_error());
    TASK_CHECK(torx_mstage_data(dev, test_coord_of(SHAPE4, 0), ref) == NULL, "read while off");
    torx_mstage_release(dev, test_coord_of(SHAPE4, 0), ref);
    TASK_CHECK(boot->barrier(boot) == TORX_OK, "barrier");
    torx_pkt_close(dev);
    return 0;
}

START_TEST(area_off)
{
    RUN_JOB(4, off_task, NULL);
}
END_TEST

START_TEST(bad_env)
{
    static const char *const bad[] = {"100000", "32768", "-1", "134217728", "1M"};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        test_env_case_t e = {"TORX_MSTAGE_BYTES", bad[i], NULL};
        RUN_JOB(1, test_env_refused_task, &e);
    }
}
END_TEST

START_TEST(mismatched_env)
{
    test_env_case_t e = {"TORX_MSTAGE_BYTES", "131072", "262144"};
    RUN_JOB(2, test_env_mismatch_task, &e);
    ck_assert_int_eq(test_count_segments(), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mstage");
    TCase *tc = tcase_create("shm");
    tcase_set_timeout(tc, 2 * TEST_JOB_TIMEOUT + 60);
    tcase_add_test(tc, stream_to_three_readers);
    tcase_add_test(tc, readers_counted);
    tcase_add_test(tc, area_off);
    tcase_add_test(tc, bad_env);
    tcase_add_test(tc, mismatched_env);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
