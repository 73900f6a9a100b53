/* The MPIX machine queries of <mpix.h> (src/adi/torx_misc.c), checked
 * against what the job was started with: the mode (TORX_MODE), the mapping
 * (TORX_MAPPING: the default XYZT order, another order, or a mapping file
 * whose lines this program reads itself), and each other:
 *  - MPIX_Torus_ndims is 3; MPIX_Hardware's coordinates are
 *    MPIX_Rank2torus's for this rank, its tasks per node the mode's (1 in
 *    heater and co, 2 in vn), its mode field TORX_MODE's;
 *  - every rank's coordinates are on the torus, distinct, and as the
 *    mapping says; MPIX_Torus2rank inverts MPIX_Rank2torus for every rank
 *    and gives MPI_PROC_NULL at every empty slot;
 *  - MPIX_Cart_comm_create: when the job fills the torus, every task's
 *    Cartesian coordinates are its torus coordinates and MPI_Cart_shift's
 *    neighbours are the torus neighbours; otherwise MPI_ERR_TOPOLOGY;
 *  - a rank or coordinate out of range, or NULL, is an MPI error code, not
 *    a crash.
 * Prints " No Errors" on rank 0 when every check passed on every rank. */
#include <mpi.h>
#include <mpix.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int errors;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL rank %d line %d: ", wrank, __LINE__);                            \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            errors++;                                                                              \
        }                                                                                          \
    } while (0)

static int wrank, wsize;

/* Expected coordinates of rank r: a mapping file's line, or the order
 * string's mixed radix (first letter fastest). Returns 0 when unknown. */
