/* MPI collectives over torx, checked against results computed here.
 *
 * On MPI_COMM_WORLD, a duplicate, a split in reversed order and a split of
 * the even ranks (a subset): Barrier, Allreduce and Reduce over the integer
 * and floating types with every predefined op that applies (and a user op),
 * counts 0, 1, primes, past one packet and past the collective network's
 * limit, MPI_IN_PLACE, roots other than 0; Bcast of contiguous and
 * non-contiguous data from every root; Allgather, Alltoall, Alltoallv;
 * nonblocking forms. Each call's MPIX_Get_last_algorithm_name is checked
 * against what torx must have picked (TORX_COLL, TORX_COLL_CN_MAX,
 * TORX_COLL_BCAST, and whether the host is oversubscribed): a
 * torx algorithm that silently fell back, or ran where it must not, fails.
 * The double sum must be bitwise identical on every task and in every rank
 * order of the communicator.
 *
 * Prints " No Errors" when every check passed.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <mpi.h>
#include <mpix.h>

#include <float.h>
#include <sched.h>
#include <unistd.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int errors, world_rank, world_size;
static int torx_off;      /* TORX_COLL=mpich */
static long cn_max = 512;   /* TORX_COLL_CN_MAX */
static int cn_max_set;      /* TORX_COLL_CN_MAX was set */
static size_t fpsum_max;    /* auto's limit for a floating SUM on the collective network */
/* long torus reductions may read the others' buffers in place: the shm
 * device (TORX_DEVICE) with cross-memory attach (TORX_BULK), not co mode
 * (TORX_MODE); run.sh runs this program nowhere that Yama or seccomp
 * forbids cross-memory attach */
static int direct_reads;
static int bcast_cn;        /* TORX_COLL_BCAST=cn */
static int bcast_torus;     /* TORX_COLL_BCAST=torus */
static int bcast_paced;     /* TORX_COLL_BCAST=paced */
static int oversubscribed;  /* more ranks than this host's CPUs: auto bcast paced (auto_paced) */
static int mstage;          /* the device has a multi-reader staging area (shm, not turned off) */
static int split_box = -1;  /* COLL_TEST_SPLIT_BOX: whether this task's even/odd split
                               fills a box of the torus (run.sh knows the layout) */

/* Bytes of a vector from which auto reads a long reduction in place on n
 * tasks (src/coll/coll_internal.h, TORXC_DIRECT_AUTO_BYTES; 2 tasks at
 * every size, src/coll/coll.c). */
static size_t direct_reduce_from(int n)
{
    return n <= 2 ? 0 : 128 * 1024u;
}

#define CHECK(cond, ...)                                                                          \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            if (errors++ < 20) {                                                                  \
                fprintf(stderr, "FAIL rank %d line %d: ", world_rank, __LINE__);                  \
                fprintf(stderr, __VA_ARGS__);                                                     \
                fputc('\n', stderr);                                                              \
            }                                                                                     \
        }                                                                                         \
    } while (0)

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static uint64_t raw(int seed, int who, size_t i)
{
    return mix(((uint64_t)seed << 48) ^ ((uint64_t)who << 32) ^ i);
}

/* The algorithm name the last collective on comm must have reported. */
static void expect_alg(MPI_Comm comm, const char *kind, int torx_applies, const char *alg)
{
    char want[64], got[64];
    int n;
    MPI_Comm_size(comm, &n);
    if (n == 1)
        return; /* MPICH answers a one-process collective before the device */
    snprintf(want, sizeof want, "%s:%s", kind, torx_applies && !torx_off ? alg : "mpich");
    CHECK(MPIX_Get_last_algorithm_name(comm, got, sizeof got) == MPI_SUCCESS, "MPIX call failed");
    CHECK(strcmp(got, want) == 0, "last algorithm %s, expected %s", got, want);
}

/* ---- reductions ---------------------------------------------------------------- */

typedef struct {
    MPI_Datatype dt;
    const char *name;
    int kind; /* 0 signed, 1 unsigned, 2 floating */
    int size;
    int torx; /* the collective network reduces it */
} type_t;

