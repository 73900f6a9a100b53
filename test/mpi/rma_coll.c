/* torx MPI test: one-sided (Put, Get, Accumulate, Fetch_and_op with fence
 * and lock/unlock; all carried by MPIDIG active messages over torx) and
 * collectives (Bcast, Allreduce, Alltoall, Allgather) with checked results. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpi_test.h"

#define N 4096

int main(int argc, char **argv)
{
    int rank, size, errs = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;

    /* ---- RMA ---- */
    long *winbuf;
    MPI_Win win;
    MPI_Win_allocate(2 * N * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &winbuf,
                     &win);
    long *src = malloc(N * sizeof(long)), *dst = malloc(N * sizeof(long));
    for (int i = 0; i < 2 * N; i++)
        winbuf[i] = 0;
    for (int i = 0; i < N; i++)
        src[i] = (long)rank * 1000000 + i;
    MPI_Win_fence(0, win);
    MPI_Put(src, N, MPI_LONG, next, 0, N, MPI_LONG, win);
    MPI_Win_fence(0, win);
    for (int i = 0; i < N; i++)
        if (winbuf[i] != (long)prev * 1000000 + i) {
            printf("rank %d: put: element %d is %ld\n", rank, i, winbuf[i]);
            errs++;
            break;
        }
    MPI_Get(dst, N, MPI_LONG, next, 0, N, MPI_LONG, win);
    MPI_Win_fence(0, win);
    for (int i = 0; i < N; i++)
        if (dst[i] != (long)rank * 1000000 + i) {
            printf("rank %d: get: element %d is %ld\n", rank, i, dst[i]);
            errs++;
            break;
        }
    /* everyone accumulates into rank 0's second half, a strided datatype */
    MPI_Datatype strided;
    MPI_Type_vector(N / 2, 1, 2, MPI_LONG, &strided);
    MPI_Type_commit(&strided);
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    MPI_Accumulate(src, N / 2, MPI_LONG, 0, N, 1, strided, MPI_SUM, win);
    MPI_Win_unlock(0, win);
    long one = 1, old;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
    MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, N + 1, MPI_SUM, win);
    MPI_Win_unlock(0, win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        for (int i = 0; i < N / 2; i++) {
            long want = 0;
            for (int r = 0; r < size; r++)
                want += (long)r * 1000000 + i;
            if (winbuf[N + 2 * i] != want) {
                printf("accumulate: element %d is %ld, expected %ld\n", i, winbuf[N + 2 * i], want);
                errs++;
                break;
            }
        }
        if (winbuf[N + 1] != size) {
            printf("fetch_and_op: counter is %ld, expected %d\n", winbuf[N + 1], size);
            errs++;
        }
        MPI_Win_unlock(0, win);
    }
    MPI_Type_free(&strided);
    MPI_Win_free(&win);

    /* ---- collectives ---- */
    long *v = malloc(N * sizeof(long) * size), *w = malloc(N * sizeof(long) * size);
    for (int i = 0; i < N; i++)
        v[i] = rank == size - 1 ? i * 3 : -1;
    MPI_Bcast(v, N, MPI_LONG, size - 1, MPI_COMM_WORLD);
    for (int i = 0; i < N; i++)
        if (v[i] != i * 3) {
            printf("rank %d: bcast: element %d is %ld\n", rank, i, v[i]);
            errs++;
            break;
        }
    for (int i = 0; i < N; i++)
        v[i] = rank + i;
    MPI_Allreduce(v, w, N, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < N; i++)
        if (w[i] != (long)size * (size - 1) / 2 + (long)size * i) {
            printf("rank %d: allreduce: element %d is %ld\n", rank, i, w[i]);
            errs++;
            break;
        }
    for (int r = 0; r < size; r++)
        for (int i = 0; i < 100; i++)
            v[r * 100 + i] = rank * 100000 + r * 1000 + i;
    MPI_Alltoall(v, 100, MPI_LONG, w, 100, MPI_LONG, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
        for (int i = 0; i < 100; i++)
            if (w[r * 100 + i] != r * 100000 + rank * 1000 + i) {
                printf("rank %d: alltoall: from %d element %d is %ld\n", rank, r, i,
                       w[r * 100 + i]);
                errs++;
                r = size;
                break;
            }
    long mine = rank * 7;
    MPI_Allgather(&mine, 1, MPI_LONG, w, 1, MPI_LONG, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
        if (w[r] != r * 7) {
            printf("rank %d: allgather: from %d is %ld\n", rank, r, w[r]);
            errs++;
            break;
        }

    free(src);
    free(dst);
    free(v);
    free(w);
    return mpi_test_finish(rank, errs);
}
