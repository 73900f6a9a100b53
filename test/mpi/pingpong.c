/* torx MPI test: ping-pong between ranks 0 and 1 with a data check at every
 * size from 0 B to 4 MiB, then the half round-trip latency of small
 * messages; also MPI_Ssend, MPI_ANY_SOURCE/MPI_ANY_TAG, non-contiguous
 * datatypes, truncation (MPI_ERR_TRUNCATE) and message order. Other ranks
 * only take part in the checks' reductions. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_test.h"

#define MAXN (4L << 20)

static int errs;

static void fill(unsigned char *b, long n, int seed)
{
    for (long i = 0; i < n; i++)
        b[i] = (unsigned char)(seed + i * 7 + (i >> 8));
}

static void check(const unsigned char *b, long n, int seed, const char *what)
{
    for (long i = 0; i < n; i++)
        if (b[i] != (unsigned char)(seed + i * 7 + (i >> 8))) {
            printf("%s: size %ld: byte %ld wrong\n", what, n, i);
            errs++;
            return;
        }
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        if (rank == 0)
            printf("pingpong needs 2 ranks\n");
        MPI_Finalize();
        return 1;
    }
    unsigned char *a = malloc(MAXN), *b = malloc(MAXN);
    int peer = 1 - rank;

    if (rank < 2) {
        /* 1. data check at every size */
        for (long n = 0; n <= MAXN; n = n ? n * 2 : 1) {
            for (long m = n > 2 ? n - 1 : n; m <= n; m++) {
                if (rank == 0) {
                    fill(a, m, (int)m);
                    MPI_Send(a, (int)m, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                    memset(b, 0, m);
                    MPI_Recv(b, (int)m, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    check(b, m, (int)m + 1, "pong");
                } else {
                    memset(b, 0, m);
                    MPI_Recv(b, (int)m, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    check(b, m, (int)m, "ping");
                    fill(a, m, (int)m + 1);
                    MPI_Send(a, (int)m, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
                }
            }
        }

        /* 2. synchronous send, wildcard receive */
        if (rank == 0) {
            fill(a, 5000, 3);
            MPI_Ssend(a, 5000, MPI_BYTE, peer, 77, MPI_COMM_WORLD);
        } else {
            MPI_Status st;
            MPI_Recv(b, 5000, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            check(b, 5000, 3, "ssend/any");
            if (st.MPI_SOURCE != 0 || st.MPI_TAG != 77) {
                printf("any-source: source %d tag %d\n", st.MPI_SOURCE, st.MPI_TAG);
                errs++;
            }
        }

        /* 3. non-contiguous: every other int of 100000 */
        {
            MPI_Datatype vec;
            MPI_Type_vector(100000, 1, 2, MPI_INT, &vec);
            MPI_Type_commit(&vec);
            int *v = (int *)a;
            if (rank == 0) {
                for (int i = 0; i < 200000; i++)
                    v[i] = i;
                MPI_Send(v, 1, vec, peer, 5, MPI_COMM_WORLD);
            } else {
                int *r = (int *)b;
                MPI_Recv(r, 100000, MPI_INT, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (int i = 0; i < 100000; i++)
                    if (r[i] != 2 * i) {
                        printf("vector: element %d is %d\n", i, r[i]);
                        errs++;
                        break;
                    }
            }
            MPI_Type_free(&vec);
        }

        /* 4. order: many messages of mixed sizes with one tag, unexpected */
        {
            const int nmsg = 64;
            if (rank == 0) {
                for (int k = 0; k < nmsg; k++) {
                    long n = (k % 4 == 0) ? 50000 : (k % 4 == 1) ? 8 : (k % 4 == 2) ? 3000 : 0;
                    unsigned char *p = a + (k % 8) * 60000;
                    fill(p, n, k);
                    MPI_Send(p, (int)n, MPI_BYTE, peer, 9, MPI_COMM_WORLD);
                }
            } else {
                MPI_Barrier(MPI_COMM_SELF);
                for (volatile long spin = 0; spin < 20000000; spin++)
                    ; /* let them arrive unexpected */
                for (int k = 0; k < nmsg; k++) {
                    long n = (k % 4 == 0) ? 50000 : (k % 4 == 1) ? 8 : (k % 4 == 2) ? 3000 : 0;
                    MPI_Status st;
                    int count;
                    MPI_Recv(b, 60000, MPI_BYTE, peer, 9, MPI_COMM_WORLD, &st);
                    MPI_Get_count(&st, MPI_BYTE, &count);
                    if (count != n) {
                        printf("order: message %d has %d bytes, expected %ld\n", k, count, n);
                        errs++;
                    }
                    check(b, n, k, "order");
                }
            }
        }

        /* 5. truncation is MPI_ERR_TRUNCATE */
        {
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
            if (rank == 0) {
                MPI_Send(a, 1000, MPI_BYTE, peer, 11, MPI_COMM_WORLD);
                MPI_Send(a, 100000, MPI_BYTE, peer, 12, MPI_COMM_WORLD);
            } else {
                for (int t = 11; t <= 12; t++) {
                    int rc = MPI_Recv(b, 10, MPI_BYTE, peer, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    int cls;
                    MPI_Error_class(rc, &cls);
                    if (cls != MPI_ERR_TRUNCATE) {
                        printf("truncation (tag %d): error class %d, expected MPI_ERR_TRUNCATE\n",
                               t, cls);
                        errs++;
                    }
                }
            }
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        }

        /* 6. latency */
        for (long n = 1; n <= 65536; n *= 16) {
            int iters = n <= 4096 ? 2000 : 200;
            double t0 = 0;
            for (int i = -100; i < iters; i++) {
                if (i == 0)
                    t0 = MPI_Wtime();
                if (rank == 0) {
                    MPI_Send(a, (int)n, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
                    MPI_Recv(b, (int)n, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(b, (int)n, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(a, (int)n, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
                }
            }
            double t = (MPI_Wtime() - t0) / iters / 2;
            if (rank == 0)
                printf("pingpong %7ld B: %8.2f us half round trip, %8.1f MB/s\n", n, t * 1e6,
                       n / t / 1e6);
        }
    }
    free(a);
    free(b);
    return mpi_test_finish(rank, errs);
}