static const type_t types[] = {
    {MPI_INT, "MPI_INT", 0, sizeof(int), 1},
    {MPI_UNSIGNED, "MPI_UNSIGNED", 1, sizeof(unsigned), 1},
    {MPI_LONG, "MPI_LONG", 0, sizeof(long), 1},
    {MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", 1, sizeof(unsigned long), 1},
    {MPI_LONG_LONG, "MPI_LONG_LONG", 0, sizeof(long long), 1},
    {MPI_INT64_T, "MPI_INT64_T", 0, 8, 1},
    {MPI_UINT32_T, "MPI_UINT32_T", 1, 4, 1},
    {MPI_FLOAT, "MPI_FLOAT", 2, sizeof(float), 1},
    {MPI_DOUBLE, "MPI_DOUBLE", 2, sizeof(double), 1},
    {MPI_SHORT, "MPI_SHORT", 0, sizeof(short), 0},
};

static const struct {
    MPI_Op op;
    const char *name;
} ops[] = {{MPI_SUM, "SUM"},   {MPI_MIN, "MIN"},   {MPI_MAX, "MAX"},   {MPI_BAND, "BAND"},
           {MPI_BOR, "BOR"},   {MPI_BXOR, "BXOR"}, {MPI_LAND, "LAND"}, {MPI_LOR, "LOR"}};

/* Input element i of comm rank who, as a long double and as the type's
 * bytes. Sums of up to 16 stay in range. */
static void input(const type_t *t, int oi, int seed, int who, size_t i, void *out)
{
    uint64_t r = raw(seed, who, i);
    int logical = oi >= 6;
    int64_t s = oi == 0 ? (int64_t)(r % 20001) - 10000 : (int64_t)(r >> 1);
    if (logical && (r >> 50) % 3 == 0)
        s = 0;
    if (t->kind == 2) {
        double d = ldexp((double)(int64_t)(r & 0xfffffffffffffULL) / 4503599627370496.0 - 0.5,
                         (int)((r >> 56) % 40) - 20);
        if (t->size == 4) {
            float f = (float)d;
            memcpy(out, &f, 4);
        } else {
            memcpy(out, &d, 8);
        }
        return;
    }
    if (t->kind == 1 && oi == 0)
        s = (int64_t)(r % 20001);
    switch (t->size) {
    case 2: {
        int16_t v = (int16_t)(oi == 0 ? s % 1000 : s);
        memcpy(out, &v, 2);
        break;
    }
    case 4: {
        int32_t v = (int32_t)s;
        memcpy(out, &v, 4);
        break;
    }
    default:
        memcpy(out, &s, 8);
        break;
    }
}

/* Sum of |inputs| of each element of the last floating reference: the
 * scale of a sum's rounding error, whichever order it was added in. */
static long double ref_abs[5003];

/* Reference: combine every rank's input, element by element. */
static void reference(const type_t *t, int oi, int seed, int n, size_t count, void *out)
{
    for (size_t i = 0; i < count; i++) {
        unsigned char v[8];
        if (t->kind == 2) {
            long double acc = 0;
            for (int w = 0; w < n; w++) {
                input(t, oi, seed, w, i, v);
                long double x = t->size == 4 ? *(float *)v : *(double *)v;
                ref_abs[i] = (w == 0 ? 0 : ref_abs[i]) + fabsl(x);
                if (w == 0 || oi == 0)
                    acc = w == 0 ? x : acc + x;
                else if (oi == 1)
                    acc = x < acc ? x : acc;
                else
                    acc = x > acc ? x : acc;
            }
            if (t->size == 4)
                ((float *)out)[i] = (float)acc;
            else
                ((double *)out)[i] = (double)acc;
            continue;
        }
        /* integers: in 64 bits, signed or unsigned, then narrowed */
        uint64_t uacc = 0;
        int64_t sacc = 0;
        for (int w = 0; w < n; w++) {
            input(t, oi, seed, w, i, v);
            int64_t sx;
            uint64_t ux;
            if (t->size == 2) {
                sx = *(int16_t *)v;
                ux = *(uint16_t *)v;
            } else if (t->size == 4) {
                sx = *(int32_t *)v;
                ux = *(uint32_t *)v;
            } else {
                sx = *(int64_t *)v;
                ux = *(uint64_t *)v;
            }
            if (w == 0) { /* alone, a logical op returns the input (as MPICH does) */
                sacc = oi >= 6 && n > 1 ? sx != 0 : sx;
                uacc = oi >= 6 && n > 1 ? ux != 0 : ux;
                continue;
            }
            switch (oi) {
            case 0: sacc += sx, uacc += ux; break;
            case 1: sacc = sx < sacc ? sx : sacc, uacc = ux < uacc ? ux : uacc; break;
            case 2: sacc = sx > sacc ? sx : sacc, uacc = ux > uacc ? ux : uacc; break;
            case 3: sacc &= sx, uacc &= ux; break;
            case 4: sacc |= sx, uacc |= ux; break;
            case 5: sacc ^= sx, uacc ^= ux; break;
            case 6: sacc = sacc && sx, uacc = uacc && ux; break;
            case 7: sacc = sacc || sx, uacc = uacc || ux; break;
            }
        }
        uint64_t res = t->kind == 1 ? uacc : (uint64_t)sacc;
        memcpy((unsigned char *)out + i * t->size, &res, t->size); /* little endian */
    }
}

static int close_enough(const type_t *t, int oi, const void *got, const void *want, size_t count)
{
    if (t->kind != 2 || oi != 0)
        return memcmp(got, want, count * t->size) == 0;
    for (size_t i = 0; i < count; i++) {
        double g = t->size == 4 ? ((const float *)got)[i] : ((const double *)got)[i];
        double w = t->size == 4 ? ((const float *)want)[i] : ((const double *)want)[i];
        double tol = (t->size == 4 ? FLT_EPSILON : DBL_EPSILON) * 8 * (double)ref_abs[i];
        if (fabs(g - w) > tol)
            return 0;
    }
    return 1;
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++)
        ((int *)inout)[i] += ((int *)in)[i];
}

