/* Binding a task to its core with hwloc.
 *
 * A node is TORX_CORES_PER_NODE consecutive cores of the host; the shm
 * device runs the whole job on one host, so torus node n (x fastest, then y,
 * z) owns cores n*cpn .. n*cpn+cpn-1. In vn mode task t of the node takes
 * core t of it; in heater and co mode the task takes the node's first core
 * (co's thread the second, when it has one). */
#include "msg_internal.h"

#include <hwloc.h>
#include <limits.h>
#include <unistd.h>

/* The node size when TORX_CORES_PER_NODE is unset (vn has its 2 already):
 * the original's 2 cores where the host has them for every node, else 1,
 * so `mpiexec -n <cores>` gets one task per core, bound, in heater and co
 * mode alike. A co task then shares its core with its thread (msg_co.c). */
static void fit_node(torx_ctx_t *ctx, long nodes, int ncores)
{
    if (ctx->cores_per_node == 0)
        ctx->cores_per_node = ncores > 0 && nodes * 2 > ncores ? 1 : 2;
}

static torx_status_t bind_with(torx_ctx_t *ctx, hwloc_topology_t topo, int cpn_asked)
{
    hwloc_obj_type_t unit = HWLOC_OBJ_CORE;
    int ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    if (ncores <= 0) { /* some virtual machines report PUs only */
        unit = HWLOC_OBJ_PU;
        ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    }
    const torx_shape_t s = ctx->map.shape;
    const long nodes = (long)s.x * s.y * s.z;
    fit_node(ctx, nodes, ncores);
    const int cpn = ctx->cores_per_node;
    if (ncores <= 0)
        return TORX_OK; /* nothing to bind to: leave it to the scheduler */
    if (cpn > ncores)
        return torxp_error(TORX_ERR_ENV,
                           "torx: TORX_CORES_PER_NODE=%d, but this host has only %d core%s: one "
                           "node does not fit; set TORX_CORES_PER_NODE to at most %d",
                           cpn, ncores, ncores == 1 ? "" : "s", ncores);
    ctx->host_cores = ncores;
    ctx->nodes_fit = nodes * cpn <= ncores;

    /* A launcher (mpiexec -bind-to, a test's fork job) already bound us:
     * its choice stands. */
    hwloc_bitmap_t cur = hwloc_bitmap_alloc();
    if (!cur)
        return torxp_error(TORX_ERR_NOMEM, "torx: out of memory binding the task");
    const int got = hwloc_get_cpubind(topo, cur, HWLOC_CPUBIND_PROCESS);
    const int prebound =
        got == 0 && !hwloc_bitmap_isincluded(hwloc_topology_get_allowed_cpuset(topo), cur);
    ctx->prebound_cpus = prebound ? hwloc_bitmap_weight(cur) : 0;
    hwloc_bitmap_free(cur);
    if (prebound)
        return TORX_OK;

    if (!ctx->nodes_fit) {
        /* More tasks than cores is a choice (tests, oversubscribed runs):
         * said at TORX_VERBOSE=1. A node size the user set that the host
         * cannot hold for every node is worth a warning. */
        if (ctx->rank == 0)
            torxp_log(NULL, cpn_asked ? 0 : 1,
                      "%s%ld node%s x %d core%s%s need %ld cores, this host has %d: "
                      "oversubscribed, tasks are left unbound",
                      cpn_asked ? "warning: " : "", nodes, nodes == 1 ? "" : "s", cpn,
                      cpn == 1 ? "" : "s", cpn_asked ? " (TORX_CORES_PER_NODE)" : "", nodes * cpn,
                      ncores);
        return TORX_OK;
    }
    const torx_coord_t c = ctx->self;
    const long node = ((long)c.z * s.y + c.y) * s.x + c.x;
    const int core = (int)(node * cpn + (ctx->mode == TORX_MODE_VN ? c.t : 0));
    hwloc_obj_t obj = hwloc_get_obj_by_type(topo, unit, (unsigned)core);
    if (!obj || hwloc_set_cpubind(topo, obj->cpuset, HWLOC_CPUBIND_PROCESS) != 0)
        torxp_log(NULL, 0, "warning: rank %d: could not bind to core %d; running unbound",
                  ctx->rank, core);
    else
        torxp_log(NULL, 1, "rank %d: bound to core %d (nodes of %d core%s%s)", ctx->rank, core,
                  cpn, cpn == 1 ? "" : "s", cpn_asked ? "" : ", fitted to this host");
    return TORX_OK;
}

torx_status_t torxm_bind(torx_ctx_t *ctx)
{
    const int cpn_asked = ctx->cores_per_node != 0;
    hwloc_topology_t topo;
    torx_status_t rc = TORX_OK;
    if (hwloc_topology_init(&topo) == 0) {
        if (hwloc_topology_load(topo) == 0)
            rc = bind_with(ctx, topo, cpn_asked);
        hwloc_topology_destroy(topo);
    }
    if (ctx->host_cores == 0) { /* no topology: count the online CPUs */
        const torx_shape_t s = ctx->map.shape;
        const long nodes = (long)s.x * s.y * s.z;
        const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        fit_node(ctx, nodes, cpus > 0 && cpus < INT_MAX ? (int)cpus : 0);
        ctx->nodes_fit = cpus <= 0 || nodes * ctx->cores_per_node <= cpus;
    }
    return rc;
}

/* The communication thread of co mode, when it has a core of its own
 * (msg_co.c decides): the node's second core. */
static void bind_comm_with(torx_ctx_t *ctx, hwloc_topology_t topo, pthread_t thread)
{
    const int cpn = ctx->cores_per_node;
    if (cpn < 2 || !ctx->nodes_fit) {
        /* TORX_CO_THREAD=own on a host without a core per thread: the
         * scheduler places it, anywhere the job may run (not on the one
         * core it inherited from a task torx bound). */
        if (!ctx->prebound_cpus)
            hwloc_set_thread_cpubind(topo, thread, hwloc_topology_get_allowed_cpuset(topo), 0);
        return;
    }
    hwloc_obj_type_t unit = HWLOC_OBJ_CORE;
    if (hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) <= 0)
        unit = HWLOC_OBJ_PU;
    /* A task its launcher bound keeps its threads where the launcher put
     * them: the thread inherited that binding. */
    hwloc_bitmap_t cur = hwloc_bitmap_alloc();
    if (!cur)
        return;
    const int got = hwloc_get_cpubind(topo, cur, HWLOC_CPUBIND_PROCESS);
    const torx_shape_t s = ctx->map.shape;
    const torx_coord_t c = ctx->self;
    const long node = ((long)c.z * s.y + c.y) * s.x + c.x;
    hwloc_obj_t first = hwloc_get_obj_by_type(topo, unit, (unsigned)(node * cpn));
    const int ours = got == 0 && first && hwloc_bitmap_isequal(cur, first->cpuset);
    hwloc_bitmap_free(cur);
    if (!ours)
        return; /* bound by a launcher: not ours to change */
    const int core = (int)(node * cpn + 1);
    hwloc_obj_t obj = hwloc_get_obj_by_type(topo, unit, (unsigned)core);
    if (!obj || hwloc_set_thread_cpubind(topo, thread, obj->cpuset, 0) != 0)
        torxp_log(NULL, 0,
                  "warning: rank %d: could not bind the communication thread to core %d; it runs "
                  "unbound",
                  ctx->rank, core);
}

void torxm_bind_comm(torx_ctx_t *ctx, pthread_t thread)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0)
        return;
    if (hwloc_topology_load(topo) == 0)
        bind_comm_with(ctx, topo, thread);
    hwloc_topology_destroy(topo);
}
