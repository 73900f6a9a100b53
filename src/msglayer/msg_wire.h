/* Message-layer wire formats: the packet types, the two words of the
 * software header, the payload prefixes and the checks that they fit.
 * Prefix: torxm_.
 *
 * Wire format. The packet header's 8 software bytes are two little-endian
 * words: sw[0..3] = type | source rank << 8 (ranks are below 2^24), and
 * sw[4..7] = a per-type word (handler | hdr_len << 8 | flags << 16 on a
 * message's first packet, the byte offset on data packets). Payloads:
 *
 *   ONEPKT        hdr, data                                 deterministic
 *   EAGER_FIRST   u32 total, hdr, data                      deterministic
 *   EAGER_MORE    data                     (word: offset)   deterministic
 *   ADAPT_FIRST   u32 total, u32 seq, hdr, data             adaptive
 *   ADAPT_MORE    u32 seq, data            (word: offset)   adaptive
 *   ADAPT_TOKEN   -                        (word: seq)      deterministic
 *   RZV_SCOUT     u64 total, u64 addr, u64 cookie, hdr      deterministic
 *   RZV_CTS       u64 cookie, u64 rcookie, u64 want         deterministic
 *                                          (word: TORXM_CTS_STAGED or 0)
 *   RZV_DATA      u64 rcookie, data        (word: offset)   adaptive
 *   RZV_ACK       u64 cookie                                deterministic
 *   VN_SCOUT      as RZV_SCOUT                              deterministic
 *   VN_ACK        as RZV_ACK                                deterministic
 *   EAGER_STAGED  u32 total, stage ref (u32 off, u32 len), hdr   deterministic
 *   EAGER_PIECE   stage ref                (word: offset)   deterministic
 *   VN_STAGED     as EAGER_STAGED                           deterministic
 *   VN_PIECE      as EAGER_PIECE                            deterministic
 *   LINE          hdr, data                                 deposit bit
 *   RZV_PIECE     u64 rcookie, stage ref   (word: offset)   deterministic
 *
 * LINE packets (torx_line_send) are one-packet messages deposited along a
 * line; they bypass the send queues and sequence numbers (a collective's
 * packets carry their own place in their header), so they never shift the
 * matching of point-to-point messages.
 *
 * Staged messages (proto_stage.c) carry their data in the device's staging
 * area, a piece per packet; the packet holds the piece's descriptor. They
 * take the eager reassembly slot of their source, as eager messages do.
 *
 * Ordering. Deterministic packets keep their order per sender/receiver pair,
 * so one-packet, eager and scouts are matched in send order for free. An
 * adaptive message's first packet may overtake earlier deterministic ones,
 * so it carries seq, the count of messages the sender started to that peer
 * before it; the receiver counts the messages it matched from each source
 * (rx_seq) and parks an adaptive first packet that is early. Nothing can
 * overtake the adaptive message itself: the sender holds its next message
 * until the receiver's token says it was matched. Data packets that beat
 * their first packet are parked the same way, keyed by seq. A staged
 * message whose first packet is out but whose next piece finds the staging
 * area full lets one-packet messages and scouts behind it go first
 * (msg_send.c, pass_staged): the receiver has matched it already, so
 * matching order holds, though completion order may not. */
#ifndef TORXM_WIRE_H
#define TORXM_WIRE_H

#include <torx/msg.h>

#include "packet/pkt_internal.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

/* Offsets and totals of packet-streamed messages are 32-bit on the wire. */
#define TORXM_STREAM_MAX ((uint64_t)UINT32_MAX)
#define TORXM_RANK_MAX ((1 << 24) - 1)

/* ---- Wire ------------------------------------------------------------------ */

enum torxm_pkt_type {
    TORXM_PKT_INVALID = 0, /* a zeroed sw is never a valid packet */
    TORXM_PKT_ONEPKT,
    TORXM_PKT_EAGER_FIRST,
    TORXM_PKT_EAGER_MORE,
    TORXM_PKT_ADAPT_FIRST,
    TORXM_PKT_ADAPT_MORE,
    TORXM_PKT_ADAPT_TOKEN,
    TORXM_PKT_RZV_SCOUT,
    TORXM_PKT_RZV_CTS,
    TORXM_PKT_RZV_DATA,
    TORXM_PKT_RZV_ACK,
    TORXM_PKT_VN_SCOUT,
    TORXM_PKT_VN_ACK,
    TORXM_PKT_EAGER_STAGED,
    TORXM_PKT_EAGER_PIECE,
    TORXM_PKT_VN_STAGED,
    TORXM_PKT_VN_PIECE,
    TORXM_PKT_LINE,
    TORXM_PKT_RZV_PIECE,
    TORXM_PKT_NTYPES
};