static void test_reductions(MPI_Comm comm, int all_tasks)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    static const size_t counts[] = {0, 1, 7, 33, 64, 257, 1031, 5003};
    unsigned char *in = malloc(8 * 5003), *out = malloc(8 * 5003 + 8),
                  *want = malloc(8 * 5003);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const type_t *t = &types[ti];
        for (int oi = 0; oi < 8; oi++) {
            if (t->kind == 2 && oi > 2)
                continue; /* bitwise and logical ops take no floating types */
            for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
                size_t count = counts[ci];
                int seed = (int)(ti * 100 + oi * 10 + ci);
                for (size_t i = 0; i < count; i++)
                    input(t, oi, seed, me, i, in + i * t->size);
                reference(t, oi, seed, n, count, want);
                /* auto: the direct exchange ("torus") for 2 tasks and up to
                 * 2 KiB, any group; else the collective network on groups
                 * of every task, up to TORX_COLL_CN_MAX; else the reads in
                 * place (2 tasks at any size, more from 128 KiB: see the
                 * big allreduce below); else, for a float sum of 2 tasks
                 * (allreduce only), the exchange up to 16 KiB */
                size_t bytes = count * t->size;
                int xchg = t->torx && n == 2 && bytes <= 2048;
                int cn = all_tasks && t->torx &&
                         bytes <= (t->kind == 2 && oi == 0 ? fpsum_max : (size_t)cn_max) && n > 1;
                int direct = all_tasks && direct_reads && t->torx && n > 1 && n <= 8 &&
                             bytes >= direct_reduce_from(n);
                int fsum2 = t->torx && t->kind == 2 && t->size == 4 && oi == 0 && n == 2 &&
                            bytes <= 16384u;
                /* an oversubscribed job's reduce: the exchange where the
                 * collective network would serve it by default, up to 8
                 * tasks (src/coll/coll.c) */
                const int over_xchg = cn && oversubscribed && !cn_max_set && n > 2 && n <= 8;
                const char *alg = xchg || over_xchg || (!cn && direct) ? "torus" : "cn";
                const char *alg_all = xchg || (!cn && (fsum2 || direct)) ? "torus" : "cn";
                const int cn_all = cn || xchg || fsum2 || direct;
                cn = cn || xchg || over_xchg || direct;
                memset(out, 0xa5, count * t->size + 8);
                MPI_Allreduce(in, out, (int)count, t->dt, ops[oi].op, comm);
                expect_alg(comm, "allreduce", cn_all, alg_all);
                CHECK(close_enough(t, oi, out, want, count), "Allreduce %s %s count %zu wrong",
                      t->name, ops[oi].name, count);
                CHECK(out[count * t->size] == 0xa5, "Allreduce wrote past the buffer");
                /* in place */
                memcpy(out, in, count * t->size);
                MPI_Allreduce(MPI_IN_PLACE, out, (int)count, t->dt, ops[oi].op, comm);
                CHECK(close_enough(t, oi, out, want, count),
                      "Allreduce in place %s %s count %zu wrong", t->name, ops[oi].name, count);
                /* reduce to the last rank, in place there */
                int root = n - 1;
                if (me == root)
                    memcpy(out, in, count * t->size);
                MPI_Reduce(me == root ? MPI_IN_PLACE : in, me == root ? out : NULL, (int)count,
                           t->dt, ops[oi].op, root, comm);
                if (count > 0) /* MPI_Reduce of nothing returns before the device */
                    expect_alg(comm, "reduce", cn, alg);
                if (me == root)
                    CHECK(close_enough(t, oi, out, want, count), "Reduce %s %s count %zu wrong",
                          t->name, ops[oi].name, count);
            }
        }
    }
    /* a user-defined op: MPICH's algorithm */
    MPI_Op op;
    MPI_Op_create(user_sum, 1, &op);
    int one = me + 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, op, comm);
    expect_alg(comm, "allreduce", 0, "cn");
    CHECK(sum == n * (n + 1) / 2, "user op sum %d", sum);
    MPI_Op_free(&op);
    /* past the collective network's limit */
    size_t big = (size_t)cn_max / 8 + 1000;
    double *a = malloc(big * sizeof(double)), *b = malloc(big * sizeof(double));
    for (size_t i = 0; i < big; i++)
        a[i] = (double)(me + 1) * (double)(i % 97);
    MPI_Allreduce(a, b, (int)big, MPI_DOUBLE, MPI_SUM, comm);
    /* long vectors on the torus: read in place on groups of every task
     * (one host, cross-memory attach, not co mode) at any size on 2 tasks
     * and from 128 KiB on more; else, on groups of 2, the split direct
     * exchange from 512 KiB */
    const size_t big_bytes = big * sizeof(double);
    const int direct = all_tasks && direct_reads && n <= 8 && big_bytes >= direct_reduce_from(n);
    expect_alg(comm, "allreduce", direct || (n <= 2 && big_bytes >= 512 * 1024), "torus");
    for (size_t i = 0; i < big; i++)
        CHECK(b[i] == (double)(n * (n + 1) / 2) * (double)(i % 97), "big allreduce [%zu]", i);
    free(a);
    free(b);
    free(in);
    free(out);
    free(want);
}

