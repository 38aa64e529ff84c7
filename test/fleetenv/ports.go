package fleetenv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// FreePorts returns n distinct TCP ports free on 127.0.0.1 now, for a
// process the test starts and which binds them itself.
//
// The ports come from below the kernel's ephemeral range: a port from
// "127.0.0.1:0" is one that any outgoing connection on the machine may take
// as its local end between this call and the process's bind, and with
// many test packages running at once that happens. Below the range only
// another listener can take it.
func FreePorts(n int) ([]int, error) {
	low := EphemeralLow() - 1
	const floor = 10000
	if low <= floor {
		return nil, fmt.Errorf("no ports below the ephemeral range (it starts at %d)", low+1)
	}
	var (
		ports = make([]int, 0, n)
		held  []net.Listener
	)
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, errors.New("no free port found below the ephemeral range in 1000 tries")
		}
		port := floor + rand.IntN(low-floor) //nolint:gosec // a port, not a secret
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		held = append(held, l)
		ports = append(ports, port)
	}
	return ports, nil
}

// FreePort returns one port as FreePorts does.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// EphemeralLow is the first port of the kernel's ephemeral range (Linux's
// default when it cannot be read).
func EphemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				return v
			}
		}
	}
	return 32768
}
