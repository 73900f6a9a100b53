#!/bin/sh
# Regenerates the build system: ./autogen.sh && ./configure && make && make check
# (or scripts/build.sh for the out-of-tree build in build/).
set -e
cd "$(dirname "$0")"
for tool in autoreconf aclocal automake libtoolize pkg-config; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "autogen.sh: $tool not found: install autoconf automake libtool pkg-config" >&2
        echo "            (or run scripts/install-deps.sh)" >&2
        exit 1
    fi
done
# PKG_CHECK_MODULES comes from pkg-config's pkg.m4; without it configure
# would fail later with a cryptic "syntax error near PKG_CHECK_MODULES".
if ! aclocal --print-ac-dir >/dev/null 2>&1 || [ ! -f "$(aclocal --print-ac-dir)/pkg.m4" ]; then
    echo "autogen.sh: pkg.m4 not found in $(aclocal --print-ac-dir 2>/dev/null): install pkg-config" >&2
    exit 1
fi
mkdir -p m4 build-aux
autoreconf -fi
