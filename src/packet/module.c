/* Devices as loadable modules (docs/packet-layer.md#device-modules).
 *
 * libtorx links no network library and no simulator. The ofi, ucx and sim
 * devices are modules, PKGLIBDIR/torx-dev-NAME.so, loaded the first time a
 * job asks for one. A job on one host (TORX_DEVICE=auto or shm) thus never
 * loads libfabric, whose dependencies take about 0.2 s to load in every
 * process, nor UCX, whose memory hooks replace malloc and mmap for the
 * whole process, nor SimGrid with its ns-3 and Boost libraries.
 *
 * A module is searched for in the directories of TORX_DEVICE_PATH (colon-
 * separated; the build tree's tests set it), then in PKGLIBDIR. It shares
 * libtorx's internal structures, so one from another build is refused,
 * naming both builds. Loaded modules stay loaded: the libraries they pull
 * in keep threads and hooks that outlive a device. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include "pkt_internal.h"

#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <torx/version.h>
#include <unistd.h>

#include "torx_commit.h"

#ifndef TORX_PKGLIBDIR
#error "TORX_PKGLIBDIR: where the device modules are installed (Makefile.am)"
#endif

/* Process-wide: under torx-sim, a task's copy of libtorx's data must not
 * hide a module another task loaded. */
static TORXP_PROCESS_WIDE pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static TORXP_PROCESS_WIDE const torxp_module_t *loaded[4];

/* The module in one file: NULL, with why (for the error) filled, when it
 * cannot be loaded; *absent = 1 when the file is not there at all. */
static const torxp_module_t *load_file(const char *path, const char *name, int *absent, char *why,
                                       size_t why_len)
{
    *absent = 0;
    if (access(path, F_OK) != 0) {
        *absent = errno == ENOENT || errno == ENOTDIR;
        if (!*absent)
            snprintf(why, why_len, "%s: %s", path, strerror(errno));
        return NULL;
    }
    /* RTLD_LOCAL: the module's symbols (and its library's) stay its own. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, why_len, "%s", dlerror());
        return NULL;
    }
    const torxp_module_t *m = dlsym(h, TORXP_MODULE_SYMBOL);
    static const char build[] = TORX_VERSION " (" TORX_COMMIT ")";
    if (!m) {
        snprintf(why, why_len, "%s has no %s: not a torx device module", path, TORXP_MODULE_SYMBOL);
    } else if (strcmp(m->build, build) || m->dev_size != sizeof(torx_pkt_dev_t)) {
        snprintf(why, why_len,
                 "%s comes from torx %s, this libtorx from torx %s: install both from one build",
                 path, m->build, build);
        m = NULL;
    } else if (strcmp(m->name, name)) {
        snprintf(why, why_len, "%s holds the %s device, not %s", path, m->name, name);
        m = NULL;
    }
    if (!m)
        dlclose(h);
    return m; /* h stays open for the life of the process */
}

/* Searches TORX_DEVICE_PATH's directories, then PKGLIBDIR. */
static torx_status_t find(const char *name, const torxp_module_t **out)
{
    const char *user = getenv("TORX_DEVICE_PATH");
    char dirs[2 * PATH_MAX];
    if (snprintf(dirs, sizeof dirs, "%s%s%s", user ? user : "", user && *user ? ":" : "",
                 TORX_PKGLIBDIR) >= (int)sizeof dirs)
        return torxp_error(TORX_ERR_ENV, "torx: TORX_DEVICE_PATH is too long");
    char file[64], path[PATH_MAX], why[PATH_MAX + 256];
    snprintf(file, sizeof file, "torx-dev-%s.so", name);
    /* A module takes libtorx's functions from the process's global scope:
     * put libtorx there first, as a program may have loaded it with
     * RTLD_LOCAL. */
    Dl_info self;
    if (dladdr((void *)torxp_module_load, &self) && self.dli_fname)
        dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    for (char *save = NULL, *dir = strtok_r(dirs, ":", &save); dir;
         dir = strtok_r(NULL, ":", &save)) {
        if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path)
            continue; /* no such file can exist */
        int absent;
        if ((*out = load_file(path, name, &absent, why, sizeof why)) != NULL)
            return TORX_OK;
        if (!absent)
            return torxp_error(TORX_ERR_UNSUPPORTED, "torx: cannot load the %s device: %s", name,
                               why);
    }
    return torxp_error(
        TORX_ERR_UNSUPPORTED, "torx: the %s device is not installed: no %s in %s%s%s", name, file,
        user && *user ? user : "", user && *user ? " (TORX_DEVICE_PATH) or " : "", TORX_PKGLIBDIR);
}

torx_status_t torxp_module_load(const char *name, const torxp_module_t **out)
{
    pthread_mutex_lock(&lock);
    torx_status_t rc = TORX_OK;
    unsigned i = 0;
    while (i < sizeof loaded / sizeof loaded[0] && loaded[i] && strcmp(loaded[i]->name, name))
        i++;
    assert(i < sizeof loaded / sizeof loaded[0]);
    if (loaded[i])
        *out = loaded[i];
    else if ((rc = find(name, out)) == TORX_OK)
        loaded[i] = *out;
    pthread_mutex_unlock(&lock);
    return rc;
}
