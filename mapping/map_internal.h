/* Shared by the two file readers of rank mapping (map.c: mapping files;
 * map_traffic.c: traffic matrices). Prefix: torxm_. */
#ifndef TORXM_MAP_INTERNAL_H
#define TORXM_MAP_INTERNAL_H

#include <torx/packet.h>

/* Records "torx: path:line: reason" for torx_last_error() and returns
 * TORX_ERR_INVAL: the file is wrong. */
torx_status_t torxm_line_error(const char *path, unsigned long line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A blank between fields: space, tab, CR, VT, FF or newline. */
static inline int torxm_is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' || c == '\n';
}

/* Whether a line of len bytes holds data: something other than blanks,
 * and not a comment ('#' as its first non-blank character). */
static inline int torxm_line_has_data(const char *buf, size_t len)
{
    size_t i = 0;
    while (i < len && torxm_is_blank(buf[i]))
        i++;
    return i < len && buf[i] != '#';
}

#endif /* TORXM_MAP_INTERNAL_H */
