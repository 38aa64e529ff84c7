// Command miniredis is the Redis server of the FleetVM local fleet: Argo CD's
// application controller and repo server keep their caches in Redis. It is
// miniredis, a Redis server written in Go, so a newcomer installs nothing
// system-wide. It serves on loopback until SIGINT or SIGTERM.
//
// miniredis expires keys only when told that time passed: a ticker tells it
// every second, so the TTLs Argo CD sets on its cache entries hold.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "address to serve Redis on")
	flag.Parse()

	srv := miniredis.NewMiniRedis()
	if err := srv.StartAddr(*addr); err != nil {
		fmt.Fprintf(os.Stderr, "miniredis: serve on %s: %v\n", *addr, err)
		os.Exit(1)
	}
	fmt.Printf("miniredis: serving on %s\n", srv.Addr())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-stop:
			srv.Close()
			return
		case now := <-tick.C:
			srv.FastForward(now.Sub(last))
			last = now
		}
	}
}
