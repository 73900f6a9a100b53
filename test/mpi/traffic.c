/* traffic: every rank keeps eager, rendezvous (bulk) and collective traffic
 * going until it is killed, or for TRAFFIC_SECONDS (default 60). Used by
 * run.sh's kill section: a task is killed with SIGKILL at a random moment
 * of this traffic, or mpiexec is interrupted, and the job must end within
 * seconds, naming the rank, with nothing left behind.
 *
 * Prints "traffic: rank R pid P" for every rank, then "traffic: running"
 * once the first round of every kind of traffic has completed. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    printf("traffic: rank %d pid %d\n", rank, (int)getpid());
    fflush(stdout);
    const char *s = getenv("TRAFFIC_SECONDS");
    const double seconds = s ? atof(s) : 60.0;
    /* eager (3000 B), rendezvous by bulk get (256 KiB), one-packet (8 B) */
    static const int sizes[] = {8, 3000, 262144};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    char *sbuf = malloc(262144), *rbuf = malloc(262144);
    if (!sbuf || !rbuf)
        MPI_Abort(MPI_COMM_WORLD, 2);
    memset(sbuf, rank, 262144);
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    const double t0 = MPI_Wtime();
    for (long round = 0; MPI_Wtime() - t0 < seconds; round++) {
        for (int i = 0; i < nsizes; i++)
            MPI_Sendrecv(sbuf, sizes[i], MPI_CHAR, right, i, rbuf, sizes[i], MPI_CHAR, left, i,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        double x = rank, sum;
        MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Bcast(rbuf, 65536, MPI_CHAR, (int)(round % size), MPI_COMM_WORLD);
        if (round == 0 && rank == 0) {
            printf("traffic: running\n");
            fflush(stdout);
        }
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
