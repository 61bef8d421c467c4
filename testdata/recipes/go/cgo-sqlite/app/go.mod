module example.com/memlint/cgoapp

go 1.19

require github.com/mattn/go-sqlite3 v1.14.22

replace github.com/mattn/go-sqlite3 => ../sqlite3
