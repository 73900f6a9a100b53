/* The collective network's integer ALU, the names of its operations and the
 * checks of the arguments of torx_cn_inject, torx_cn_read, torx_gi_arm and
 * torx_gi_poll, shared by the
 * devices (shm combines in the shared region, ofi at each level of its
 * tree): one ALU, so every device gives the same bits. */
#include "pkt_internal.h"

#include <string.h>

#define CN_LANES64 (TORX_CN_PACKET_BYTES / 8)
#define CN_LANES32 (TORX_CN_PACKET_BYTES / 4)

const char *torxp_cn_op_name(unsigned op)
{
    static const char *const names[] = {
        [TORX_CN_ADD] = "ADD",     [TORX_CN_MIN] = "MIN", [TORX_CN_MAX] = "MAX",
        [TORX_CN_AND] = "AND",     [TORX_CN_OR] = "OR",   [TORX_CN_XOR] = "XOR",
        [TORX_CN_BCAST] = "BCAST",
    };
    return op < TORX_CN_NOPS ? names[op] : "?";
}

const char *torxp_cn_type_name(unsigned type)
{
    static const char *const names[] = {
        [TORX_CN_S32] = "S32", [TORX_CN_U32] = "U32", [TORX_CN_S64] = "S64", [TORX_CN_U64] = "U64"};
    return type < TORX_CN_NTYPES ? names[type] : "?";
}

/* ---- the ALU --------------------------------------------------------------
 * acc holds the running result; src is the next contribution. Lanes are
 * copied through memcpy so the payload bytes are never accessed through an
 * lvalue of another type (the user's buffer may hold doubles or be
 * unaligned); the compiler turns these into plain vector loads. */

void torxp_cn_alu64(unsigned op, int is_signed, uint64_t *restrict acc, const unsigned char *src)
{
    uint64_t v[CN_LANES64];
    memcpy(v, src, sizeof v);
    switch (op) {
    case TORX_CN_ADD: /* unsigned: wraps without UB, same bits as two's complement */
        for (unsigned i = 0; i < CN_LANES64; i++)
            acc[i] += v[i];
        break;
    case TORX_CN_MIN:
        if (is_signed)
            for (unsigned i = 0; i < CN_LANES64; i++)
                acc[i] = (int64_t)v[i] < (int64_t)acc[i] ? v[i] : acc[i];
        else
            for (unsigned i = 0; i < CN_LANES64; i++)
                acc[i] = v[i] < acc[i] ? v[i] : acc[i];
        break;
    case TORX_CN_MAX:
        if (is_signed)
            for (unsigned i = 0; i < CN_LANES64; i++)
                acc[i] = (int64_t)v[i] > (int64_t)acc[i] ? v[i] : acc[i];
        else
            for (unsigned i = 0; i < CN_LANES64; i++)
                acc[i] = v[i] > acc[i] ? v[i] : acc[i];
        break;
    case TORX_CN_AND:
        for (unsigned i = 0; i < CN_LANES64; i++)
            acc[i] &= v[i];
        break;
    case TORX_CN_OR:
        for (unsigned i = 0; i < CN_LANES64; i++)
            acc[i] |= v[i];
        break;
    case TORX_CN_XOR:
        for (unsigned i = 0; i < CN_LANES64; i++)
            acc[i] ^= v[i];
        break;
    }
}

