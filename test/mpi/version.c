/* torx MPI test: MPI_Get_library_version names torx's version next to
 * MPICH's ("MPICH Custom Information: torx 0.9.0 (commit)", set by
 * scripts/build-mpich.sh). VERSION_EXPECT: the text it must hold, e.g.
 * "torx 0.9.0 (" (test/mpi/run.sh passes configure.ac's version). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, len, errs = 0;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    const char *expect = getenv("VERSION_EXPECT");

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Get_library_version(version, &len);
    if (rank == 0) {
        if (!expect || !*expect) {
            printf("VERSION_EXPECT is not set\n");
            errs++;
        } else if (!strstr(version, expect)) {
            printf("FAIL: the library version does not hold \"%s\":\n%s\n", expect, version);
            errs++;
        }
        if (!strstr(version, "MPICH Version:")) {
            printf("FAIL: the library version does not hold MPICH's version:\n%s\n", version);
            errs++;
        }
        const char *custom = strstr(version, "MPICH Custom Information:");
        if (custom)
            printf("%.*s\n", (int)strcspn(custom, "\n"), custom);
    }
    MPI_Finalize();
    if (rank == 0 && errs == 0)
        printf(" No Errors\n");
    return errs != 0;
}
