/* torx_version(): the version from configure.ac and the commit of the build
 * (src/torx_commit.h, written by make: Makefile.am, TORX_COMMIT). */
#include <torx/version.h>

#include "torx_commit.h"

const char *torx_version(void)
{
    return TORX_VERSION " (" TORX_COMMIT ")";
}
