/* torx MPI test: a task that dies in the middle of communication.
 *
 *   die WHERE HOW
 *
 * WHERE: where the others are when rank 1 dies
 *   recv  rank 0 is blocked in MPI_Recv from rank 1 (other ranks in MPI_Barrier)
 *   coll  every other rank is in MPI_Allreduce with rank 1
 *   rzv   rank 1 starts a 4 MiB MPI_Isend to rank 0 and dies once rank 0 has
 *         seen the message (MPI_Iprobe); rank 0 posts its receive 300 ms later,
 *         so that it matches a rendezvous whose sender is dead
 * HOW: how rank 1 dies
 *   kill  raise(SIGKILL)
 *   exit1 _exit(1), without MPI_Finalize
 *   exit0 _exit(0), without MPI_Finalize
 *
 * The job must end (non-zero) soon, with a message naming rank 1; it must not
 * hang. test/mpi/run.sh runs it under timeout and checks that. Everything here
 * prints "die:" lines so that the log shows how far each rank got. If the job
 * did not end, a watchdog (DIE_TIMEOUT seconds, default 45) makes every
 * surviving rank say where it is stuck and exit with 99. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BIG (4 << 20)

static int rank;
static const char *where_now = "start";

static void watchdog(int sig)
{
    (void)sig;
    char msg[300];
    int len =
        snprintf(msg, sizeof msg, "die: rank %d: WATCHDOG: still in %s; the job did not end\n",
                 rank, where_now);
    if (len > 0)
        (void)!write(1, msg, (size_t)len);
    _exit(99);
}

static void die(const char *how)
{
    printf("die: rank 1: dying now (%s)\n", how);
    fflush(stdout);
    if (!strcmp(how, "kill"))
        raise(SIGKILL);
    _exit(!strcmp(how, "exit0") ? 0 : 1);
}

int main(int argc, char **argv)
{
    int size;
    if (argc != 3) {
        fprintf(stderr, "usage: die recv|coll|rzv kill|exit1|exit0\n");
        return 2;
    }
    const char *where = argv[1], *how = argv[2];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *t = getenv("DIE_TIMEOUT");
    signal(SIGALRM, watchdog);
    alarm(t && atoi(t) > 0 ? (unsigned)atoi(t) : 45u);

    /* some traffic first, so that rank 1 dies in the middle of a conversation */
    char *buf = calloc(BIG, 1);
    int token = 0;
    for (int i = 0; i < 10; i++) {
        where_now = "the warm-up ring";
        MPI_Sendrecv_replace(&token, 1, MPI_INT, (rank + 1) % size, 0, (rank + size - 1) % size, 0,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Allreduce(MPI_IN_PLACE, &token, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
    if (rank == 0)
        MPI_Recv(buf, 3000, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else if (rank == 1)
        MPI_Send(buf, 3000, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
    printf("die: rank %d: warm-up done (pid %d)\n", rank, (int)getpid());
    fflush(stdout);

    if (!strcmp(where, "recv")) {
        if (rank == 1) {
            usleep(300000); /* let rank 0 block */
            die(how);
        } else if (rank == 0) {
            where_now = "MPI_Recv from rank 1";
            printf("die: rank 0: blocked in MPI_Recv from rank 1\n");
            fflush(stdout);
            MPI_Recv(buf, 100, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            where_now = "MPI_Barrier";
            MPI_Barrier(MPI_COMM_WORLD);
        }
    } else if (!strcmp(where, "coll")) {
        if (rank == 1) {
            usleep(300000);
            die(how);
        }
        where_now = "MPI_Allreduce";
        printf("die: rank %d: in MPI_Allreduce\n", rank);
        fflush(stdout);
        MPI_Allreduce(MPI_IN_PLACE, buf, 1000, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    } else {
        if (rank == 1) {
            MPI_Request req;
            int flag;
            MPI_Isend(buf, BIG, MPI_BYTE, 0, 3, MPI_COMM_WORLD, &req);
            where_now = "waiting for rank 0 to see the message";
            MPI_Recv(NULL, 0, MPI_BYTE, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
            die(how);
        } else if (rank == 0) {
            int flag = 0;
            where_now = "MPI_Iprobe for the 4 MiB message of rank 1";
            while (!flag)
                MPI_Iprobe(1, 3, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
            MPI_Send(NULL, 0, MPI_BYTE, 1, 4, MPI_COMM_WORLD);
            usleep(300000); /* rank 1 dies meanwhile */
            where_now = "MPI_Recv of 4 MiB from the dead rank 1";
            printf("die: rank 0: receiving 4 MiB from rank 1, which should be dead\n");
            fflush(stdout);
            MPI_Recv(buf, BIG, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            where_now = "MPI_Barrier";
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    /* Not reached when the job is aborted: getting here means an operation with
     * the dead rank completed. */
    printf("die: rank %d: the operation with the dead rank 1 returned; finalizing\n", rank);
    fflush(stdout);
    where_now = "MPI_Finalize";
    MPI_Finalize();
    return 1;
}