void torxp_cn_alu32(unsigned op, int is_signed, uint32_t *restrict acc, const unsigned char *src)
{
    uint32_t v[CN_LANES32];
    memcpy(v, src, sizeof v);
    switch (op) {
    case TORX_CN_ADD:
        for (unsigned i = 0; i < CN_LANES32; i++)
            acc[i] += v[i];
        break;
    case TORX_CN_MIN:
        if (is_signed)
            for (unsigned i = 0; i < CN_LANES32; i++)
                acc[i] = (int32_t)v[i] < (int32_t)acc[i] ? v[i] : acc[i];
        else
            for (unsigned i = 0; i < CN_LANES32; i++)
                acc[i] = v[i] < acc[i] ? v[i] : acc[i];
        break;
    case TORX_CN_MAX:
        if (is_signed)
            for (unsigned i = 0; i < CN_LANES32; i++)
                acc[i] = (int32_t)v[i] > (int32_t)acc[i] ? v[i] : acc[i];
        else
            for (unsigned i = 0; i < CN_LANES32; i++)
                acc[i] = v[i] > acc[i] ? v[i] : acc[i];
        break;
    case TORX_CN_AND:
        for (unsigned i = 0; i < CN_LANES32; i++)
            acc[i] &= v[i];
        break;
    case TORX_CN_OR:
        for (unsigned i = 0; i < CN_LANES32; i++)
            acc[i] |= v[i];
        break;
    case TORX_CN_XOR:
        for (unsigned i = 0; i < CN_LANES32; i++)
            acc[i] ^= v[i];
        break;
    }
}

void torxp_cn_alu(unsigned op, unsigned type, unsigned char *acc, const unsigned char *src)
{
    const int is_signed = type == TORX_CN_S32 || type == TORX_CN_S64;
    if (type == TORX_CN_S64 || type == TORX_CN_U64) {
        uint64_t a[CN_LANES64];
        memcpy(a, acc, sizeof a);
        torxp_cn_alu64(op, is_signed, a, src);
        memcpy(acc, a, sizeof a);
    } else {
        uint32_t a[CN_LANES32];
        memcpy(a, acc, sizeof a);
        torxp_cn_alu32(op, is_signed, a, src);
        memcpy(acc, a, sizeof a);
    }
}

torx_status_t torxp_cn_inject_check(torx_cn_op_t op, torx_cn_type_t type, int is_root,
                                    const void *data)
{
    if (TORXP_UNLIKELY((unsigned)op >= TORX_CN_NOPS))
        return torxp_error(TORX_ERR_INVAL, "torx: torx_cn_inject: op %d is not a torx_cn_op_t",
                           (int)op);
    if (TORXP_UNLIKELY((unsigned)type >= TORX_CN_NTYPES))
        return torxp_error(TORX_ERR_INVAL, "torx: torx_cn_inject: type %d is not a torx_cn_type_t",
                           (int)type);
    const int root = op == TORX_CN_BCAST && is_root;
    const int has_data = op != TORX_CN_BCAST || root;
    if (TORXP_UNLIKELY(has_data && data == NULL))
        return torxp_error(TORX_ERR_INVAL, "torx: torx_cn_inject: %s%s with data == NULL",
                           torxp_cn_op_name(op), root ? " root" : "");
    return TORX_OK;
}

torx_status_t torxp_cn_read_check(const torx_pkt_dev_t *dev, uint64_t read, uint64_t injected,
                                  const void *result)
{
    if (TORXP_UNLIKELY(read == injected))
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_cn_read: task %d has no unread collective round "
                           "(%llu injected, all read); inject before reading",
                           dev->rank, (unsigned long long)injected);
    if (TORXP_UNLIKELY(result == NULL))
        return torxp_error(TORX_ERR_INVAL, "torx: torx_cn_read: result == NULL");
    return TORX_OK;
}

torx_status_t torxp_gi_arm_check(const torx_pkt_dev_t *dev, uint64_t armed, uint64_t complete)
{
    if (TORXP_UNLIKELY(complete != armed))
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_gi_arm: task %d armed barrier round %llu twice; poll "
                           "round %llu to completion (torx_gi_poll == TORX_OK) first",
                           dev->rank, (unsigned long long)armed + 1, (unsigned long long)armed);
    return TORX_OK;
}

torx_status_t torxp_gi_poll_check(const torx_pkt_dev_t *dev, uint64_t armed)
{
    if (TORXP_UNLIKELY(armed == 0))
        return torxp_error(TORX_ERR_INVAL,
                           "torx: torx_gi_poll: task %d has not armed a barrier round "
                           "(call torx_gi_arm first)",
                           dev->rank);
    return TORX_OK;
}
