// A Go service stand-in: prints the soft memory limit the runtime took from GOMEMLIMIT
// (math.MaxInt64 when there is none) and exits. With a GOMEMLIMIT the runtime refuses, it never
// gets here: the runtime dies first with "fatal error: malformed GOMEMLIMIT".
package main

import (
	"fmt"
	"runtime/debug"
)

func main() { fmt.Println(debug.SetMemoryLimit(-1)) }
