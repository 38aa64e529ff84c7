package localfleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is a binary of bin/ the local fleet runs, started through the
// pdeathsig shim so the kernel kills it when the fleet's process dies,
// however it dies. Its output goes to <name>.log in the fleet's log folder.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// linkNames makes bin/<name> a link to bin/<target> (the Argo CD
// components are one binary called by several names) and
// bin/pdeathsig/<name> a link to the shim, which execs bin/<name>.
func linkNames(bin, target string, names ...string) error {
	for _, name := range names {
		if target != "" && target != name {
			if err := relink(filepath.Join(bin, name), target); err != nil {
				return err
			}
		}
		if err := relink(filepath.Join(bin, "pdeathsig", name), "../pdeathsig-shim"); err != nil {
			return err
		}
	}
	return nil
}

func relink(link, target string) error {
	if got, err := os.Readlink(link); err == nil && got == target {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return err
	}
	// Link under a temporary name and rename over the old one, so that two
	// fleets starting at once never see the link missing.
	tmp := fmt.Sprintf("%s.%d.tmp", link, os.Getpid())
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, link)
}

// startProcess runs bin/<binary> with args and the extra environment,
// logging to <name>.log.
func startProcess(bin, logDir, binary, name string, args, env []string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(bin, "pdeathsig", binary), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: Ctrl-C in a terminal reaches the fleet only,
	// which then stops everything in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited tells whether the process ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM, then SIGKILL if the process is still there after
// the grace period.
func (p *process) stop(grace time.Duration) {
	if p == nil {
		return
	}
	if ok, _ := p.exited(); ok {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// waitListening waits until addr accepts TCP connections, failing early
// when the process exits.
func waitListening(ctx context.Context, p *process, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
			return nil
		}
		if ok, perr := p.exited(); ok {
			return fmt.Errorf("%s exited (%v) before serving on %s; see %s", p.name, perr, addr, p.log)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not serve on %s after %s; see %s", p.name, addr, timeout, p.log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// requireFiles fails with the make target to run when a binary is missing.
func requireFiles(bin string, names ...string) error {
	var errs []error
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(bin, n)); err != nil {
			errs = append(errs, fmt.Errorf("%s is missing", filepath.Join(bin, n)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: run 'make test-binaries' first (it builds Argo CD, helm, kustomize and miniredis into bin/)", err)
	}
	return nil
}
