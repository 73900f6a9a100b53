/* mpit_pvars: torx's counters as MPI_T performance variables, read the way
 * any MPI_T tool reads them (no torx header): enumerate with
 * MPI_T_pvar_get_num and MPI_T_pvar_get_info, find the torx_ ones, read
 * them through an MPI_T pvar session before and after traffic of each
 * protocol, and check that each protocol's counters moved by what was
 * sent, and that a protocol that carried nothing did not move.
 *
 * Rank 1's rendezvous data counters (torx_data_<path>_transfers and
 * _bytes) move by the rendezvous messages and their bytes, over all paths.
 * Then the collectives' counters: torx_coll_<collective>_<algorithm>_calls
 * and _bytes, and torx_coll_i<collective>_mpich_calls. Barriers, 8-byte
 * allreduces and 100-byte bcasts must move the counters of the algorithm
 * that ran (MPIX_Get_last_algorithm_name says which) by their calls and
 * bytes, and no other algorithm's of the same collective.
 *
 * 2 ranks, heater mode, default limits: 8 B goes one-packet, 2000 B eager,
 * 100000 B rendezvous. Prints " No Errors" when everything held. */
#include <mpi.h>
#include <mpix.h>
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
    "torx_onepkt_messages_sent", "torx_onepkt_bytes_sent", "torx_eager_messages_sent",
    "torx_eager_packets_sent",   "torx_rzv_messages_sent", "torx_rzv_bytes_sent",
    "torx_vn_messages_sent",     "torx_netmod_p2p_sent",
};

/* The pvar named name, read through session s; *found 0 (and 0) when there is none. */
static unsigned long long read_named(MPI_T_pvar_session s, const char *name, int *found)
{
    int num;
    *found = 0;
    MPI_T_pvar_get_num(&num);
    for (int i = 0; i < num; i++) {
        char n[128], desc[256];
        int nlen = sizeof n, dlen = sizeof desc, verb, varclass, bind, ro, cont, atomic, count;
        MPI_Datatype dt;
        MPI_T_enum et;
        if (MPI_T_pvar_get_info(i, n, &nlen, &verb, &varclass, &dt, &et, desc, &dlen, &bind, &ro,
                                &cont, &atomic) != MPI_SUCCESS ||
            strcmp(n, name) != 0)
            continue;
        MPI_T_pvar_handle h;
        unsigned long long v = 0;
        MPI_T_pvar_handle_alloc(s, i, NULL, &h, &count);
        MPI_T_pvar_read(s, h, &v);
        MPI_T_pvar_handle_free(s, &h);
        *found = 1;
        return v;
    }
    return 0;
}

enum { NDATA = 6 };
static const char *const data_names[NDATA] = {
    "torx_data_bulk_transfers", "torx_data_bulk_bytes",        "torx_data_staged_transfers",
    "torx_data_staged_bytes",   "torx_data_packets_transfers", "torx_data_packets_bytes",
};

/* The data-path counters, read now. */
static void read_data(MPI_T_pvar_session s, int rank, unsigned long long v[NDATA])
{
    for (int i = 0; i < NDATA; i++) {
        int found;
        v[i] = read_named(s, data_names[i], &found);
        CHECK(found, "no pvar %s", data_names[i]);
    }
}

enum { NALGS = 5 };
static const char *const algs[NALGS] = {"mpich", "gi", "cn", "torus", "paced"};

/* Each algorithm's calls and bytes counters of collective kind, read now
 * (0 where the algorithm has none). */
static void read_kind(MPI_T_pvar_session s, const char *kind, unsigned long long calls[NALGS],
                      unsigned long long bytes[NALGS])
{
    char name[128];
    int found;
    for (int a = 0; a < NALGS; a++) {
        snprintf(name, sizeof name, "torx_coll_%s_%s_calls", kind, algs[a]);
        calls[a] = read_named(s, name, &found);
        snprintf(name, sizeof name, "torx_coll_%s_%s_bytes", kind, algs[a]);
        bytes[a] = read_named(s, name, &found);
    }
}

