// Package sqlite3 stands in for github.com/mattn/go-sqlite3, which cannot be fetched here
// (the Go module proxy is not reachable): a local module with that module path, pulled in by
// a `replace` directive, so that the program's build info names it as go-sqlite3 does. Like
// the real one it calls C code that allocates with malloc.
package sqlite3

/*
#include <stdlib.h>
#include <string.h>
static size_t touch(size_t n) { char *p = malloc(n); memset(p, 1, n); free(p); return n; }
*/
import "C"

// Touch allocates and frees n bytes with C's malloc.
func Touch(n int) int { return int(C.touch(C.size_t(n))) }
