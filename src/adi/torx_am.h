/*
 * torx netmod: active messages for MPIDIG (ch4's generic layer), carried by
 * torx messages to handler MPIDI_TORX_AM_HANDLER. The receive side is
 * torx_am.c.
 *
 * Wire format of one MPIDIG active message = one torx message:
 *   torx header: MPIDI_TORX_am_wire_t, then the AM header when it fits
 *                (am_hdr_sz <= MPIDI_TORX_AM_INLINE_HDR_MAX);
 *   torx data:   the payload (contiguous data is sent in place, zero-copy;
 *                non-contiguous data is packed), preceded by the AM header
 *                when it did not fit (MPIDI_TORX_AM_F_HDR_IN_DATA).
 * The message layer picks the protocol by size (one-packet, eager,
 * rendezvous with a bulk get, virtual node).
 */
#ifndef TORX_AM_H_INCLUDED
#define TORX_AM_H_INCLUDED

#include "torx_impl.h"

MPL_STATIC_INLINE_PREFIX void MPIDI_NM_am_request_init(MPIR_Request * req)
{
    MPIDI_TORX_AMREQ(req).pack_buf = NULL;
    MPIDI_TORX_AMREQ(req).in_flight = 0;
    MPIDI_TORX_AMREQ(req).is_heap = 0;
}

