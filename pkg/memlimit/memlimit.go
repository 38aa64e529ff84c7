// Package memlimit keeps a FleetVM process's Go heap under its container's
// memory limit. Go's garbage collector lets the heap grow to twice what is
// live before it collects (GOGC=100) and knows nothing of the container:
// after a burst of FleetVMs, a hub whose live heap is half its limit can
// reach the limit and be OOM-killed, although collecting sooner would have
// kept it well inside. Setting the runtime's soft memory limit
// (runtime/debug.SetMemoryLimit, what GOMEMLIMIT sets) below the cgroup's
// limit makes the collector run harder near it instead.
package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
)

// Share is the part of the container's memory limit given to the Go
// runtime. The rest is for what the runtime does not count: the pages of
// the binary itself (about 65 MiB of fleetvm-hub's are resident) and the
// C library's.
const Share = 0.8

// CgroupRoot is where the process's cgroup file system is mounted in a
// container.
const CgroupRoot = "/sys/fs/cgroup"

// Limit reads the memory limit of the cgroup mounted at root: cgroup v2's
// memory.max, or cgroup v1's memory/memory.limit_in_bytes. ok is false when
// there is no limit (v2 "max", v1's page-rounded maximum) or no cgroup file.
func Limit(root string) (limit int64, ok bool, err error) {
	for _, name := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		raw, err := os.ReadFile(filepath.Join(root, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, false, err
		}
		v := strings.TrimSpace(string(raw))
		if v == "max" {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %q is not a number of bytes", filepath.Join(root, name), v)
		}
		// cgroup v1 writes an unlimited group as the largest page-aligned
		// int64; nothing runs with a limit within a page of it.
		if n <= 0 || n >= math.MaxInt64&^(1<<12-1) {
			return 0, false, nil
		}
		return n, true, nil
	}
	return 0, false, nil
}

// Outcome says what Apply did, for the process's log.
type Outcome struct {
	// Source is "GOMEMLIMIT" (set by the user, left alone), "cgroup" (set
	// from the container's limit) or "none" (no limit found: the runtime's
	// default, no soft limit).
	Source string
	// Container is the container's limit in bytes (0 when none).
	Container int64
	// Soft is the runtime's soft memory limit in bytes (0 when unset).
	Soft int64
}

// Apply sets the Go runtime's soft memory limit to Share of the memory
// limit of the cgroup mounted at root, unless GOMEMLIMIT is set: an
// operator's explicit choice wins.
func Apply(root string) (Outcome, error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return Outcome{Source: "GOMEMLIMIT", Soft: debug.SetMemoryLimit(-1)}, nil
	}
	limit, ok, err := Limit(root)
	if err != nil || !ok {
		return Outcome{Source: "none"}, err
	}
	soft := int64(float64(limit) * Share)
	debug.SetMemoryLimit(soft)
	return Outcome{Source: "cgroup", Container: limit, Soft: soft}, nil
}

// Setup applies the limit of the process's container (CgroupRoot) and
// logs what it did.
func Setup(log logr.Logger) {
	switch out, err := Apply(CgroupRoot); {
	case err != nil:
		log.Error(err, "Could not read the container's memory limit; the Go runtime keeps no soft memory limit")
	case out.Source != "none":
		log.Info("Go runtime soft memory limit", "source", out.Source, "containerLimitBytes", out.Container, "softLimitBytes", out.Soft)
	}
}
