# Writes the section-3 man pages of torx's public headers from the comment
# above each declaration:
#
#   /* NAME     torx_f, torx_g - what they do
#    * SYNOPSIS        (optional: types the declaration needs)
#    * DESCRIPTION
#    *   text
#    * RETURN VALUE
#    *   text
#    * NOTES
#    *   text
#    * SEE ALSO torx_h, torx_k
#    */
#   int torx_f(int a);
#   int torx_g(void);
#
# One page per name (torx_f.3, torx_g.3; a block that names several
# functions gives each the same page), SYNOPSIS holding the #include and the
# declarations that follow the comment (a static inline function's head).
#
#   awk -v version=0.9.0 -v outdir=man/man3 -f gen-man3.awk include/torx/*.h
#
# POSIX awk (mawk, gawk, busybox); prints the pages it wrote, one a line.

function trim(s) {
    sub(/^[ \t]+/, "", s)
    sub(/[ \t]+$/, "", s)
    return s
}

# Text for roff: backslashes, and a line that would read as a request.
function esc(s) {
    gsub(/\\/, "\\e", s)
    if (s ~ /^[.']/)
        s = "\\&" s
    return s
}

function is_header(s) {
    return s ~ /^ \* (DESCRIPTION|RETURN VALUE|NOTES|SYNOPSIS|ERRORS|SEE ALSO|EXAMPLES?|ENVIRONMENT)( |$)/
}

function start_section(name) {
    nsec[nb]++
    secname[nb, nsec[nb]] = name
    sectext[nb, nsec[nb]] = ""
}

function add_line(s) {
    if (sectext[nb, nsec[nb]] == "")
        sectext[nb, nsec[nb]] = s
    else
        sectext[nb, nsec[nb]] = sectext[nb, nsec[nb]] "\n" s
}

# The NAME line(s) are complete once they hold " - ".
function finish_name(    i, n, parts, p) {
    p = index(nametext, " - ")
    desc[nb] = trim(substr(nametext, p + 3))
    n = split(substr(nametext, 1, p - 1), parts, ",")
    nnames[nb] = 0
    for (i = 1; i <= n; i++) {
        parts[i] = trim(parts[i])
        if (parts[i] == "")
            continue
        nnames[nb]++
        fname[nb, nnames[nb]] = parts[i]
        pending[nb, parts[i]] = 1
        npending++
        known[parts[i]] = 1
    }
}

# Look for a pending declaration of block nb on a code line.
function scan_decl(line,    i, nm, re) {
    if (capturing) {
        decl_add(line)
        return
    }
    for (i = 1; i <= nnames[nb]; i++) {
        nm = fname[nb, i]
        if (!pending[nb, nm])
            continue
        re = "(^|[^A-Za-z0-9_])" nm "[ \t]*\\("
        if (line ~ re || line ~ ("^#[ \t]*define[ \t]+" nm "([^A-Za-z0-9_]|$)")) {
            pending[nb, nm] = 0
            npending--
            capturing = 1
            if (ndecl[nb] > 0)
                decl[nb] = decl[nb] "\n"
            ndecl[nb]++
            decl_add(line)
            return
        }
    }
}

# Adds a declaration line; ends the declaration at ';' or '{' (an inline
# function's body) or, for a macro, at the line's end.
function decl_add(line,    p, q, done) {
    sub(/[ \t]*\/\*.*$/, "", line)
    sub(/[ \t]*\/\/.*$/, "", line)
    done = 0
    if (line ~ /^#/) {
        sub(/[ \t]*\\$/, "", line)
        done = 1
    } else {
        p = index(line, ";")
        q = index(line, "{")
        if (q && (!p || q < p)) {
            line = trim(substr(line, 1, q - 1))
            done = 1
            if (line == "") {
                sub(/\n$/, "", decl[nb])
                decl[nb] = decl[nb] ";"
                capturing = 0
                return
            }
            line = line ";"
        } else if (p) {
            line = substr(line, 1, p)
            done = 1
        }
    }
    sub(/[ \t]+$/, "", line)
    decl[nb] = decl[nb] line
    if (done)
        capturing = 0
    else
        decl[nb] = decl[nb] "\n"
}

# Braces outside comments, to skip inline functions' bodies.
function depth_of(line,    t) {
    t = line
    gsub(/"([^"\\]|\\.)*"/, "", t)
    gsub(/'([^'\\]|\\.)*'/, "", t)
    return gsub(/\{/, "{", t) - gsub(/\}/, "}", t)
}

FNR == 1 {
    incomment = 0
    n = split(FILENAME, path, "/")
    header = "torx/" path[n]
    state = "code"
    capturing = 0
    depth = 0
}

state == "code" && /^\/\* NAME[ \t]/ {
    nb++
    hdr[nb] = header
    nsec[nb] = 0
    ndecl[nb] = 0
    decl[nb] = ""
    nametext = $0
    sub(/^\/\* NAME[ \t]+/, "", nametext)
    state = index(nametext, " - ") ? "block" : "name"
    if (state == "block")
        finish_name()
    cur = "NAME"
    next
}

state == "name" {
    line = $0
    sub(/^ \*[ \t]*/, "", line)
    nametext = nametext " " line
    if (index(nametext, " - ")) {
        finish_name()
        state = "block"
    }
    next
}

