/* The shm reception FIFO: room and lap-tag arithmetic as a table of
 * head/tail cases (wraparound included), then many producer threads, or one
 * sole producer reserving without a CAS, against one consumer thread (the
 * TSan run exercises the orderings). */
#include "packet/shm/shm_fifo.h"

#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

static torxp_fifo_t *fifo_new(uint32_t log2, torxp_fifo_geom_t *g)
{
    *g = torxp_fifo_geom(log2);
    torxp_fifo_t *f = aligned_alloc(64, g->stride);
    ck_assert_ptr_nonnull(f);
    memset(f, 0, g->stride);
    return f;
}

START_TEST(lap_tags)
{
    /* Tags are never 0 (fresh memory) and differ between consecutive laps,
     * including where the lap counter wraps modulo 255 and 2^64. */
    const uint32_t log2 = 4;
    const uint64_t laps[] = {0, 1, 253, 254, 255, 256, 509, 510, 1ull << 31, (1ull << 60) - 1};
    for (size_t i = 0; i < sizeof laps / sizeof laps[0]; i++) {
        const uint64_t pos = laps[i] << log2;
        const uint8_t t0 = torxp_fifo_lap_tag(pos, log2), t1 = torxp_fifo_lap_tag(pos + 16, log2);
        ck_assert_uint_ne(t0, 0);
        ck_assert_uint_ne(t1, 0);
        ck_assert_msg(t0 != t1, "lap %llu and the next share tag %u", (unsigned long long)laps[i],
                      t0);
        ck_assert_uint_eq(torxp_fifo_lap_tag(pos + 15, log2), t0); /* same lap */
    }
}
END_TEST

START_TEST(room_table)
{
    /* head, tail (the consumer's and producers' positions): room and whether
     * one more reservation succeeds, for a 16-packet FIFO. */
    static const struct {
        uint64_t head, tail;
        uint32_t room;
    } cases[] = {
        {0, 0, 16},
        {0, 15, 1},
        {0, 16, 0},
        {5, 21, 0},
        {5, 20, 1},
        {(1ull << 31) - 3, (1ull << 31) + 5, 8},   /* across 2^31 */
        {(1ull << 32) - 1, (1ull << 32) + 15, 0},  /* across 2^32, full */
        {UINT64_MAX - 7, UINT64_MAX, 9},           /* near 2^64 */
        {UINT64_MAX - 2, 13, 0},                   /* tail wrapped past 2^64, full */
        {UINT64_MAX - 2, 2, 11},                   /* tail wrapped, 5 used */
    };
    torxp_fifo_geom_t g;
    torxp_fifo_t *f = fifo_new(4, &g);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        f->head = cases[i].head;
        f->tail = cases[i].tail;
        ck_assert_msg(torxp_fifo_room(f, g) == cases[i].room, "case %zu: room %u, expected %u", i,
                      torxp_fifo_room(f, g), cases[i].room);
        /* A stale cached head (an earlier value of head) must be refreshed. */
        uint64_t cached = cases[i].head - 3, pos = 0;
        const bool ok = torxp_fifo_reserve(f, g, &cached, &pos);
        ck_assert_msg(ok == (cases[i].room > 0), "case %zu: reserve %d with room %u", i, ok,
                      cases[i].room);
        if (ok) {
            ck_assert_uint_eq(pos, cases[i].tail);
            ck_assert_uint_eq(f->tail, cases[i].tail + 1);
        } else {
            ck_assert_uint_eq(f->tail, cases[i].tail); /* nothing taken */
        }
    }
    free(f);
}
END_TEST

START_TEST(publish_and_pop)
{
    torxp_fifo_geom_t g;
    torxp_fifo_t *f = fifo_new(4, &g);
    uint64_t cached = 0, pos;
    ck_assert_ptr_null(torxp_fifo_front(f, g)); /* zeroed memory is empty */
    for (int lap = 0; lap < 600; lap++) {       /* past the 255-lap tag cycle */
        for (int i = 0; i < 16; i++) {
            ck_assert(torxp_fifo_reserve(f, g, &cached, &pos));
            torx_pkt_hdr_t h = {.sw = {(uint8_t)i, (uint8_t)lap}};
            torx_pkt_hdr_t *s = torxp_fifo_slot(f, g, pos);
            torxp_fifo_write_hdr(s, &h, 1, 0);
            if (i < 15) /* the last one stays reserved but unpublished */
                torxp_fifo_publish(s, pos, g);
        }
        ck_assert(!torxp_fifo_reserve(f, g, &cached, &pos)); /* full */
        for (int i = 0; i < 15; i++) {
            torx_pkt_hdr_t *s = torxp_fifo_front(f, g);
            ck_assert_ptr_nonnull(s);
            ck_assert_uint_eq(s->sw[0], i);
            ck_assert_uint_eq(s->sw[1], (uint8_t)lap);
            torxp_fifo_pop(f);
        }
        /* Reserved but unpublished: the consumer must wait for it. */
        ck_assert_ptr_null(torxp_fifo_front(f, g));
        torxp_fifo_publish(torxp_fifo_slot(f, g, f->head), f->head, g);
        ck_assert_ptr_nonnull(torxp_fifo_front(f, g));
        torxp_fifo_pop(f);
        ck_assert_ptr_null(torxp_fifo_front(f, g));
    }
    free(f);
}
END_TEST

