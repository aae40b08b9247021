module ticket

go 1.19
