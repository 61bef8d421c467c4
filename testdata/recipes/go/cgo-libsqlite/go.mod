module example.com/memlint/libsqlite

go 1.19
