/*
 * torx netmod: datatype and reduction-operation hooks (nothing to do yet),
 * and the MPIX machine queries of <mpix.h> (MPIX_Hardware, MPIX_Torus_ndims,
 * MPIX_Rank2torus, MPIX_Torus2rank, MPIX_Cart_comm_create) with their
 * Fortran bindings. They read the rank map torx_init settled: the torus
 * shape, the mapping in force and the mode.
 */
#include "mpidimpl.h"
#include "torx_impl.h"

#include "mpix.h"
#include <stdio.h>
#include <unistd.h>

int MPIDI_TORX_mpi_type_commit_hook(MPIR_Datatype * datatype_p)
{
    return MPI_SUCCESS;
}

int MPIDI_TORX_mpi_type_free_hook(MPIR_Datatype * datatype_p)
{
    return MPI_SUCCESS;
}

int MPIDI_TORX_mpi_op_commit_hook(MPIR_Op * op_p)
{
    return MPI_SUCCESS;
}

int MPIDI_TORX_mpi_op_free_hook(MPIR_Op * op_p)
{
    return MPI_SUCCESS;
}

/* ---- MPIX machine queries ------------------------------------------------------ */

int MPIX_Hardware(MPIX_Hardware_t * hw) MPICH_API_PUBLIC;
int MPIX_Torus_ndims(int *numdim) MPICH_API_PUBLIC;
int MPIX_Rank2torus(int rank, int *coords) MPICH_API_PUBLIC;
int MPIX_Torus2rank(int *coords, int *rank) MPICH_API_PUBLIC;
int MPIX_Cart_comm_create(MPI_Comm * cart_comm) MPICH_API_PUBLIC;

/* The job's map, or NULL before MPI_Init and after MPI_Finalize. */
static const torx_map_t *job_map(void)
{
    return MPIDI_TORX_global.ctx ? torx_ctx_map(MPIDI_TORX_global.ctx) : NULL;
}

static unsigned host_clock_mhz(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0;
    char line[256];
    double mhz = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "cpu MHz : %lf", &mhz) == 1)
            break;
    fclose(f);
    return mhz > 0 && mhz < 1e6 ? (unsigned) (mhz + 0.5) : 0;
}

int MPIX_Hardware(MPIX_Hardware_t * hw)
{
    const torx_map_t *map = job_map();
    if (!map)
        return MPI_ERR_OTHER;
    if (!hw)
        return MPI_ERR_ARG;
    const torx_shape_t s = map->shape;
    const torx_coord_t c = torx_map_coord(map, MPIDI_TORX_global.rank);
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    memset(hw, 0, sizeof *hw);
    hw->ppn = s.t;
    hw->psize = (unsigned) s.x * s.y * s.z * s.t;
    hw->prank = (((unsigned) c.z * s.y + c.y) * s.x + c.x) * s.t + c.t;
    hw->coreID = c.t;
    hw->clockMHz = host_clock_mhz();
    hw->memSize = pages > 0 && page > 0 ? (unsigned) (((unsigned long long) pages * page) >> 20) : 0;
    hw->torus_dimension = MPIX_TORUS_MAX_DIMS;
    hw->Size[0] = s.x;
    hw->Size[1] = s.y;
    hw->Size[2] = s.z;
    hw->Coords[0] = c.x;
    hw->Coords[1] = c.y;
    hw->Coords[2] = c.z;
    for (int d = 0; d < MPIX_TORUS_MAX_DIMS; d++)
        hw->isTorus[d] = 1;     /* the emulated torus wraps in every dimension */
    switch (torx_mode(MPIDI_TORX_global.ctx)) {
        case TORX_MODE_CO:
            hw->mode = MPIX_MODE_CO;
            break;
        case TORX_MODE_VN:
            hw->mode = MPIX_MODE_VN;
            break;
        default:
            hw->mode = MPIX_MODE_HEATER;
    }
    return MPI_SUCCESS;
}

int MPIX_Torus_ndims(int *numdim)
{
    if (!job_map())
        return MPI_ERR_OTHER;
    if (!numdim)
        return MPI_ERR_ARG;
    *numdim = MPIX_TORUS_MAX_DIMS;
    return MPI_SUCCESS;
}

int MPIX_Rank2torus(int rank, int *coords)
{
    const torx_map_t *map = job_map();
    if (!map)
        return MPI_ERR_OTHER;
    if (!coords)
        return MPI_ERR_ARG;
    if (rank < 0 || rank >= map->ntasks)
        return MPI_ERR_RANK;
    const torx_coord_t c = torx_map_coord(map, rank);
    coords[0] = c.x;
    coords[1] = c.y;
    coords[2] = c.z;
    coords[3] = c.t;
    return MPI_SUCCESS;
}

