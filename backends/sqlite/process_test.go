package sqlite_test

func runWorker(name string) int { return 2 }