static int expected(const char *mapping, const unsigned size[4], int r, int c[4])
{
    const char *order = mapping && *mapping ? mapping : "XYZT";
    if (strlen(order) == 4 && strspn(order, "XYZTxyzt") == 4) {
        long v = r;
        for (int i = 0; i < 4; i++) {
            const int d = (int)(strchr("XYZT", order[i] & ~0x20) - "XYZT");
            c[d] = (int)(v % size[d]);
            v /= size[d];
        }
        return 1;
    }
    FILE *f = fopen(mapping, "r");
    if (!f)
        return 0;
    char line[256];
    int n = 0, found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        const char *p = line + strspn(line, " \t");
        if (*p == '#' || *p == '\n' || *p == '\0')
            continue;
        if (n++ == r)
            found = sscanf(p, "%d %d %d %d", &c[0], &c[1], &c[2], &c[3]) == 4;
    }
    fclose(f);
    return found;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    const char *mode_env = getenv("TORX_MODE");
    const char *mapping = getenv("TORX_MAPPING");

    int nd = 0;
    CHECK(MPIX_Torus_ndims(&nd) == MPI_SUCCESS && nd == 3, "ndims %d", nd);
    MPIX_Hardware_t hw;
    CHECK(MPIX_Hardware(&hw) == MPI_SUCCESS, "MPIX_Hardware failed");
    const unsigned size[4] = {hw.Size[0], hw.Size[1], hw.Size[2], hw.ppn};
    const int slots = (int)(size[0] * size[1] * size[2] * size[3]);
    CHECK(hw.torus_dimension == 3 && hw.psize == (unsigned)slots && slots >= wsize,
          "dimension %u, psize %u, slots %d, %d tasks", hw.torus_dimension, hw.psize, slots, wsize);
    const int vn = mode_env && !strcmp(mode_env, "vn"), co = mode_env && !strcmp(mode_env, "co");
    CHECK(hw.ppn == (vn ? 2u : 1u), "%u tasks per node in mode %s", hw.ppn,
          mode_env ? mode_env : "(default)");
    CHECK(hw.mode == (unsigned)(vn ? MPIX_MODE_VN : co ? MPIX_MODE_CO : MPIX_MODE_HEATER),
          "mode field %u", hw.mode);
    CHECK(hw.isTorus[0] == 1 && hw.isTorus[1] == 1 && hw.isTorus[2] == 1, "isTorus");
    CHECK(hw.memSize > 0, "memSize 0");

    int mine[4];
    CHECK(MPIX_Rank2torus(wrank, mine) == MPI_SUCCESS, "Rank2torus(self)");
    CHECK((unsigned)mine[0] == hw.Coords[0] && (unsigned)mine[1] == hw.Coords[1] &&
              (unsigned)mine[2] == hw.Coords[2] && (unsigned)mine[3] == hw.coreID,
          "MPIX_Hardware says (%u,%u,%u,%u), Rank2torus (%d,%d,%d,%d)", hw.Coords[0],
          hw.Coords[1], hw.Coords[2], hw.coreID, mine[0], mine[1], mine[2], mine[3]);
    CHECK(hw.prank == ((hw.Coords[2] * size[1] + hw.Coords[1]) * size[0] + hw.Coords[0]) *
                              size[3] + hw.coreID,
          "prank %u", hw.prank);

    /* Every rank: on the torus, as the mapping says, and found again. */
    char *seen = calloc((size_t)slots, 1);
    for (int r = 0; r < wsize; r++) {
        int c[4], e[4], back = -1;
        CHECK(MPIX_Rank2torus(r, c) == MPI_SUCCESS, "Rank2torus(%d)", r);
        int on = 1;
        for (int d = 0; d < 4; d++)
            on &= c[d] >= 0 && (unsigned)c[d] < size[d];
        CHECK(on, "rank %d at (%d,%d,%d,%d), off the torus", r, c[0], c[1], c[2], c[3]);
        if (!on)
            continue;
        const int slot = ((c[3] * (int)size[2] + c[2]) * (int)size[1] + c[1]) * (int)size[0] + c[0];
        CHECK(!seen[slot], "rank %d shares (%d,%d,%d,%d)", r, c[0], c[1], c[2], c[3]);
        seen[slot] = 1;
        if (expected(mapping, size, r, e))
            CHECK(!memcmp(c, e, sizeof c), "rank %d at (%d,%d,%d,%d), the mapping says (%d,%d,%d,%d)",
                  r, c[0], c[1], c[2], c[3], e[0], e[1], e[2], e[3]);
        else
            CHECK(0, "cannot read the expected place of rank %d from '%s'", r, mapping);
        CHECK(MPIX_Torus2rank(c, &back) == MPI_SUCCESS && back == r, "Torus2rank gives %d for %d",
              back, r);
    }
    for (int x = 0; x < (int)size[0]; x++)
        for (int y = 0; y < (int)size[1]; y++)
            for (int z = 0; z < (int)size[2]; z++)
                for (int t = 0; t < (int)size[3]; t++) {
                    int c[4] = {x, y, z, t}, r = -2;
                    const int slot = ((t * (int)size[2] + z) * (int)size[1] + y) * (int)size[0] + x;
                    CHECK(MPIX_Torus2rank(c, &r) == MPI_SUCCESS, "Torus2rank");
                    if (!seen[slot])
                        CHECK(r == MPI_PROC_NULL, "empty slot gives rank %d", r);
                }
    free(seen);

    /* Out of range and NULL: error codes. */
    int c[4] = {0, 0, 0, 0}, r = 0;
    CHECK(MPIX_Rank2torus(-1, c) == MPI_ERR_RANK, "rank -1");
    CHECK(MPIX_Rank2torus(wsize, c) == MPI_ERR_RANK, "rank %d", wsize);
    CHECK(MPIX_Rank2torus(0, NULL) == MPI_ERR_ARG, "NULL coords");
    for (int d = 0; d < 4; d++) {
        int bad[4] = {0, 0, 0, 0};
        bad[d] = (int)size[d];
        CHECK(MPIX_Torus2rank(bad, &r) == MPI_ERR_ARG, "coordinate %d = %u accepted", d, size[d]);
        bad[d] = -1;
        CHECK(MPIX_Torus2rank(bad, &r) == MPI_ERR_ARG, "coordinate %d = -1 accepted", d);
    }
    CHECK(MPIX_Torus2rank(NULL, &r) == MPI_ERR_ARG && MPIX_Torus2rank(c, NULL) == MPI_ERR_ARG,
          "NULL to Torus2rank");
    CHECK(MPIX_Hardware(NULL) == MPI_ERR_ARG && MPIX_Torus_ndims(NULL) == MPI_ERR_ARG,
          "NULL to Hardware/Torus_ndims");
    CHECK(MPIX_Cart_comm_create(NULL) == MPI_ERR_ARG, "NULL to Cart_comm_create");

    /* The Cartesian communicator. */
    MPI_Comm cart = MPI_COMM_NULL;
    const int rc = MPIX_Cart_comm_create(&cart);
    if (slots == wsize) {
        CHECK(rc == MPI_SUCCESS && cart != MPI_COMM_NULL, "Cart_comm_create: %d", rc);
        if (rc == MPI_SUCCESS) {
            int crank, cc[4], dims[4], periods[4], cco[4];
            MPI_Comm_rank(cart, &crank);
            MPI_Cart_get(cart, 4, dims, periods, cco);
            MPI_Cart_coords(cart, crank, 4, cc);
            CHECK(!memcmp(cc, mine, sizeof cc) && !memcmp(cco, mine, sizeof cco),
                  "Cartesian (%d,%d,%d,%d), torus (%d,%d,%d,%d)", cc[0], cc[1], cc[2], cc[3],
                  mine[0], mine[1], mine[2], mine[3]);
            for (int d = 0; d < 4; d++)
                CHECK(dims[d] == (int)size[d] && periods[d] == (d < 3), "dim %d: %d, periodic %d",
                      d, dims[d], periods[d]);
            /* +1 along x: the torus neighbour, found through world ranks. */
            int src, dst, want[4] = {mine[0], mine[1], mine[2], mine[3]}, wdst, gdst;
            MPI_Cart_shift(cart, 0, 1, &src, &dst);
            want[0] = (mine[0] + 1) % (int)size[0];
            MPIX_Torus2rank(want, &wdst);
            MPI_Group wg, cg;
            MPI_Comm_group(MPI_COMM_WORLD, &wg);
            MPI_Comm_group(cart, &cg);
            MPI_Group_translate_ranks(cg, 1, &dst, wg, &gdst);
            CHECK(gdst == wdst, "x+1 neighbour: world rank %d, torus says %d", gdst, wdst);
            /* and a message goes round the x ring */
            int token = wrank, got = -1;
            MPI_Sendrecv(&token, 1, MPI_INT, dst, 7, &got, 1, MPI_INT, src, 7, cart,
                         MPI_STATUS_IGNORE);
            int wsrc;
            MPI_Group_translate_ranks(cg, 1, &src, wg, &wsrc);
            CHECK(got == wsrc, "got %d from the x-1 neighbour, world rank %d", got, wsrc);
            MPI_Group_free(&wg);
            MPI_Group_free(&cg);
            MPI_Comm_free(&cart);
        }
    } else {
        CHECK(rc == MPI_ERR_TOPOLOGY, "a job smaller than the torus: Cart_comm_create gave %d",
              rc);
    }

    int all = 0;
    MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0) {
        printf("mpix: torus %ux%ux%u, %u per node, mode %u, %d tasks\n", size[0], size[1], size[2],
               size[3], hw.mode, wsize);
        if (all == 0)
            printf(" No Errors\n");
        else
            printf(" Found %d errors\n", all);
    }
    MPI_Finalize();
    return all != 0;
}
