/* The network devices' names, and their modules as the hybrid loads them
 * (the loader is ../module.c; docs/packet-layer.md#device-modules). */
#include "net.h"

const torxp_net_kind_t torxp_ofi_kind = {
    .name = "ofi",
    .local_var = "TORX_OFI_LOCAL",
    .per_host_var = "TORX_OFI_TASKS_PER_HOST",
};

const torxp_net_kind_t torxp_ucx_kind = {
    .name = "ucx",
    .local_var = "TORX_UCX_LOCAL",
    .per_host_var = "TORX_UCX_TASKS_PER_HOST",
};

torx_status_t torxp_net_module_load(const torxp_net_kind_t *kind, const torxp_net_module_t **out)
{
    const torxp_module_t *m;
    const torx_status_t rc = torxp_module_load(kind->name, &m);
    if (rc != TORX_OK)
        return rc;
    *out = m->ops;
    /* The build check covers this; a size that differs all the same means
     * a build whose commit id was not refreshed. */
    if ((*out)->net_size != sizeof(torxp_net_t))
        return torxp_error(TORX_ERR_UNSUPPORTED,
                           "torx: the %s device's module has a %zu-byte network state where this "
                           "libtorx has %zu: install both from one build",
                           kind->name, (*out)->net_size, sizeof(torxp_net_t));
    return TORX_OK;
}