/* Scout flag: the receiver sends a clear-to-send and the data comes as
 * adaptive packets (TORX_RZV_DATA=packets) instead of a bulk get. */
#define TORXM_SCOUT_PACKETS 0x1u
/* Scout flag: the sender can stream the data through the staging area; the
 * receiver chooses (TORXM_ASK_TAKE, msg_path.c) and says so in its
 * clear-to-send's word (TORXM_CTS_STAGED), or gets the data in bulk. */
#define TORXM_SCOUT_STAGED 0x2u
/* Scout flag, with TORXM_SCOUT_STAGED: the sender's copies toward the
 * receiver run slow and this scout is the one in TORXM_STAGE_PROBE that
 * measures them again; the receiver takes the offer whatever its own
 * verdict (torxm_peer_t.rzv_hold). */
#define TORXM_SCOUT_PROBE 0x4u
#define TORXM_CTS_STAGED 0x1u

#define TORXM_EAGER_FIRST_PREFIX 4u /* u32 total */
#define TORXM_ADAPT_FIRST_PREFIX 8u /* u32 total, u32 seq */
#define TORXM_ADAPT_MORE_PREFIX 4u  /* u32 seq */
#define TORXM_SCOUT_PREFIX 24u      /* u64 total, addr, cookie */
#define TORXM_RZV_DATA_PREFIX 8u    /* u64 rcookie */
#define TORXM_STAGED_PREFIX 12u     /* u32 total, u32 ref off, u32 ref len */
#define TORXM_PIECE_BYTES 8u        /* u32 ref off, u32 ref len */
#define TORXM_RZV_PIECE_BYTES 16u   /* u64 rcookie, u32 ref off, u32 ref len */

static_assert(TORX_MSG_ONEPKT_MAX == TORX_PKT_MAX_PAYLOAD, "one-packet uses the whole payload");
/* Data bytes the first packet of a message of len data bytes and hdr_len
 * header bytes carries after its prefix and the header (eager, adaptive). */
static inline uint64_t torxm_first_chunk(unsigned prefix, size_t hdr_len, uint64_t len)
{
    const uint64_t room = TORX_PKT_MAX_PAYLOAD - prefix - hdr_len;
    return len < room ? len : room;
}
static_assert(TORXM_SCOUT_PREFIX + TORX_MSG_MAX_HDR <= TORX_PKT_MAX_PAYLOAD,
              "a scout carries the largest header");
static_assert(TORXM_ADAPT_FIRST_PREFIX + TORX_MSG_MAX_HDR < TORX_PKT_MAX_PAYLOAD,
              "a first packet carries the largest header and some data");
static_assert(TORX_MSG_HANDLERS <= 256 && TORX_MSG_MAX_HDR <= 255, "they fit a byte of word");

static inline void torxm_sw_set(torx_pkt_hdr_t *h, unsigned type, uint32_t src, uint32_t word)
{
    const uint32_t a = (uint32_t)type | src << 8;
    memcpy(h->sw, &a, 4);
    memcpy(h->sw + 4, &word, 4);
}

static inline unsigned torxm_sw_type(const torx_pkt_hdr_t *h)
{
    return h->sw[0];
}

static inline uint32_t torxm_sw_src(const torx_pkt_hdr_t *h)
{
    uint32_t a;
    memcpy(&a, h->sw, 4);
    return a >> 8;
}

static inline uint32_t torxm_sw_word(const torx_pkt_hdr_t *h)
{
    uint32_t w;
    memcpy(&w, h->sw + 4, 4);
    return w;
}

static inline uint32_t torxm_first_word(unsigned handler, unsigned hdr_len, unsigned flags)
{
    return (uint32_t)handler | (uint32_t)hdr_len << 8 | (uint32_t)flags << 16;
}

static inline uint32_t torxm_ld32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t torxm_ld64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

#endif /* TORXM_WIRE_H */
