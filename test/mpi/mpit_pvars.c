/* mpit_pvars: torx's counters as MPI_T performance variables, read the way
 * any MPI_T tool reads them (no torx header): enumerate with
 * MPI_T_pvar_get_num and MPI_T_pvar_get_info, find the torx_ ones, read
 * them through an MPI_T pvar session before and after traffic of each
 * protocol, and check that each protocol's counters moved by what was
 * sent, and that a protocol that carried nothing did not move.
 *
 * 2 ranks, heater mode, default limits: 8 B goes one-packet, 2000 B eager,
 * 100000 B rendezvous. Prints " No Errors" when everything held. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int errors;

#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            errors++;                                                                              \
            printf("mpit_pvars: rank %d: ", rank);                                                 \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

enum { NWANT = 8 };
static const char *const want[NWANT] = {
    "torx_onepkt_messages_sent", "torx_onepkt_bytes_sent",   "torx_eager_messages_sent",
    "torx_eager_packets_sent",   "torx_rzv_messages_sent",   "torx_rzv_bytes_sent",
    "torx_vn_messages_sent",     "torx_netmod_p2p_sent",
};

int main(int argc, char **argv)
{
    int rank, size, provided;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);

    int num, ntorx = 0, idx[NWANT];
    for (int i = 0; i < NWANT; i++)
        idx[i] = -1;
    MPI_T_pvar_get_num(&num);
    for (int i = 0; i < num; i++) {
        char name[128], desc[256];
        int nlen = sizeof name, dlen = sizeof desc, verb, varclass, bind, ro, cont, atomic;
        MPI_Datatype dt;
        MPI_T_enum et;
        if (MPI_T_pvar_get_info(i, name, &nlen, &verb, &varclass, &dt, &et, desc, &dlen, &bind,
                                &ro, &cont, &atomic) != MPI_SUCCESS)
            continue;
        if (strncmp(name, "torx_", 5) != 0)
            continue;
        ntorx++;
        CHECK(varclass == MPI_T_PVAR_CLASS_COUNTER && dt == MPI_UNSIGNED_LONG_LONG &&
                  bind == MPI_T_BIND_NO_OBJECT && ro && cont,
              "%s: class %d, not a read-only continuous unsigned long long counter", name,
              varclass);
        for (int w = 0; w < NWANT; w++)
            if (strcmp(name, want[w]) == 0)
                idx[w] = i;
    }
    CHECK(ntorx == 38, "%d torx_ pvars, expected 38 (5 protocols x 6 + 8 netmod)", ntorx);
    for (int w = 0; w < NWANT; w++)
        CHECK(idx[w] >= 0, "no pvar %s", want[w]);

    MPI_T_pvar_session s;
    MPI_T_pvar_handle h[NWANT];
    MPI_T_pvar_session_create(&s);
    for (int w = 0; w < NWANT; w++) {
        int count;
        h[w] = MPI_T_PVAR_HANDLE_NULL;
        if (idx[w] >= 0)
            MPI_T_pvar_handle_alloc(s, idx[w], NULL, &h[w], &count);
    }
    unsigned long long before[NWANT] = {0}, after[NWANT] = {0};
    for (int w = 0; w < NWANT; w++)
        if (h[w] != MPI_T_PVAR_HANDLE_NULL)
            MPI_T_pvar_read(s, h[w], &before[w]);

    /* 10 one-packet, 10 eager (2000 B), 10 rendezvous (100000 B) messages
     * from rank 0 to rank 1. */
    enum { N = 10, EAGER = 2000, RZV = 100000 };
    char *buf = calloc(1, RZV);
    const int sizes[3] = {8, EAGER, RZV};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < N; i++) {
            if (rank == 0)
                MPI_Send(buf, sizes[k], MPI_CHAR, 1, k, MPI_COMM_WORLD);
            else if (rank == 1)
                MPI_Recv(buf, sizes[k], MPI_CHAR, 0, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }

    for (int w = 0; w < NWANT; w++)
        if (h[w] != MPI_T_PVAR_HANDLE_NULL)
            MPI_T_pvar_read(s, h[w], &after[w]);
    unsigned long long d[NWANT];
    for (int w = 0; w < NWANT; w++)
        d[w] = after[w] - before[w];
    if (rank == 0) {
        /* The MPI envelope is part of what torx sends, so bytes are at least
         * the data; one-packet may also carry a few internal messages. */
        CHECK(d[0] >= N, "torx_onepkt_messages_sent moved by %llu, want >= %d", d[0], N);
        CHECK(d[1] >= (unsigned long long)N * 8, "torx_onepkt_bytes_sent moved by %llu", d[1]);
        CHECK(d[2] == N, "torx_eager_messages_sent moved by %llu, want %d", d[2], N);
        /* 2000 B is staged (TORX_STAGE_MIN, default 232): one descriptor
         * packet per message, the data through the staging area. */
        CHECK(d[3] >= (unsigned long long)N, "torx_eager_packets_sent moved by %llu, want >= %d",
              d[3], N);
        CHECK(d[4] == N, "torx_rzv_messages_sent moved by %llu, want %d", d[4], N);
        CHECK(d[5] >= (unsigned long long)N * RZV, "torx_rzv_bytes_sent moved by %llu", d[5]);
        CHECK(d[6] == 0, "torx_vn_messages_sent moved by %llu in heater mode", d[6]);
        CHECK(d[7] >= 3 * N, "torx_netmod_p2p_sent moved by %llu, want >= %d", d[7], 3 * N);
    } else {
        CHECK(d[2] == 0 && d[4] == 0, "rank 1 sent eager %llu, rendezvous %llu messages", d[2],
              d[4]);
    }
    for (int w = 0; w < NWANT; w++)
        if (h[w] != MPI_T_PVAR_HANDLE_NULL)
            MPI_T_pvar_handle_free(s, &h[w]);
    MPI_T_pvar_session_free(&s);
    MPI_T_finalize();
    free(buf);

    int all;
    MPI_Reduce(&errors, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("mpit_pvars: %d torx_ pvars; rank 0 sent onepkt %llu, eager %llu (%llu packets), "
               "rendezvous %llu messages\n",
               ntorx, d[0], d[2], d[3], d[4]);
        if (all == 0)
            printf(" No Errors\n");
    }
    MPI_Finalize();
    return 0;
}
