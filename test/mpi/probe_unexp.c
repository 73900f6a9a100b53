/* torx MPI test: messages that arrive unexpected and are probed before they
 * are received, at sizes from one packet to past MPIDIG's eager limit.
 *
 * The receiver sends a zero-byte "go" message and probes at once, so the
 * reply is usually still arriving (its header is known, its data is not)
 * when MPI_Probe returns and the receive is posted. Every way of receiving a
 * probed message is checked: MPI_Recv, MPI_Irecv + MPI_Wait, MPI_Iprobe then
 * MPI_Recv, MPI_Mprobe + MPI_Mrecv; each checks the status (source, tag,
 * count) of both the probe and the receive, and every byte. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpi_test.h"

static unsigned char pattern(int tag, int src, long i)
{
    return (unsigned char)(tag * 31 + src * 7 + i * 13);
}

static int check(const char *what, int mode, long n, int tag, int src, const MPI_Status *st,
                 const unsigned char *buf)
{
    int count, errs = 0;
    MPI_Get_count(st, MPI_BYTE, &count);
    if (count != n || st->MPI_SOURCE != src || st->MPI_TAG != tag) {
        printf("%s (mode %d) size %ld: source %d (expected %d) tag %d (expected %d) count %d\n",
               what, mode, n, st->MPI_SOURCE, src, st->MPI_TAG, tag, count);
        errs++;
    }
    if (buf)
        for (long i = 0; i < n; i++)
            if (buf[i] != pattern(tag, src, i)) {
                printf("%s (mode %d) size %ld: byte %ld is %d, expected %d\n", what, mode, n, i,
                       buf[i], pattern(tag, src, i));
                errs++;
                break;
            }
    return errs;
}

int main(int argc, char **argv)
{
    int rank, size, errs = 0;
    const long sizes[] = {1, 64, 200, 256, 1000, 4096, 8000, 16000, 16384, 16385, 65536, 1 << 20};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    const int nmodes = 4, reps = 5;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    unsigned char *buf = malloc(1 << 20);

    for (int s = 0; s < nsizes; s++) {
        long n = sizes[s];
        for (int mode = 0; mode < nmodes; mode++) {
            for (int r = 0; r < reps; r++) {
                int tag = (s * nmodes + mode) * reps + r;
                MPI_Status st;
                if (rank == 0) {
                    for (int p = 1; p < size; p++) {
                        MPI_Recv(NULL, 0, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st);
                        if (st.MPI_TAG != tag) {
                            printf("rank 0: go message with tag %d, expected %d\n", st.MPI_TAG,
                                   tag);
                            errs++;
                        }
                        for (long i = 0; i < n; i++)
                            buf[i] = pattern(tag, 0, i);
                        MPI_Send(buf, (int)n, MPI_BYTE, st.MPI_SOURCE, tag, MPI_COMM_WORLD);
                    }
                } else {
                    MPI_Send(NULL, 0, MPI_BYTE, 0, tag, MPI_COMM_WORLD);
                    MPI_Message msg;
                    if (mode == 3) {
                        MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st);
                    } else if (mode == 2) {
                        int flag = 0;
                        while (!flag)
                            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
                    } else {
                        MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
                    }
                    errs += check("probe", mode, n, tag, 0, &st, NULL);
                    for (long i = 0; i < n; i++)
                        buf[i] = 0;
                    if (mode == 3) {
                        MPI_Mrecv(buf, (int)n, MPI_BYTE, &msg, &st);
                    } else if (mode == 1) {
                        MPI_Request req;
                        MPI_Irecv(buf, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &req);
                        MPI_Wait(&req, &st);
                    } else {
                        MPI_Recv(buf, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st);
                    }
                    errs += check("recv", mode, n, tag, 0, &st, buf);
                }
            }
        }
    }
    free(buf);
    return mpi_test_finish(rank, errs);
}
