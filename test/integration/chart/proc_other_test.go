//go:build !linux

package chart

import "os/exec"

// killWithParent: only Linux can have the kernel kill a child with its
// parent; elsewhere the test's cleanup stops it.
func killWithParent(*exec.Cmd) {}
