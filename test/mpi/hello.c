/* torx MPI test: start-up, identity, the device in use, a barrier. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size, len, errs = 0;
    char name[MPI_MAX_PROCESSOR_NAME];
    char version[MPI_MAX_LIBRARY_VERSION_STRING];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(name, &len);
    MPI_Get_library_version(version, &len);
    printf("hello from rank %d of %d on %s\n", rank, size, name);
    if (rank == 0 && !strstr(version, "ch4:torx")) {
        printf("library version does not name ch4:torx:\n%s\n", version);
        errs++;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0 && errs == 0)
        printf(" No Errors\n");
    return errs != 0;
}
