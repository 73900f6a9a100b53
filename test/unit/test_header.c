/* Torus packet header: every field encodes and decodes, and survives a trip
 * through the shm device unchanged. */
#include "harness.h"

#include <string.h>

START_TEST(chunks_table)
{
    static const struct {
        size_t len;
        unsigned chunks;
    } cases[] = {{0, 1},   {1, 1},   {16, 1},  {17, 2},  {48, 2},  {49, 3},
                 {112, 4}, {113, 5}, {208, 7}, {209, 8}, {239, 8}, {240, 8}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(torx_pkt_chunks_for(cases[i].len) == cases[i].chunks,
                      "payload %zu: %u chunks, expected %u", cases[i].len,
                      torx_pkt_chunks_for(cases[i].len), cases[i].chunks);
}
END_TEST

START_TEST(ctl_bits)
{
    const torx_coord_t dest = {3, 4, 5, 1};
    torx_pkt_hdr_t h;
    torx_pkt_hdr_init(&h, dest, TORX_PKT_ADAPTIVE);
    ck_assert(torx_coord_equal(h.dest, dest));
    ck_assert_uint_eq(h.ctl, TORX_PKT_ADAPTIVE);
    for (int i = 0; i < TORX_PKT_SW_BYTES; i++)
        ck_assert_uint_eq(h.sw[i], 0);
    for (int dim = TORX_DIM_X; dim <= TORX_DIM_Z; dim++)
        for (int dir = -1; dir <= 1; dir += 2) {
            torx_pkt_hdr_set_deposit(&h, dim, dir);
            ck_assert(h.ctl & TORX_PKT_DEPOSIT);
            ck_assert_msg(!(h.ctl & TORX_PKT_ADAPTIVE), "deposit packets are deterministic");
            ck_assert_int_eq(torx_pkt_hdr_deposit_dim(&h), dim);
            ck_assert_int_eq(!!(h.ctl & TORX_PKT_DEPOSIT_NEG), dir < 0);
            ck_assert(!(h.ctl & TORX_PKT_SYS));
        }
}
END_TEST

START_TEST(coord_index_is_x_fastest)
{
    const torx_shape_t s = {4, 3, 2, 2};
    unsigned expect = 0;
    for (unsigned t = 0; t < s.t; t++)
        for (unsigned z = 0; z < s.z; z++)
            for (unsigned y = 0; y < s.y; y++)
                for (unsigned x = 0; x < s.x; x++) {
                    const torx_coord_t c = {(uint8_t)x, (uint8_t)y, (uint8_t)z, (uint8_t)t};
                    ck_assert_uint_eq(torx_coord_index(s, c), expect++);
                    ck_assert(torx_coord_in_shape(s, c));
                }
    ck_assert_uint_eq(expect, torx_shape_slots(s));
    ck_assert(!torx_coord_in_shape(s, (torx_coord_t){4, 0, 0, 0}));
    ck_assert(!torx_coord_in_shape(s, (torx_coord_t){0, 0, 0, 2}));
}
END_TEST

/* Self-send through the device: each field read back as written. */
static int roundtrip_task(torx_boot_t *boot, void *arg)
{
    (void)arg;
    torx_pkt_dev_t *dev;
    const torx_shape_t shape = {1, 1, 1, 1};
    TASK_CHECK(test_open(boot, shape, &dev) == TORX_OK, "%s", torx_last_error());
    uint8_t src[TORX_PKT_MAX_PAYLOAD + 3];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (uint8_t)(i * 7 + 1);
    const size_t lens[] = {0, 1, 15, 16, 17, 100, 239, 240};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (unsigned ctl = 0; ctl <= TORX_PKT_ADAPTIVE; ctl++) {
            const size_t len = lens[li];
            torx_pkt_hdr_t h;
            torx_pkt_hdr_init(&h, torx_pkt_self(dev), ctl);
            for (int i = 0; i < TORX_PKT_SW_BYTES; i++)
                h.sw[i] = (uint8_t)(0xA0 + i + li);
            /* Three unaligned pieces gathered into one payload. */
            const size_t a = len / 3, b = len / 2 - len / 3;
            struct iovec iov[3] = {
                {src + 1, a}, {src + 1 + a, b}, {src + 1 + a + b, len - a - b}};
            TASK_CHECK(torx_pkt_inject(dev, &h, iov, 3) == TORX_OK, "%s", torx_last_error());
            const torx_pkt_hdr_t *p = torx_pkt_peek(dev);
            TASK_CHECK(p != NULL, "packet of %zu bytes not delivered", len);
            TASK_CHECK(torx_pkt_peek(dev) == p, "peek must not unload");
            TASK_CHECK(torx_coord_equal(p->dest, h.dest), "dest");
            TASK_CHECK(p->ctl == ctl, "ctl %#x != %#x", p->ctl, ctl);
            TASK_CHECK(p->payload_len == len, "payload_len %u != %zu", p->payload_len, len);
            TASK_CHECK(p->chunks == torx_pkt_chunks_for(len), "chunks %u", p->chunks);
            TASK_CHECK(!memcmp(p->sw, h.sw, sizeof h.sw), "software header bytes");
            uint8_t dst[TORX_PKT_MAX_PAYLOAD + 5];
            memset(dst, 0xEE, sizeof dst);
            torx_pkt_read(p, dst + 3, 0, len); /* unaligned destination */
            TASK_CHECK(!memcmp(dst + 3, src + 1, len), "payload of %zu bytes", len);
            TASK_CHECK(dst[2] == 0xEE && dst[3 + len] == 0xEE, "read wrote outside its range");
            if (len > 10) {
                uint8_t part[8];
                torx_pkt_read(p, part, 5, sizeof part);
                TASK_CHECK(!memcmp(part, src + 1 + 5, sizeof part), "partial read at offset");
            }
            torx_pkt_consume(dev);
            TASK_CHECK(torx_pkt_peek(dev) == NULL, "consumed packet still visible");
        }
    /* Payload over 240 bytes is refused with a message and nothing sent. */
    torx_pkt_hdr_t h;
    torx_pkt_hdr_init(&h, torx_pkt_self(dev), 0);
    TASK_CHECK(torx_pkt_inject1(dev, &h, src, TORX_PKT_MAX_PAYLOAD + 1) == TORX_ERR_INVAL,
               "oversized payload accepted");
    TASK_CHECK(strstr(torx_last_error(), "241"), "message: %s", torx_last_error());
    TASK_CHECK(torx_pkt_peek(dev) == NULL, "oversized packet delivered");
    torx_pkt_close(dev);
    return 0;
}

START_TEST(device_roundtrip)
{
    RUN_JOB(1, roundtrip_task, NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("header");
    TCase *tc = tcase_create("encode");
    tcase_add_test(tc, chunks_table);
    tcase_add_test(tc, ctl_bits);
    tcase_add_test(tc, coord_index_is_x_fastest);
    tcase_add_test(tc, device_roundtrip);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
