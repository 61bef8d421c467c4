// A pure Go program, built with CGO_ENABLED=0.
package main

import "fmt"

func main() { fmt.Println("hello") }