state == "block" {
    line = $0
    ended = 0
    if (index(line, "*/")) {
        ended = 1
        sub(/[ \t]*\*\/.*$/, "", line)
    }
    if (is_header(line)) {
        h = substr(line, 4)
        if (h ~ /^SEE ALSO/) {
            start_section("SEE ALSO")
            rest = trim(substr(h, 9))
            if (rest != "")
                add_line(rest)
        } else {
            start_section(trim(h))
        }
        cur = secname[nb, nsec[nb]]
    } else if (line ~ /^ \*/ || line == "") {
        sub(/^ \*/, "", line)
        if (cur == "NAME") {
            if (trim(line) != "")
                desc[nb] = desc[nb] " " trim(line)
        } else if (cur == "SEE ALSO") {
            if (trim(line) != "")
                add_line(trim(line))
        } else {
            sub(/^   /, "", line)
            sub(/^ +$/, "", line)
            add_line(line)
        }
    }
    if (ended) {
        state = "code"
        capturing = 0
        depth = 0
    }
    next
}

# Code (and other comments) after a block: the declarations of its names.
state == "code" && nb > 0 && (npending > 0 || capturing) && hdr[nb] == header {
    line = $0
    if (incomment) {
        if (!index(line, "*/"))
            next
        incomment = 0
        line = substr(line, index(line, "*/") + 2)
    }
    gsub(/\/\*([^*]|\*+[^*\/])*\*+\//, "", line)
    if (index(line, "/*")) {
        incomment = 1
        line = substr(line, 1, index(line, "/*") - 1)
    }
    if (trim(line) == "" && !capturing)
        next
    if (depth == 0)
        scan_decl(line)
    depth += depth_of(line)
    if (depth < 0)
        depth = 0
    next
}

END {
    if (outdir == "")
        outdir = "."
    for (b = 1; b <= nb; b++) {
        names = ""
        for (i = 1; i <= nnames[b]; i++)
            names = names (i > 1 ? ", " : "") fname[b, i]
        for (i = 1; i <= nnames[b]; i++) {
            f = outdir "/" fname[b, i] ".3"
            printf "" > f
            print ".\\\" " fname[b, i] "(3): generated by scripts/gen-man3.awk from the" > f
            print ".\\\" comment above its declaration in <" hdr[b] ">; do not edit." > f
            print ".TH " fname[b, i] " 3 \"\" \"torx " version "\" \"torx Library Functions\"" > f
            print ".nh" > f
            print ".SH NAME" > f
            print esc(names) " \\- " esc(desc[b]) > f
            print ".SH SYNOPSIS" > f
            print ".nf" > f
            print ".B #include <" hdr[b] ">" > f
            if (decl[b] != "") {
                print ".sp" > f
                n = split(decl[b], dl, "\n")
                for (j = 1; j <= n; j++) {
                    l = esc(dl[j])
                    if (l ~ /^ /)
                        l = "\\&" l
                    print l > f
                }
            }
            print ".fi" > f
            for (s = 1; s <= nsec[b]; s++)
                if (secname[b, s] == "SYNOPSIS") {
                    print ".PP" > f
                    emit_to(sectext[b, s], f)
                }
            for (s = 1; s <= nsec[b]; s++) {
                sn = secname[b, s]
                if (sn == "SEE ALSO" || sn == "SYNOPSIS")
                    continue
                print ".SH " sn > f
                emit_to(sectext[b, s], f)
            }
            print ".SH SEE ALSO" > f
            st = ""
            for (s = 1; s <= nsec[b]; s++)
                if (secname[b, s] == "SEE ALSO")
                    st = st (st == "" ? "" : ", ") sectext[b, s]
            see_to(st, f)
            close(f)
            print f
        }
    }
}

# A section's text: filled, unless it is laid out in columns or indented
# (tables, formulas), which keep their lines.
function emit_to(t, f,    n, lines, i, nofill, l) {
    n = split(t, lines, "\n")
    while (n > 0 && lines[n] == "")
        n--
    nofill = 0
    for (i = 1; i <= n; i++)
        if (lines[i] ~ /^ / || lines[i] ~ /[^ .]  +[^ ]/)
            nofill = 1
    if (nofill)
        print ".nf" > f
    for (i = 1; i <= n; i++) {
        l = lines[i]
        if (l == "") {
            print (nofill ? ".sp" : ".PP") > f
            continue
        }
        if (nofill) {
            l = esc(l)
            if (l ~ /^ /)
                l = "\\&" l
            print l > f
        } else {
            print esc(trim(l)) > f
        }
    }
    if (nofill)
        print ".fi" > f
}

function see_to(t, f,    n, refs, i, r, k, nm, out) {
    gsub(/\n/, " ", t)
    n = split(t, refs, /,[ \t]*/)
    k = 0
    for (i = 1; i <= n; i++) {
        r = trim(refs[i])
        if (r == "")
            continue
        nm = r
        sub(/\(3\)$/, "", nm)
        if (nm in known)
            out[++k] = ".BR " nm " (3)"
        else
            out[++k] = esc(r)
    }
    out[++k] = ".BR torx (7)"
    for (i = 1; i <= k; i++)
        print out[i] (i < k ? "," : "") > f
}
