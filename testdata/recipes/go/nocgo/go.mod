module example.com/memlint/nocgo

go 1.19
