// A cgo program linked against Debian's shared libsqlite3 (DT_NEEDED libsqlite3.so.0), with no
// Go module naming SQLite: memlint knows it from the library it needs.
package main

/*
#cgo LDFLAGS: -lsqlite3
#include <sqlite3.h>
*/
import "C"

import "fmt"

func main() { fmt.Println("sqlite", C.GoString(C.sqlite3_libversion())) }
