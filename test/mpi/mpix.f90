! The MPIX machine queries from Fortran (src/adi/torx_misc.c's bindings):
! the same answers as from C, error codes for a bad rank or coordinate, and
! a Cartesian communicator whose coordinates are the torus coordinates.
! Prints " No Errors" on rank 0 when every check passed on every rank.
program mpix_fortran
    use mpi
    implicit none
    integer, parameter :: HW_FIELDS = 17
    integer :: ierr, rank, nprocs, nd, hw(HW_FIELDS), c(4), bad(4), r, errs, allerrs
    integer :: cart, crank, cc(4), slots

    errs = 0
    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)

    call MPIX_Torus_ndims(nd, ierr)
    if (ierr /= MPI_SUCCESS .or. nd /= 3) call fail('ndims')
    call MPIX_Hardware(hw, ierr)
    if (ierr /= MPI_SUCCESS) call fail('MPIX_Hardware')
    ! hw: prank psize ppn coreID clockMHz memSize torus_dimension Size(3) Coords(3) isTorus(3) mode
    call MPIX_Rank2torus(rank, c, ierr)
    if (ierr /= MPI_SUCCESS) call fail('Rank2torus')
    if (any(c(1:3) /= hw(11:13)) .or. c(4) /= hw(4)) call fail('Hardware and Rank2torus disagree')
    call MPIX_Torus2rank(c, r, ierr)
    if (ierr /= MPI_SUCCESS .or. r /= rank) call fail('Torus2rank')

    call MPIX_Rank2torus(nprocs, c, ierr)
    if (ierr /= MPI_ERR_RANK) call fail('rank out of range accepted')
    bad = 0
    bad(1) = hw(8)
    call MPIX_Torus2rank(bad, r, ierr)
    if (ierr /= MPI_ERR_ARG) call fail('x out of range accepted')

    slots = hw(2)
    call MPIX_Cart_comm_create(cart, ierr)
    if (slots == nprocs) then
        if (ierr /= MPI_SUCCESS) call fail('Cart_comm_create')
        call MPIX_Rank2torus(rank, c, ierr)
        call MPI_Comm_rank(cart, crank, ierr)
        call MPI_Cart_coords(cart, crank, 4, cc, ierr)
        if (any(cc /= c)) call fail('Cartesian and torus coordinates differ')
        call MPI_Comm_free(cart, ierr)
    else
        if (ierr /= MPI_ERR_TOPOLOGY) call fail('Cart_comm_create on a partial torus')
    end if

    call MPI_Allreduce(errs, allerrs, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (rank == 0) then
        if (allerrs == 0) then
            print '(A)', ' No Errors'
        else
            print '(A,I0,A)', ' Found ', allerrs, ' errors'
        end if
    end if
    call MPI_Finalize(ierr)

contains

    subroutine fail(what)
        character(len=*), intent(in) :: what
        print '(A,I0,2A)', 'FAIL rank ', rank, ': ', what
        errs = errs + 1
    end subroutine fail

end program mpix_fortran