int MPIX_Torus2rank(int *coords, int *rank)
{
    const torx_map_t *map = job_map();
    if (!map)
        return MPI_ERR_OTHER;
    if (!coords || !rank)
        return MPI_ERR_ARG;
    const torx_shape_t s = map->shape;
    if (coords[0] < 0 || coords[0] >= s.x || coords[1] < 0 || coords[1] >= s.y ||
        coords[2] < 0 || coords[2] >= s.z || coords[3] < 0 || coords[3] >= s.t)
        return MPI_ERR_ARG;
    const torx_coord_t c = {.x = (uint8_t) coords[0], .y = (uint8_t) coords[1],
        .z = (uint8_t) coords[2], .t = (uint8_t) coords[3]
    };
    const int r = torx_map_rank(map, c);
    *rank = r >= 0 ? r : MPI_PROC_NULL;
    return MPI_SUCCESS;
}

int MPIX_Cart_comm_create(MPI_Comm * cart_comm)
{
    const torx_map_t *map = job_map();
    if (!map)
        return MPI_ERR_OTHER;
    if (!cart_comm)
        return MPI_ERR_ARG;
    const torx_shape_t s = map->shape;
    const int dims[4] = { s.x, s.y, s.z, s.t };
    const int periods[4] = { 1, 1, 1, 0 };
    if (map->ntasks != dims[0] * dims[1] * dims[2] * dims[3])
        return MPI_ERR_TOPOLOGY;        /* every task agrees: one map per job */
    /* Order the tasks as MPI numbers a Cartesian grid (row-major, t
     * fastest), then lay the grid over them unreordered: each task's
     * Cartesian coordinates are its torus coordinates. */
    const torx_coord_t c = torx_map_coord(map, MPIDI_TORX_global.rank);
    const int key = ((c.x * dims[1] + c.y) * dims[2] + c.z) * dims[3] + c.t;
    MPI_Comm ordered;
    int err = PMPI_Comm_split(MPI_COMM_WORLD, 0, key, &ordered);
    if (err != MPI_SUCCESS)
        return err;
    err = PMPI_Cart_create(ordered, 4, dims, periods, 0, cart_comm);
    PMPI_Comm_free(&ordered);
    return err;
}

/* ---- Fortran (gfortran's names: lower case, one underscore) ------------------- */

void mpix_hardware_(MPI_Fint * hw, MPI_Fint * ierr) MPICH_API_PUBLIC;
void mpix_torus_ndims_(MPI_Fint * numdim, MPI_Fint * ierr) MPICH_API_PUBLIC;
void mpix_rank2torus_(MPI_Fint * rank, MPI_Fint * coords, MPI_Fint * ierr) MPICH_API_PUBLIC;
void mpix_torus2rank_(MPI_Fint * coords, MPI_Fint * rank, MPI_Fint * ierr) MPICH_API_PUBLIC;
void mpix_cart_comm_create_(MPI_Fint * cart_comm, MPI_Fint * ierr) MPICH_API_PUBLIC;

void mpix_hardware_(MPI_Fint * hw, MPI_Fint * ierr)
{
    MPIX_Hardware_t h;
    *ierr = MPIX_Hardware(&h);
    if (*ierr != MPI_SUCCESS)
        return;
    const unsigned f[MPIX_HW_FIELDS] = { h.prank, h.psize, h.ppn, h.coreID, h.clockMHz, h.memSize,
        h.torus_dimension, h.Size[0], h.Size[1], h.Size[2], h.Coords[0], h.Coords[1], h.Coords[2],
        h.isTorus[0], h.isTorus[1], h.isTorus[2], h.mode
    };
    for (int i = 0; i < MPIX_HW_FIELDS; i++)
        hw[i] = (MPI_Fint) f[i];
}

void mpix_torus_ndims_(MPI_Fint * numdim, MPI_Fint * ierr)
{
    int n = 0;
    *ierr = MPIX_Torus_ndims(&n);
    if (*ierr == MPI_SUCCESS)
        *numdim = n;
}

void mpix_rank2torus_(MPI_Fint * rank, MPI_Fint * coords, MPI_Fint * ierr)
{
    int c[4];
    *ierr = MPIX_Rank2torus((int) *rank, c);
    if (*ierr == MPI_SUCCESS)
        for (int i = 0; i < 4; i++)
            coords[i] = c[i];
}

void mpix_torus2rank_(MPI_Fint * coords, MPI_Fint * rank, MPI_Fint * ierr)
{
    int c[4] = { (int) coords[0], (int) coords[1], (int) coords[2], (int) coords[3] };
    int r = MPI_PROC_NULL;
    *ierr = MPIX_Torus2rank(c, &r);
    if (*ierr == MPI_SUCCESS)
        *rank = r;
}

void mpix_cart_comm_create_(MPI_Fint * cart_comm, MPI_Fint * ierr)
{
    MPI_Comm c = MPI_COMM_NULL;
    *ierr = MPIX_Cart_comm_create(&c);
    if (*ierr == MPI_SUCCESS)
        *cart_comm = PMPI_Comm_c2f(c);
}
