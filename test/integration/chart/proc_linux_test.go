package chart

import (
	"os/exec"
	"syscall"
)

// killWithParent makes the kernel kill cmd when the test binary dies, so no
// fleetvm-hub outlives a crashed or timed-out test.
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
