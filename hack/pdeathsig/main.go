// Command pdeathsig runs a binary of bin/ so that the kernel kills it when
// the process that started it dies.
//
// The test environment starts kube-apiserver and etcd through links to this
// program named after them (bin/pdeathsig/kube-apiserver -> pdeathsig). It
// asks the kernel for SIGKILL on parent death, then execs bin/<its own name>
// in place: same PID, same arguments, so signals from the test environment
// reach the real process, and a test binary that panics or times out leaves
// no API server or etcd behind.
//
// The parent-death signal belongs to a thread, not to the process: prctl
// sets it on the calling thread, and execve keeps only the thread that calls
// it. The main goroutine is therefore locked to the main thread from init,
// so prctl and exec run on the same thread. Unlocked, the Go scheduler may
// move it between the two calls (it did for about 1 run in 100 on a loaded
// machine), and the binary runs without the signal.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

func init() {
	// Locked in init, the main goroutine stays on the process' main thread.
	runtime.LockOSThread()
}

func main() {
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "pdeathsig: prctl: %v\n", err)
		os.Exit(1)
	}
	if os.Getppid() == 1 {
		// The parent died before prctl took effect.
		os.Exit(1)
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pdeathsig: %v\n", err)
		os.Exit(1)
	}
	// self resolves the link to bin/pdeathsig-shim; the real binary sits in
	// the same folder under the name the link was called by.
	target := filepath.Join(filepath.Dir(self), filepath.Base(os.Args[0]))
	if err := syscall.Exec(target, append([]string{target}, os.Args[1:]...), os.Environ()); err != nil {
		fmt.Fprintf(os.Stderr, "pdeathsig: exec %s: %v\n", target, err)
		os.Exit(1)
	}
}
