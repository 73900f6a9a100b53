[#] start of __file__
dnl The torx netmod (ch4:torx). Overlaid into src/mpid/ch4/netmod/torx/ by
dnl torx's scripts/build-mpich.sh; see docs/netmod.md.
dnl MPICH_SUBCFG_AFTER=src/mpid/ch4

AC_DEFUN([PAC_SUBCFG_PREREQ_]PAC_SUBCFG_AUTO_SUFFIX,[
    AM_COND_IF([BUILD_CH4],[
        for net in $ch4_netmods ; do
            AS_CASE([$net],[torx],[build_ch4_netmod_torx=yes])
            if test $net = "torx" ; then
                AC_DEFINE(HAVE_CH4_NETMOD_TORX,1,[torx netmod is built])
                dnl Without shmmods ch4 builds no locality info, and
                dnl MPIDIU_rank_is_local would always say 0.
                if test "$build_ch4_locality_info" != "yes" ; then
                    AC_DEFINE(MPIDI_BUILD_CH4_LOCALITY_INFO, 1, [CH4 should build locality info])
                    build_ch4_locality_info="yes"
                fi
            fi
        done
    ])
    AM_CONDITIONAL([BUILD_CH4_NETMOD_TORX],[test "X$build_ch4_netmod_torx" = "Xyes"])
])dnl

AC_DEFUN([PAC_SUBCFG_BODY_]PAC_SUBCFG_AUTO_SUFFIX,[
AM_COND_IF([BUILD_CH4_NETMOD_TORX],[
    AC_MSG_NOTICE([RUNNING CONFIGURE FOR ch4:torx])

    dnl --with-torx=PREFIX (PREFIX/include, PREFIX/lib), or
    dnl --with-torx-include=DIR --with-torx-lib=DIR (a torx source tree's
    dnl include/ and a build's .libs/, as scripts/build-mpich.sh passes).
    PAC_SET_HEADER_LIB_PATH(torx)
    AC_CHECK_HEADER([torx/msg.h], [],
        [AC_MSG_ERROR([ch4:torx needs <torx/msg.h>: pass --with-torx=PREFIX or --with-torx-include=DIR])])
    PAC_PUSH_FLAG(LIBS)
    AC_CHECK_LIB([torx], [torx_init], [torx_lib_ok=yes], [torx_lib_ok=no])
    PAC_POP_FLAG(LIBS)
    if test "$torx_lib_ok" != "yes" ; then
        AC_MSG_ERROR([ch4:torx needs libtorx (torx_init): pass --with-torx=PREFIX or --with-torx-lib=DIR])
    fi
    dnl libtorx is linked dynamically: a rebuilt libtorx.so needs no MPICH rebuild.
    dnl libmpi.so carries a run path to it, so programs (whose own RUNPATH
    dnl does not apply to libmpi's dependencies) find it.
    PAC_LIBS_ADD([-ltorx])
    torx_rpath_dir="${with_torx_lib}"
    if test -z "$torx_rpath_dir" -a -n "$with_torx" -a "$with_torx" != "yes" ; then
        torx_rpath_dir="${with_torx}/lib"
    fi
    if test -n "$torx_rpath_dir" ; then
        PAC_APPEND_FLAG([-Wl,-rpath,${torx_rpath_dir}],[LDFLAGS])
    fi
])dnl end AM_COND_IF(BUILD_CH4_NETMOD_TORX,...)
])dnl end _BODY

[#] end of __file__