MPL_STATIC_INLINE_PREFIX void MPIDI_NM_am_request_finalize(MPIR_Request * req)
{
    MPL_free(MPIDI_TORX_AMREQ(req).pack_buf);
    MPIDI_TORX_AMREQ(req).pack_buf = NULL;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_TORX_dest(MPIR_Comm * comm, int rank)
{
    return MPIDI_TORX_AV(MPIDIU_comm_rank_to_av(comm, rank)).rank;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_isend(int rank, MPIR_Comm * comm, int handler_id,
                                               const void *am_hdr, MPI_Aint am_hdr_sz,
                                               const void *data, MPI_Aint count,
                                               MPI_Datatype datatype, int src_vci, int dst_vci,
                                               MPIR_Request * sreq)
{
    int mpi_errno = MPI_SUCCESS;
    int dest = MPIDI_TORX_dest(comm, rank);

    int dt_contig;
    size_t data_sz;
    MPI_Aint dt_true_lb;
    MPIR_Datatype *dt_ptr;
    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);

    union {
        MPIDI_TORX_am_wire_t w;
        char c[TORX_MSG_MAX_HDR];
    } h;
    size_t hlen = sizeof(MPIDI_TORX_am_wire_t);
    h.w.handler_id = (uint8_t) handler_id;
    h.w.flags = 0;
    h.w.am_hdr_sz = (uint16_t) am_hdr_sz;
    MPIR_Assert(am_hdr_sz <= MPIDI_TORX_AM_HDR_MAX);

    const void *sbuf = NULL;
    size_t slen = 0;
    char *pack = NULL;
    size_t off = 0;
    if (am_hdr_sz <= MPIDI_TORX_AM_INLINE_HDR_MAX) {
        memcpy(h.c + hlen, am_hdr, am_hdr_sz);
        hlen += am_hdr_sz;
    } else {
        h.w.flags |= MPIDI_TORX_AM_F_HDR_IN_DATA;
        off = am_hdr_sz;
    }
    if (off == 0 && dt_contig) {
        sbuf = data_sz ? MPIR_get_contig_ptr(data, dt_true_lb) : NULL;
        slen = data_sz;
    } else {
        pack = MPL_malloc(off + data_sz + 1, MPL_MEM_BUFFER);
        MPIR_ERR_CHKANDJUMP(pack == NULL, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
        if (off)
            memcpy(pack, am_hdr, am_hdr_sz);
        if (data_sz) {
            if (dt_contig) {
                memcpy(pack + off, MPIR_get_contig_ptr(data, dt_true_lb), data_sz);
            } else {
                MPI_Aint actual;
                mpi_errno = MPIR_Typerep_pack(data, count, datatype, 0, pack + off, data_sz,
                                              &actual);
                MPIR_ERR_CHECK(mpi_errno);
                MPIR_Assert(actual == (MPI_Aint) data_sz);
            }
        }
        sbuf = pack;
        slen = off + data_sz;
    }

    MPIDI_TORX_am_request_t *slot = &MPIDI_TORX_AMREQ(sreq);
    if (slot->in_flight) {
        /* this request is still sending an earlier message */
        slot = MPL_malloc(sizeof(*slot), MPL_MEM_BUFFER);
        MPIR_ERR_CHKANDJUMP(slot == NULL, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
        slot->is_heap = 1;
    } else {
        slot->is_heap = 0;
        MPL_free(slot->pack_buf);
    }
    slot->sreq = sreq;
    slot->pack_buf = pack;
    slot->handler_id = handler_id;
    slot->in_flight = 1;
    MPIDI_TORX_global.am_sent++;
    torx_status_t st = torx_send(MPIDI_TORX_global.ctx, &slot->msg, dest, MPIDI_TORX_AM_HANDLER,
                                 h.c, hlen, sbuf, slen, TORX_PROTO_AUTO,
                                 MPIDI_TORX_am_isend_done, slot);
    if (st != TORX_OK)
        MPIDI_TORX_fatal("torx_send", st);

  fn_exit:
    return mpi_errno;
  fn_fail:
    MPL_free(pack);
    goto fn_exit;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_isend_reply(MPIR_Comm * comm, int src_rank,
                                                     int handler_id, const void *am_hdr,
                                                     MPI_Aint am_hdr_sz, const void *data,
                                                     MPI_Aint count, MPI_Datatype datatype,
                                                     int src_vci, int dst_vci, MPIR_Request * sreq)
{
    return MPIDI_NM_am_isend(src_rank, comm, handler_id, am_hdr, am_hdr_sz, data, count,
                             datatype, src_vci, dst_vci, sreq);
}

MPL_STATIC_INLINE_PREFIX MPI_Aint MPIDI_NM_am_hdr_max_sz(void)
{
    return MPIDI_TORX_AM_HDR_MAX;
}

MPL_STATIC_INLINE_PREFIX MPI_Aint MPIDI_NM_am_eager_limit(void)
{
    return MPIDI_TORX_global.am_eager_limit;
}

MPL_STATIC_INLINE_PREFIX MPI_Aint MPIDI_NM_am_eager_buf_limit(void)
{
    return MPIDI_TORX_global.am_eager_limit + MPIDI_TORX_AM_HDR_MAX;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_send_hdr(int rank, MPIR_Comm * comm, int handler_id,
                                                  const void *am_hdr, MPI_Aint am_hdr_sz,
                                                  int src_vci, int dst_vci)
{
    return MPIDI_TORX_am_send_hdr(MPIDI_TORX_dest(comm, rank), handler_id, am_hdr, am_hdr_sz);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_send_hdr_reply(MPIR_Comm * comm, int src_rank,
                                                        int handler_id, const void *am_hdr,
                                                        MPI_Aint am_hdr_sz, int src_vci,
                                                        int dst_vci)
{
    return MPIDI_TORX_am_send_hdr(MPIDI_TORX_dest(comm, src_rank), handler_id, am_hdr,
                                  am_hdr_sz);
}

MPL_STATIC_INLINE_PREFIX bool MPIDI_NM_am_check_eager(MPI_Aint am_hdr_sz, MPI_Aint data_sz,
                                                      const void *data, MPI_Aint count,
                                                      MPI_Datatype datatype, MPIR_Request * sreq)
{
    return (am_hdr_sz + data_sz) <= MPIDI_TORX_global.am_eager_limit;
}

MPL_STATIC_INLINE_PREFIX MPIDIG_recv_data_copy_cb MPIDI_NM_am_get_data_copy_cb(uint32_t attr)
{
    return NULL;
}

#endif /* TORX_AM_H_INCLUDED */
