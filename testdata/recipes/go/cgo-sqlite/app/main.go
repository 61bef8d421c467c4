// A cgo program whose build info names github.com/mattn/go-sqlite3 (a local stand-in).
package main

import (
	"fmt"

	sqlite3 "github.com/mattn/go-sqlite3"
)

func main() { fmt.Println(sqlite3.Touch(1 << 20)) }