static void check_collectives(MPI_T_pvar_session s, int rank)
{
    enum { N = 7 };
    static const char *const kinds[3] = {"barrier", "allreduce", "bcast"};
    static const unsigned long long per_call[3] = {0, 8, 100};
    char data[100] = {0};
    for (int k = 0; k < 3; k++) {
        unsigned long long c0[NALGS], b0[NALGS], c1[NALGS], b1[NALGS];
        read_kind(s, kinds[k], c0, b0);
        for (int i = 0; i < N; i++) {
            double x = 1.0, y;
            if (k == 0)
                MPI_Barrier(MPI_COMM_WORLD);
            else if (k == 1)
                MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            else
                MPI_Bcast(data, 100, MPI_CHAR, 0, MPI_COMM_WORLD);
        }
        read_kind(s, kinds[k], c1, b1);
        char ran[64];
        MPIX_Get_last_algorithm_name(MPI_COMM_WORLD, ran, sizeof ran);
        const char *alg = strchr(ran, ':');
        CHECK(alg != NULL, "MPIX_Get_last_algorithm_name said '%s' after %s", ran, kinds[k]);
        for (int a = 0; alg && a < NALGS; a++) {
            /* MPICH's own algorithms may run the same collective on the
             * communicators it derives (a node's tasks, the nodes' first
             * tasks): those calls count too, so mpich moves by at least N. */
            const int this_one = strcmp(alg + 1, algs[a]) == 0, mpich = a == 0;
            const unsigned long long dc = c1[a] - c0[a], db = b1[a] - b0[a];
            const unsigned long long wc = this_one ? N : 0, wb = this_one ? N * per_call[k] : 0;
            CHECK(mpich && this_one ? dc >= wc : dc == wc,
                  "torx_coll_%s_%s_calls moved by %llu after %d calls that ran %s", kinds[k],
                  algs[a], dc, N, ran);
            CHECK(mpich && this_one ? db >= wb : db == wb,
                  "torx_coll_%s_%s_bytes moved by %llu after %d calls of %llu B that ran %s",
                  kinds[k], algs[a], db, N, per_call[k], ran);
        }
    }
    /* MPI_Ibarrier: on WORLD (a hardware channel of its own) the global
     * interrupt's, on half of it MPICH's schedule */
    int found, fgi;
    const unsigned long long i0 = read_named(s, "torx_coll_ibarrier_mpich_calls", &found);
    const unsigned long long g0 = read_named(s, "torx_coll_ibarrier_gi_calls", &fgi);
    CHECK(found && fgi, "no pvar torx_coll_ibarrier_mpich_calls or torx_coll_ibarrier_gi_calls");
    MPI_Request r;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    char name[64];
    MPIX_Get_last_algorithm_name(MPI_COMM_WORLD, name, sizeof name);
    const int on_gi = strcmp(name, "ibarrier:gi") == 0;
    MPI_Comm half;
    int nhalf;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, 0, &half);
    MPI_Comm_size(half, &nhalf);
    MPI_Ibarrier(half, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Comm_free(&half);
    /* MPICH answers a one-process collective before the device */
    const unsigned long long on_half = nhalf > 1;
    const unsigned long long i1 = read_named(s, "torx_coll_ibarrier_mpich_calls", &found);
    const unsigned long long g1 = read_named(s, "torx_coll_ibarrier_gi_calls", &fgi);
    CHECK(g1 - g0 == (unsigned long long)on_gi && i1 - i0 == on_half + 1ull - on_gi,
          "after MPI_Ibarrier on WORLD (%s) and on half: torx_coll_ibarrier_gi_calls moved by "
          "%llu, torx_coll_ibarrier_mpich_calls by %llu",
          name, g1 - g0, i1 - i0);
}

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
        if (MPI_T_pvar_get_info(i, name, &nlen, &verb, &varclass, &dt, &et, desc, &dlen, &bind, &ro,
                                &cont, &atomic) != MPI_SUCCESS)
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
    /* 5 protocols x 6 + 8 netmod + 6 data paths; then calls and bytes for each collective's
     * algorithms (mpich and torx's: barrier 2, bcast 4, allreduce, reduce
     * and allgather 3, alltoall and alltoallv 2), 7 nonblocking counts of MPICH's,
     * and calls and bytes of torx's nonblocking algorithms (ibarrier gi,
     * ibcast, iallreduce and ireduce cn, ialltoall and ialltoallv paced) */
    CHECK(ntorx == 44 + 2 * 19 + 7 + 2 * 6, "%d torx_ pvars, expected %d", ntorx,
          44 + 2 * 19 + 7 + 2 * 6);
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
    unsigned long long data0[NDATA], data1[NDATA];
    read_data(s, rank, data0);

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
    read_data(s, rank, data1);
    unsigned long long d[NWANT];
    for (int w = 0; w < NWANT; w++)
        d[w] = after[w] - before[w];
    /* How the rendezvous data came: each message by one path, whichever
     * the data path chose; the sender received none. */
    unsigned long long transfers = 0, bytes = 0;
    for (int i = 0; i < NDATA; i += 2) {
        transfers += data1[i] - data0[i];
        bytes += data1[i + 1] - data0[i + 1];
    }
    CHECK(transfers == (rank == 1 ? N : 0),
          "torx_data_*_transfers moved by %llu in all (bulk %llu, staged %llu, packets %llu)",
          transfers, data1[0] - data0[0], data1[2] - data0[2], data1[4] - data0[4]);
    CHECK(bytes == (rank == 1 ? (unsigned long long)N * RZV : 0),
          "torx_data_*_bytes moved by %llu in all", bytes);
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
    check_collectives(s, rank);
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
