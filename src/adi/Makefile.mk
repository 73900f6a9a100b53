##
## The torx netmod (ch4:torx), overlaid from torx's src/adi/ by
## scripts/build-mpich.sh. Adding a source file here changes the cache key of
## the MPICH build (a fresh configure).
##

if BUILD_CH4_NETMOD_TORX

noinst_HEADERS     += src/mpid/ch4/netmod/torx/torx_pre.h \
                      src/mpid/ch4/netmod/torx/torx_impl.h \
                      src/mpid/ch4/netmod/torx/torx_noinline.h \
                      src/mpid/ch4/netmod/torx/netmod_inline.h \
                      src/mpid/ch4/netmod/torx/torx_am.h \
                      src/mpid/ch4/netmod/torx/torx_progress.h \
                      src/mpid/ch4/netmod/torx/torx_proc.h \
                      src/mpid/ch4/netmod/torx/torx_send.h \
                      src/mpid/ch4/netmod/torx/torx_recv.h \
                      src/mpid/ch4/netmod/torx/torx_probe.h \
                      src/mpid/ch4/netmod/torx/torx_rma.h \
                      src/mpid/ch4/netmod/torx/torx_coll.h \
                      src/mpid/ch4/netmod/torx/torx_part.h

mpi_core_sources   += src/mpid/ch4/netmod/torx/func_table.c \
                      src/mpid/ch4/netmod/torx/torx_globals.c \
                      src/mpid/ch4/netmod/torx/torx_init.c \
                      src/mpid/ch4/netmod/torx/torx_am.c \
                      src/mpid/ch4/netmod/torx/torx_p2p.c \
                      src/mpid/ch4/netmod/torx/torx_comm.c \
                      src/mpid/ch4/netmod/torx/torx_coll.c \
                      src/mpid/ch4/netmod/torx/torx_win.c \
                      src/mpid/ch4/netmod/torx/torx_misc.c

endif
