/* torx MPI test: a token goes around the ring, for message sizes that take
 * every path (one packet, torx eager, torx rendezvous, MPIDIG rendezvous);
 * every rank checks every byte it receives. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpi_test.h"

static unsigned char pattern(int size_idx, int lap, long i)
{
    return (unsigned char)(size_idx * 31 + lap * 7 + i * 13);
}

int main(int argc, char **argv)
{
    int rank, size, errs = 0;
    const long sizes[] = {0, 1, 100, 230, 1000, 4096, 10000, 65536, 1 << 20};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    const int laps = 3;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    unsigned char *buf = malloc(1 << 20);

    for (int s = 0; s < nsizes; s++) {
        long n = sizes[s];
        for (int lap = 0; lap < laps; lap++) {
            if (rank == 0) {
                for (long i = 0; i < n; i++)
                    buf[i] = pattern(s, lap, i);
                MPI_Send(buf, (int)n, MPI_BYTE, next, s, MPI_COMM_WORLD);
            }
            MPI_Status st;
            int count;
            MPI_Recv(buf, (int)n, MPI_BYTE, prev, s, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_BYTE, &count);
            if (count != n || st.MPI_SOURCE != prev || st.MPI_TAG != s) {
                printf("rank %d: size %ld lap %d: count %d source %d tag %d\n", rank, n, lap, count,
                       st.MPI_SOURCE, st.MPI_TAG);
                errs++;
            }
            for (long i = 0; i < n; i++)
                if (buf[i] != pattern(s, lap, i)) {
                    printf("rank %d: size %ld lap %d: byte %ld is %d, expected %d\n", rank, n, lap,
                           i, buf[i], pattern(s, lap, i));
                    errs++;
                    break;
                }
            if (rank != 0)
                MPI_Send(buf, (int)n, MPI_BYTE, next, s, MPI_COMM_WORLD);
        }
    }
    free(buf);
    return mpi_test_finish(rank, errs);
}
