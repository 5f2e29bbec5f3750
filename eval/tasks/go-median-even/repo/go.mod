module example.com/samples

go 1.22
