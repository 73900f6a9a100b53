/*
 * <mpix.h>: torx's MPI extensions, installed beside mpi.h by
 * scripts/build-mpich.sh. Blue Gene/Q's MPICH offered the same names; a
 * code that used them there builds here unchanged.
 */
#ifndef MPIX_H_INCLUDED
#define MPIX_H_INCLUDED

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The algorithm of the last blocking or nonblocking collective called on
 * comm by this process, as "<collective>:<algorithm>": for example
 * "barrier:gi" (global interrupt), "allreduce:cn" (collective network),
 * "allreduce:torus" (direct exchange), "alltoall:paced", or
 * "<collective>:mpich" when MPICH's own algorithm ran; "none" before the
 * first. The name is copied into name, at most len - 1 characters and a
 * terminating NUL. Returns MPI_SUCCESS, MPI_ERR_COMM for a bad
 * communicator, or MPI_ERR_ARG when name is NULL or len < 1. */
int MPIX_Get_last_algorithm_name(MPI_Comm comm, char *name, int len);

/* ---- The machine: the torus and this task's place on it --------------------
 * Blue Gene/Q's queries, on torx's torus of X x Y x Z nodes with T tasks
 * per node (1 in heater and co mode, the node's cores in vn mode). Ranks
 * are those of MPI_COMM_WORLD; coordinates are in the mapping in force
 * (TORX_MAPPING: an order or a mapping file). Coordinate arrays hold
 * MPIX_Torus_ndims() + 1 entries: x, y, z, then t, as on BG/Q. Every call
 * needs MPI initialized (else MPI_ERR_OTHER) and returns an error code
 * rather than calling the error handler: MPI_ERR_ARG for a NULL argument
 * or a coordinate off the torus, MPI_ERR_RANK for a rank outside
 * MPI_COMM_WORLD. Implemented in src/adi/torx_misc.c. Fortran: the same
 * names as subroutines with a final ierror argument (coordinate arrays of
 * 4 INTEGERs; MPIX_HARDWARE fills an INTEGER array of MPIX_HW_FIELDS, in
 * the order of the struct below). */

#define MPIX_TORUS_MAX_DIMS 3 /* x, y, z; t comes after them in arrays */

/* TORX_MODE, in MPIX_Hardware_t.mode. */
#define MPIX_MODE_HEATER 0
#define MPIX_MODE_CO 1
#define MPIX_MODE_VN 2

typedef struct {
    unsigned prank;    /* this task's place irrespective of the mapping:
                        * ((z * Y + y) * X + x) * T + t */
    unsigned psize;    /* tasks the torus holds: X * Y * Z * T */
    unsigned ppn;      /* tasks per node (T) */
    unsigned coreID;   /* this task's t */
    unsigned clockMHz; /* the host CPU's clock (/proc/cpuinfo), 0 if unknown */
    unsigned memSize;  /* the host's memory in MiB */
    unsigned torus_dimension;              /* 3 */
    unsigned Size[MPIX_TORUS_MAX_DIMS];    /* X, Y, Z */
    unsigned Coords[MPIX_TORUS_MAX_DIMS];  /* this task's x, y, z */
    unsigned isTorus[MPIX_TORUS_MAX_DIMS]; /* 1: every dimension wraps around */
    unsigned mode;                         /* MPIX_MODE_* (torx's own field) */
} MPIX_Hardware_t;
#define MPIX_HW_FIELDS 17 /* unsigned fields of MPIX_Hardware_t, for Fortran */

/* Fills *hw for the calling task. */
int MPIX_Hardware(MPIX_Hardware_t *hw);
/* The torus dimensions, without t: 3. */
int MPIX_Torus_ndims(int *numdim);
/* coords[0..3] = x, y, z, t of rank. */
int MPIX_Rank2torus(int rank, int *coords);
/* *rank = the rank at coords[0..3] (x, y, z, t), or MPI_PROC_NULL when no
 * task sits there (a job smaller than the torus). */
int MPIX_Torus2rank(int *coords, int *rank);
/* A new communicator over MPI_COMM_WORLD with a 4-D periodic Cartesian
 * topology of dims {X, Y, Z, T} (t not periodic) in which every task's
 * Cartesian coordinates are its torus coordinates, whatever the mapping: its
 * rank there is ((x * Y + y) * Z + z) * T + t (MPI's row-major order).
 * Collective over MPI_COMM_WORLD. MPI_ERR_TOPOLOGY when the job does not
 * fill the torus. Free it with MPI_Comm_free. */
int MPIX_Cart_comm_create(MPI_Comm *cart_comm);

#ifdef __cplusplus
}
#endif

#endif /* MPIX_H_INCLUDED */