/* ---- bcast, allgather, alltoall(v) -------------------------------------------------- */

/* Whether auto runs the paced bcast (src/coll/coll.c, pick): at 2 ranks
 * not oversubscribed, one packet (up to 224 B); oversubscribed, past 4
 * ranks from 512 B through the multi-reader staging area, else from 4 KiB;
 * at 3-4 ranks from 32 KiB through that area only. */
static int auto_paced(int n, size_t len)
{
    if (!oversubscribed)
        return n == 2 && len <= 224;
    if (n <= 2)
        return 0;
    if (n > 4)
        return len >= (mstage ? 512 : 4096);
    return mstage && len >= 32768;
}

static void test_data_movement(MPI_Comm comm, int all_tasks)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    static const size_t sizes[] = {0, 1, 255, 256, 511, 512, 1000, 16384, 32767, 32768, 100000};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int root = 0; root < n; root++) {
            size_t len = sizes[si];
            unsigned char *buf = malloc(len + 1);
            for (size_t i = 0; i < len; i++)
                buf[i] = me == root ? (unsigned char)raw(3, root, i) : 0;
            MPI_Bcast(buf, (int)len, MPI_BYTE, root, comm);
            if (bcast_torus)
                expect_alg(comm, "bcast", n > 1 && (all_tasks || split_box == 1), "torus");
            else if (bcast_cn)
                expect_alg(comm, "bcast", all_tasks && n > 1, "cn");
            else
                expect_alg(comm, "bcast", n > 1 && (bcast_paced || auto_paced(n, len)), "paced");
            for (size_t i = 0; i < len; i++)
                if (buf[i] != (unsigned char)raw(3, root, i)) {
                    CHECK(0, "Bcast %zu from %d: byte %zu", len, root, i);
                    break;
                }
            free(buf);
        }
    /* non-contiguous: every other int */
    {
        MPI_Datatype vec;
        MPI_Type_vector(100, 1, 2, MPI_INT, &vec);
        MPI_Type_commit(&vec);
        int buf[200];
        for (int i = 0; i < 200; i++)
            buf[i] = me == 0 ? i : (i % 2 ? -7 : -1);
        MPI_Bcast(buf, 1, vec, 0, comm);
        expect_alg(comm, "bcast", 0, "cn");
        for (int i = 0; i < 200; i++)
            CHECK(buf[i] == (i % 2 ? (me == 0 ? i : -7) : i), "vector Bcast [%d] = %d", i, buf[i]);
        MPI_Type_free(&vec);
    }
    /* allgather */
    static const int gcounts[] = {1, 3, 64, 1000, 10000};
    for (int gi = 0; gi < 5; gi++)
        for (int inplace = 0; inplace < 2; inplace++) {
            int c = gcounts[gi];
            int *mine = malloc(sizeof(int) * (size_t)c), *all = malloc(sizeof(int) * (size_t)c * n);
            for (int i = 0; i < c; i++)
                mine[i] = (int)raw(4, me, (size_t)i);
            for (int i = 0; i < c * n; i++)
                all[i] = -1;
            if (inplace)
                memcpy(all + (size_t)me * c, mine, sizeof(int) * (size_t)c);
            MPI_Allgather(inplace ? MPI_IN_PLACE : mine, c, MPI_INT, all, c, MPI_INT, comm);
            /* one-packet blocks (up to 224 B) exchanged at 2 ranks; the
             * collective network while the result fits TORX_COLL_CN_MAX;
             * blocks from 32 KiB read in place (as long reductions) */
            const int xchg = n == 2 && (size_t)c * 4 <= 224;
            const int cn = all_tasks && n > 2 && (size_t)c * 4 * n <= (size_t)cn_max;
            const int direct = all_tasks && direct_reads && n > 1 && (size_t)c * 4 >= 32 * 1024u;
            expect_alg(comm, "allgather", xchg || cn || direct, cn ? "cn" : "torus");
            for (int w = 0; w < n; w++)
                for (int i = 0; i < c; i++)
                    CHECK(all[w * c + i] == (int)raw(4, w, (size_t)i), "Allgather %d: [%d][%d]",
                          c, w, i);
            free(mine);
            free(all);
        }
    /* alltoall and alltoallv */
    {
        int c = 37;
        int *s = malloc(sizeof(int) * c * n), *r = malloc(sizeof(int) * c * n);
        for (int d = 0; d < n; d++)
            for (int i = 0; i < c; i++)
                s[d * c + i] = me * 100000 + d * 1000 + i;
        MPI_Alltoall(s, c, MPI_INT, r, c, MPI_INT, comm);
        expect_alg(comm, "alltoall", 1, "paced");
        for (int src = 0; src < n; src++)
            for (int i = 0; i < c; i++)
                CHECK(r[src * c + i] == src * 100000 + me * 1000 + i, "Alltoall from %d [%d]", src,
                      i);
        int *sc = malloc(sizeof(int) * n), *sd = malloc(sizeof(int) * n),
            *rc = malloc(sizeof(int) * n), *rd = malloc(sizeof(int) * n);
        int so = 0, ro = 0;
        for (int d = 0; d < n; d++) {
            sc[d] = (me + d) % 5 + 1; /* what me sends to d */
            sd[d] = so;
            so += sc[d];
            rc[d] = (d + me) % 5 + 1; /* what d sends to me */
            rd[d] = ro;
            ro += rc[d];
        }
        int *sv = malloc(sizeof(int) * so), *rv = malloc(sizeof(int) * ro);
        for (int d = 0; d < n; d++)
            for (int i = 0; i < sc[d]; i++)
                sv[sd[d] + i] = me * 1000 + d * 10 + i;
        MPI_Alltoallv(sv, sc, sd, MPI_INT, rv, rc, rd, MPI_INT, comm);
        expect_alg(comm, "alltoallv", 1, "paced");
        for (int src = 0; src < n; src++)
            for (int i = 0; i < rc[src]; i++)
                CHECK(rv[rd[src] + i] == src * 1000 + me * 10 + i, "Alltoallv from %d [%d]", src,
                      i);
        free(s), free(r), free(sc), free(sd), free(rc), free(rd), free(sv), free(rv);
    }
}

