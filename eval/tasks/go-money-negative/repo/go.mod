module example.com/invoices

go 1.22
