module example.com/memlint/gomem

go 1.19
