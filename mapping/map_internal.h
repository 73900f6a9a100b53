/* Shared by the two file readers of rank mapping (map.c: mapping files;
 * map_traffic.c: traffic matrices). Prefix: torxm_. */
#ifndef TORXM_MAP_INTERNAL_H
#define TORXM_MAP_INTERNAL_H

#include <torx/packet.h>

#include <stdio.h>
#include <sys/types.h>

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

/* Reads lines of f into *buf (getline's buffer, *bufsize bytes) up to the
 * next one that holds data, counting each line read in *line and setting
 * *any_line once a line was read: that line's length, or -1 at the end of
 * the file or on a read error (ferror tells which; errno as getline left
 * it). Both readers: the mapping file (map.c), the traffic matrix
 * (map_traffic.c). */
ssize_t torxm_next_data_line(FILE *f, char **buf, size_t *bufsize, unsigned long *line,
                             int *any_line);

#endif /* TORXM_MAP_INTERNAL_H */
