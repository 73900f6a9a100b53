/* fpsum: MPI_Allreduce and MPI_Reduce with MPI_SUM of MPI_FLOAT, MPI_DOUBLE
 * and MPI_LONG_DOUBLE, at 1, 3, 1,024, 4,096 and 65,537 elements, against
 * MPICH's own operator (MPI_Reduce_local, in rank order) applied to every
 * rank's input (gathered with MPI_Allgather).
 *
 * At 2 ranks any order of a sum gives the same bits (a + b == b + a), so the
 * result must equal MPICH's bit for bit, whichever algorithm ran. At more
 * ranks torx's reproducible sum may round otherwise than MPICH's order: each
 * element must then lie within (n - 1) units of rounding of the sum of
 * magnitudes (the bound of any summation order). Either way every rank must
 * get the same bits, and a second call the same bits again
 * (docs/collectives.md#reproducible-sums). The inputs mix signs and 40
 * binary orders of magnitude, so that the order of the terms matters.
 * Prints " No Errors" when everything held. */
#include <float.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int errors, rank, size;

#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            if (++errors <= 10) {                                                                  \
                printf("fpsum: rank %d: ", rank);                                                  \
                printf(__VA_ARGS__);                                                               \
                printf("\n");                                                                      \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

typedef struct {
    MPI_Datatype dt;
    const char *name;
    size_t size;
    long double eps;
} fptype_t;

static const fptype_t fptypes[] = {
    {MPI_FLOAT, "MPI_FLOAT", sizeof(float), FLT_EPSILON},
    {MPI_DOUBLE, "MPI_DOUBLE", sizeof(double), DBL_EPSILON},
    {MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE", sizeof(long double), LDBL_EPSILON},
};

static long double get(const fptype_t *t, const void *buf, size_t i)
{
    if (t->size == sizeof(float))
        return ((const float *)buf)[i];
    if (t->size == sizeof(double))
        return ((const double *)buf)[i];
    return ((const long double *)buf)[i];
}

static void put(const fptype_t *t, void *buf, size_t i, long double v)
{
    if (t->size == sizeof(float))
        ((float *)buf)[i] = (float)v;
    else if (t->size == sizeof(double))
        ((double *)buf)[i] = (double)v;
    else
        ((long double *)buf)[i] = v;
}

/* Compares one result: equal bits at 2 ranks, else within the bound. */
static void check_result(const fptype_t *t, const char *what, size_t count, const void *got,
                         const void *ref, const void *mag)
{
    const int exact = size == 2;
    for (size_t i = 0; i < count; i++) {
        const long double g = get(t, got, i), r = get(t, ref, i);
        if (exact) {
            CHECK(memcmp((const char *)got + i * t->size, (const char *)ref + i * t->size,
                         t->size == sizeof(long double) ? 10 : t->size) == 0,
                  "%s of %zu %s: element %zu is %.21Lg, MPICH's is %.21Lg (2 ranks: must be "
                  "equal)",
                  what, count, t->name, i, g, r);
        } else {
            const long double bound = (size - 1) * t->eps * get(t, mag, i);
            CHECK(fabsl(g - r) <= bound,
                  "%s of %zu %s: element %zu is %.21Lg, MPICH's %.21Lg, "
                  "more than %.3Lg apart",
                  what, count, t->name, i, g, r, bound);
        }
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    static const size_t counts[] = {1, 3, 1024, 4096, 65537};
    enum { NCOUNTS = sizeof counts / sizeof counts[0] };
    const size_t max = counts[NCOUNTS - 1], lsize = sizeof(long double);
    char *in = malloc(max * lsize), *out = malloc(max * lsize), *again = malloc(max * lsize);
    char *all = malloc(max * lsize * (size_t)size), *ref = malloc(max * lsize);
    char *mag = malloc(max * lsize), *first = malloc(max * lsize);
    if (!in || !out || !again || !all || !ref || !mag || !first) {
        printf("fpsum: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t ti = 0; ti < sizeof fptypes / sizeof fptypes[0]; ti++) {
        const fptype_t *t = &fptypes[ti];
        for (int ci = 0; ci < NCOUNTS; ci++) {
            const size_t count = counts[ci], bytes = count * t->size;
            for (size_t i = 0; i < count; i++) {
                const uint64_t r = mix((uint64_t)rank << 40 ^ (uint64_t)ci << 32 ^ i ^ ti << 60);
                const long double m = (long double)(r >> 11) / 9007199254740992.0L - 0.5L;
                put(t, in, i, ldexpl(m, (int)(r % 40) - 20));
            }
            /* MPICH's sum, in rank order, of everyone's input; and the sum
             * of magnitudes for the bound */
            MPI_Allgather(in, (int)count, t->dt, all, (int)count, t->dt, MPI_COMM_WORLD);
            memcpy(ref, all, bytes);
            for (size_t i = 0; i < count; i++)
                put(t, mag, i, fabsl(get(t, all, i)));
            for (int r = 1; r < size; r++) {
                const char *theirs = all + (size_t)r * bytes;
                MPI_Reduce_local(theirs, ref, (int)count, t->dt, MPI_SUM);
                for (size_t i = 0; i < count; i++)
                    put(t, mag, i, get(t, mag, i) + fabsl(get(t, theirs, i)));
            }

            MPI_Allreduce(in, out, (int)count, t->dt, MPI_SUM, MPI_COMM_WORLD);
            check_result(t, "MPI_Allreduce", count, out, ref, mag);
            /* every rank the same bits as rank 0, and a second call too */
            memcpy(first, out, bytes);
            MPI_Bcast(first, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
            MPI_Allreduce(in, again, (int)count, t->dt, MPI_SUM, MPI_COMM_WORLD);
            for (size_t i = 0; i < count; i++) {
                const size_t n = t->size == sizeof(long double) ? 10 : t->size;
                CHECK(memcmp(out + i * t->size, first + i * t->size, n) == 0,
                      "MPI_Allreduce of %zu %s: element %zu differs from rank 0's", count, t->name,
                      i);
                CHECK(memcmp(out + i * t->size, again + i * t->size, n) == 0,
                      "MPI_Allreduce of %zu %s: element %zu differs in a second call", count,
                      t->name, i);
            }

            memset(out, 0, bytes);
            MPI_Reduce(in, out, (int)count, t->dt, MPI_SUM, size - 1, MPI_COMM_WORLD);
            if (rank == size - 1)
                check_result(t, "MPI_Reduce", count, out, ref, mag);
        }
    }
    free(in);
    free(out);
    free(again);
    free(all);
    free(ref);
    free(mag);
    free(first);

    int total;
    MPI_Reduce(&errors, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("fpsum: float, double and long double sums of 1 to 65,537 elements on %d ranks\n",
               size);
        if (total == 0)
            printf(" No Errors\n");
    }
    MPI_Finalize();
    return 0;
}
