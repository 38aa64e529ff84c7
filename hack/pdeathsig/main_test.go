package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestMain doubles as the program the shim starts in the test below: with
// PDEATHSIG_PROBE set it prints its parent-death signal and exits. The
// signal is the calling thread's, and a new thread starts without one: the
// probe reads it on the main thread, the one the shim's exec left, because
// main.go's init locks the main goroutine there in this test binary too.
func TestMain(m *testing.M) {
	if os.Getenv("PDEATHSIG_PROBE") != "" {
		var sig int32
		if err := unix.Prctl(unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)), 0, 0, 0); err != nil {
			fmt.Println("prctl:", err)
			os.Exit(1)
		}
		fmt.Println(sig)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestExecKeepsTheSignal starts a program through the shim many times, four
// at once, and checks that every one runs with SIGKILL as its parent-death
// signal. The signal is set per thread: before the shim locked its main
// goroutine to one thread, about 1 start in 100 ran without it, and an etcd
// outlived a killed test.
func TestExecKeepsTheSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shim")
	}
	bin := t.TempDir()
	shim := filepath.Join(bin, "pdeathsig-shim")
	if out, err := exec.Command("go", "build", "-o", shim, ".").CombinedOutput(); err != nil {
		t.Fatalf("build the shim: %v: %s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// bin/probe is this test binary; bin/links/probe is the shim under its
	// name, as bin/pdeathsig/etcd is in the test environment.
	if err := os.Symlink(self, filepath.Join(bin, "probe")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(bin, "links"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(bin, "links", "probe")
	if err := os.Symlink("../pdeathsig-shim", link); err != nil {
		t.Fatal(err)
	}

	const starts, parallel = 400, 4
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range starts / parallel {
				cmd := exec.Command(link)
				cmd.Env = append(os.Environ(), "PDEATHSIG_PROBE=1")
				out, err := cmd.CombinedOutput()
				v := strings.TrimSpace(string(out))
				if err != nil {
					v = fmt.Sprintf("%v: %s", err, out)
				}
				mu.Lock()
				got[v]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	want := fmt.Sprint(int(unix.SIGKILL))
	if got[want] != starts {
		t.Errorf("parent-death signal of %d programs started through the shim: %v, want %s for all", starts, got, want)
	}
}