/* channel: comm has a hardware channel for its nonblocking collectives
 * (docs/collectives.md#nonblocking): torx's run there */
static void test_barrier_and_nonblocking(MPI_Comm comm, int all_tasks, int channel)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    for (int i = 0; i < 5; i++) {
        MPI_Barrier(comm);
        expect_alg(comm, "barrier", all_tasks && n > 1, "gi");
    }
    MPI_Request req;
    MPI_Ibarrier(comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    expect_alg(comm, "ibarrier", all_tasks && channel, "gi");
    long v = me + 1, s = 0;
    MPI_Iallreduce(&v, &s, 1, MPI_LONG, MPI_SUM, comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    expect_alg(comm, "iallreduce", all_tasks && channel && n > 2, "cn");
    CHECK(s == (long)n * (n + 1) / 2, "Iallreduce %ld", s);
    int b = me == 0 ? 4242 : 0;
    MPI_Ibcast(&b, 1, MPI_INT, 0, comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    /* a forced torus or paced bcast has no nonblocking form: MPICH's */
    const char *fb = getenv("TORX_COLL_BCAST");
    const int forced_cn = fb && !strcmp(fb, "cn");
    const int auto_cn = (!fb || !*fb || !strcmp(fb, "auto")) && !oversubscribed;
    expect_alg(comm, "ibcast", all_tasks && channel && (forced_cn || auto_cn), "cn");
    CHECK(b == 4242, "Ibcast %d", b);
}

/* The double sum does not depend on which rank holds which value: comm
 * rank i holds value set i, in every rank order of the communicator (32
 * doubles: the direct exchange at 2 ranks, the collective network's
 * two-phase sum at more, which auto takes up to 256 B when oversubscribed). */
static void test_reproducible(void)
{
    double first[32];
    for (int order = 0; order < 3; order++) {
        int key = order == 0 ? world_rank : order == 1 ? world_size - 1 - world_rank
                                                       : (world_rank * 3 + 1) % world_size;
        MPI_Comm c;
        MPI_Comm_split(MPI_COMM_WORLD, 0, key, &c);
        int me;
        MPI_Comm_rank(c, &me);
        double in[32], out[32];
        for (int i = 0; i < 32; i++) {
            uint64_t r = raw(11, me, (size_t)i);
            in[i] = ldexp((double)(int64_t)(r >> 11) / 9007199254740992.0 - 0.5,
                          (int)(r % 50) - 25);
        }
        MPI_Allreduce(in, out, 32, MPI_DOUBLE, MPI_SUM, c);
        if (!torx_off)
            expect_alg(c, "allreduce", world_size > 1 && cn_max >= 256,
                       world_size == 2 ? "torus" : "cn");
        /* bitwise the same on every task: compare with rank 0's bytes */
        double root[32];
        memcpy(root, out, sizeof out);
        MPI_Bcast(root, 32 * 8, MPI_BYTE, 0, c);
        if (!torx_off)
            CHECK(memcmp(root, out, sizeof out) == 0, "order %d: ranks differ bitwise", order);
        if (order == 0)
            memcpy(first, out, sizeof out);
        else if (!torx_off)
            CHECK(memcmp(first, out, sizeof out) == 0, "order %d: a different sum", order);
        MPI_Comm_free(&c);
    }
}

/* The CPUs the netmod counts (src/adi/torx_init.c): those hydra's proxy,
 * this rank's parent, may run on, at most the CPUs online. */
static long host_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    if (sched_getaffinity(getppid(), sizeof set, &set) == 0) {
        const int c = CPU_COUNT(&set);
        if (c > 0 && (n <= 0 || c < n))
            n = c;
    }
    return n;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    const char *e = getenv("TORX_COLL");
    torx_off = e && strcmp(e, "mpich") == 0;
    if ((e = getenv("TORX_COLL_CN_MAX")) && *e) {
        cn_max = atol(e);
        cn_max_set = 1;
    }
    {
        const char *dev = getenv("TORX_DEVICE"), *bulk = getenv("TORX_BULK"),
                   *mode = getenv("TORX_MODE");
        /* The network devices have neither direct reads nor the
         * multi-reader staging area. */
        const int net = dev && (strcmp(dev, "ofi") == 0 || strcmp(dev, "ucx") == 0);
        direct_reads = !net && !(bulk && strcmp(bulk, "fifo") == 0) &&
                       !(mode && strcmp(mode, "co") == 0);
        const char *ms = getenv("TORX_MSTAGE_BYTES");
        mstage = !net && !(ms && strcmp(ms, "0") == 0);
    }
    bcast_cn = (e = getenv("TORX_COLL_BCAST")) && strcmp(e, "cn") == 0;
    bcast_torus = e && strcmp(e, "torus") == 0;
    bcast_paced = e && strcmp(e, "paced") == 0;
    if ((e = getenv("COLL_TEST_SPLIT_BOX")) && *e)
        split_box = atoi(e);
    if (bcast_torus && split_box < 0 && world_rank == 0)
        fprintf(stderr, "coll: TORX_COLL_BCAST=torus needs COLL_TEST_SPLIT_BOX=0|1\n");

    char name[64];
    CHECK(MPIX_Get_last_algorithm_name(MPI_COMM_WORLD, name, sizeof name) == MPI_SUCCESS &&
              strcmp(name, "none") == 0,
          "before any collective: %s", name);
    CHECK(MPIX_Get_last_algorithm_name(MPI_COMM_NULL, name, sizeof name) == MPI_ERR_COMM,
          "MPI_COMM_NULL accepted");

    {
        /* as the netmod decides (src/adi/torx_init.c): some host runs more
         * ranks than it has CPUs, agreed by every rank */
        MPI_Comm local;
        int nlocal, mine;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
        MPI_Comm_size(local, &nlocal);
        MPI_Comm_free(&local);
        mine = nlocal > host_cpus();
        MPI_Allreduce(&mine, &oversubscribed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    }
    /* src/coll/coll.c: 256 B oversubscribed unless TORX_COLL_CN_MAX is set */
    fpsum_max = (size_t)cn_max;
    if (oversubscribed && !((e = getenv("TORX_COLL_CN_MAX")) && *e) && fpsum_max > 256)
        fpsum_max = 256;

    MPI_Comm dup, rev, even;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - world_rank, &rev);
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &even);
    /* channels: WORLD's, and those of the communicators with the first
     * context ids MPICH hands out (the split_type above freed its id):
     * dup and rev */
    struct {
        MPI_Comm comm;
        const char *name;
        int all, channel;
    } comms[] = {{MPI_COMM_WORLD, "world", 1, 1},
                 {dup, "dup", 1, 1},
                 {rev, "reversed", 1, 1},
                 {even, "even/odd split", world_size == 1, 0}};
    for (int i = 0; i < 4; i++) {
        test_barrier_and_nonblocking(comms[i].comm, comms[i].all, comms[i].channel);
        test_reductions(comms[i].comm, comms[i].all);
        test_data_movement(comms[i].comm, comms[i].all);
        if (errors) {
            fprintf(stderr, "rank %d: errors on %s\n", world_rank, comms[i].name);
            break;
        }
    }
    test_reproducible();
    MPI_Comm_free(&dup);
    MPI_Comm_free(&rev);
    MPI_Comm_free(&even);

    int total = 0;
    MPI_Allreduce(&errors, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (world_rank == 0) {
        if (total == 0)
            printf(" No Errors\n");
        else
            printf(" Found %d errors\n", total);
    }
    MPI_Finalize();
    return total != 0;
}