/* ---- threads: several producers, one consumer ---------------------------- */

/* ThreadSanitizer runs ~20x slower; it needs interleavings, not volume.
 * AddressSanitizer checks each access once: volume adds nothing there either
 * (85 s against 24 s at full volume, 3 producers and a consumer on 2 cores). */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
enum { PRODUCERS = 3, PER_PRODUCER = 20000 };
#else
enum { PRODUCERS = 3, PER_PRODUCER = 200000 };
#endif

typedef struct {
    torxp_fifo_t *f;
    torxp_fifo_geom_t g;
    int id;
    int sole; /* the FIFO's only producer: torxp_fifo_reserve_sole */
    uint64_t full_seen;
} producer_t;

static void *producer(void *arg)
{
    producer_t *p = arg;
    uint64_t cached = 0, pos;
    for (uint32_t seq = 0; seq < PER_PRODUCER; seq++) {
        unsigned spins = 0;
        while (!(p->sole ? torxp_fifo_reserve_sole(p->f, p->g, &cached, &pos)
                         : torxp_fifo_reserve(p->f, p->g, &cached, &pos))) {
            p->full_seen++;
            if ((++spins & 31) == 0)
                sched_yield();
        }
        torx_pkt_hdr_t h = {.sw = {(uint8_t)p->id}};
        memcpy(h.sw + 4, &seq, 4);
        torx_pkt_hdr_t *s = torxp_fifo_slot(p->f, p->g, pos);
        torxp_fifo_write_hdr(s, &h, 2, 32);
        uint32_t *payload = (uint32_t *)(s + 1);
        for (int i = 0; i < 8; i++)
            payload[i] = seq * 31u + (uint32_t)i + (uint32_t)p->id;
        torxp_fifo_publish(s, pos, p->g);
    }
    return NULL;
}

/* n producer threads into a 32-slot FIFO, this thread the consumer: every
 * packet arrives once, in order per producer, with its payload. */
static void run_producers(int n, int sole)
{
    torxp_fifo_geom_t g;
    torxp_fifo_t *f = fifo_new(5, &g);
    pthread_t th[PRODUCERS];
    producer_t p[PRODUCERS];
    for (int i = 0; i < n; i++) {
        p[i] = (producer_t){.f = f, .g = g, .id = i, .sole = sole};
        ck_assert_int_eq(pthread_create(&th[i], NULL, producer, &p[i]), 0);
    }
    uint32_t next[PRODUCERS] = {0};
    unsigned spins = 0;
    for (uint64_t got = 0; got < (uint64_t)n * PER_PRODUCER;) {
        torx_pkt_hdr_t *s = torxp_fifo_front(f, g);
        if (!s) {
            if ((++spins & 31) == 0)
                sched_yield();
            continue;
        }
        const int id = s->sw[0];
        uint32_t seq;
        memcpy(&seq, s->sw + 4, 4);
        ck_assert_int_lt(id, n);
        ck_assert_msg(seq == next[id], "producer %d: got seq %u, expected %u", id, seq, next[id]);
        ck_assert_uint_eq(s->payload_len, 32);
        const uint32_t *payload = (const uint32_t *)(s + 1);
        for (int i = 0; i < 8; i++)
            ck_assert_uint_eq(payload[i], seq * 31u + (uint32_t)i + (uint32_t)id);
        next[id]++;
        got++;
        torxp_fifo_pop(f);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        ck_assert_uint_eq(next[i], PER_PRODUCER);
    }
    ck_assert_ptr_null(torxp_fifo_front(f, g));
    ck_assert_uint_eq(torxp_fifo_room(f, g), g.packets);
    free(f);
}

START_TEST(threads_mpsc_order)
{
    run_producers(PRODUCERS, 0);
}
END_TEST

START_TEST(threads_sole_producer_order)
{
    /* The shm device's sole-producer reservation: a store, no CAS. */
    run_producers(1, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fifo");
    TCase *tc = tcase_create("arithmetic");
    tcase_add_test(tc, lap_tags);
    tcase_add_test(tc, room_table);
    tcase_add_test(tc, publish_and_pop);
    suite_add_tcase(s, tc);
    TCase *tt = tcase_create("threads");
    tcase_add_test(tt, threads_mpsc_order);
    tcase_add_test(tt, threads_sole_producer_order);
    tcase_set_timeout(tt, 120);
    suite_add_tcase(s, tt);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
