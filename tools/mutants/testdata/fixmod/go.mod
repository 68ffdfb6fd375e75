module fixmod

go 1.26.0
