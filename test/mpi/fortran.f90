! Fortran over torx (the NAS Parallel Benchmarks are Fortran): the mpi_f08
! module, point-to-point of every protocol size class with a checked
! payload, a derived (strided) type, ANY_SOURCE with its status, and the
! collectives NPB leans on. Prints " No Errors" from rank 0.
program fortran_torx
    use mpi_f08
    implicit none
    integer, parameter :: nsizes = 5
    integer :: sizes(nsizes) = [1, 25, 500, 20000, 600000] ! doubles: 8 B .. 4.8 MB
    integer :: rank, nprocs, peer, i, k, n, errs, total_errs, cnt
    double precision, allocatable :: sbuf(:), rbuf(:), grid(:,:)
    double precision :: s, expect
    type(MPI_Status) :: st
    type(MPI_Datatype) :: column

    errs = 0
    call MPI_Init()
    call MPI_Comm_rank(MPI_COMM_WORLD, rank)
    call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
    peer = ieor(rank, 1)

    if (peer < nprocs) then
        do k = 1, nsizes
            n = sizes(k)
            allocate(sbuf(n), rbuf(n))
            do i = 1, n
                sbuf(i) = rank * 1.0d6 + k * 1.0d3 + i
            end do
            rbuf = -1.0d0
            call MPI_Sendrecv(sbuf, n, MPI_DOUBLE_PRECISION, peer, k, rbuf, n, &
                              MPI_DOUBLE_PRECISION, MPI_ANY_SOURCE, k, MPI_COMM_WORLD, st)
            call MPI_Get_count(st, MPI_DOUBLE_PRECISION, cnt)
            if (st%MPI_SOURCE /= peer .or. st%MPI_TAG /= k .or. cnt /= n) then
                errs = errs + 1
                print *, 'rank', rank, ': status of size', n, 'wrong:', st%MPI_SOURCE, st%MPI_TAG, cnt
            end if
            do i = 1, n
                if (rbuf(i) /= peer * 1.0d6 + k * 1.0d3 + i) then
                    errs = errs + 1
                    print *, 'rank', rank, ': size', n, 'element', i, 'is', rbuf(i)
                    exit
                end if
            end do
            deallocate(sbuf, rbuf)
        end do

        ! A column of a row-major view: a strided type, as halo exchanges send.
        allocate(grid(10, 8))
        grid = rank
        call MPI_Type_vector(8, 1, 10, MPI_DOUBLE_PRECISION, column)
        call MPI_Type_commit(column)
        call MPI_Sendrecv(grid(1, 1), 1, column, peer, 99, grid(10, 1), 1, column, peer, 99, &
                          MPI_COMM_WORLD, st)
        if (any(grid(10, :) /= peer) .or. any(grid(1:9, :) /= rank)) then
            errs = errs + 1
            print *, 'rank', rank, ': strided exchange wrong'
        end if
        call MPI_Type_free(column)
        deallocate(grid)
    end if

    ! Collectives: the sum of ranks, a broadcast, a barrier.
    s = rank + 1
    call MPI_Allreduce(MPI_IN_PLACE, s, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
    expect = nprocs * (nprocs + 1) / 2.0d0
    if (s /= expect) then
        errs = errs + 1
        print *, 'rank', rank, ': allreduce gave', s, 'expected', expect
    end if
    n = 0
    if (rank == 0) n = 4242
    call MPI_Bcast(n, 1, MPI_INTEGER, 0, MPI_COMM_WORLD)
    if (n /= 4242) then
        errs = errs + 1
        print *, 'rank', rank, ': bcast gave', n
    end if
    call MPI_Barrier(MPI_COMM_WORLD)

    call MPI_Reduce(errs, total_errs, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD)
    if (rank == 0) then
        if (total_errs == 0) then
            print '(a)', ' No Errors'
        else
            print *, 'Found', total_errs, 'errors'
        end if
    end if
    call MPI_Finalize()
end program fortran_torx
