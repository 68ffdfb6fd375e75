// Command cpuload keeps every core busy until it is killed: one spinning
// goroutine per CPU (runtime.NumCPU, or -n). make flakes starts it, runs
// the short suite beside it and kills it by its PID, so the tests see a
// machine as loaded as a shared CI runner.
//
//	go run ./tools/cpuload [-n N]
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
)

func main() {
	n := flag.Int("n", runtime.NumCPU(), "spinning goroutines (at least 1)")
	flag.Parse()
	if *n < 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: cpuload [-n N] (N ≥ 1; default: the number of CPUs)")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(max(*n, runtime.GOMAXPROCS(0)))
	for range *n {
		go spin()
	}
	select {}
}

// spin never blocks and never allocates: a pure CPU consumer. The counter
// escapes through a package variable so the loop is not optimised away.
func spin() {
	var x uint64
	for {
		x = x*6364136223846793005 + 1442695040888963407
		if x == 0 {
			sink = x
		}
	}
}

var sink uint64
