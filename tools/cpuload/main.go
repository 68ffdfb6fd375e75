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
	"sync/atomic"
)

func main() {
	n := flag.Int("n", runtime.NumCPU(), "spinning goroutines (at least 1)")
	flag.Parse()
	if *n < 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: cpuload [-n N] (N ≥ 1; default: the number of CPUs)")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(max(*n, runtime.GOMAXPROCS(0)))
	counts := make([]atomic.Uint64, *n)
	for i := range counts {
		go spin(&counts[i])
	}
	select {}
}

// spin never blocks and never allocates: a pure CPU consumer. It counts
// in its own counter (main keeps them all), so the loop has an effect and
// no two spinners share one.
func spin(n *atomic.Uint64) {
	for {
		n.Add(1)
	}
}
