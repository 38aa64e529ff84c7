// Command dashboards writes FleetVM's Grafana dashboards (package
// hack/dashboards/dashboards) into the hub chart, one JSON file each under
// deploy/charts/fleetvm-hub/files/dashboards, removes any other JSON file
// there, and rewrites the generated section of
// docs/operator-guide/dashboards.md. Run from the repository root; `make
// manifests` runs it:
//
//	go run ./hack/dashboards
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fleetvm/fleetvm/hack/dashboards/dashboards"
)

func main() {
	if len(os.Args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: dashboards (from the repository root)")
		os.Exit(2)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "dashboards:", err)
		os.Exit(1)
	}
}

func run() error {
	all, err := dashboards.All()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dashboards.Dir, 0o755); err != nil {
		return err
	}
	written := map[string]bool{}
	for _, d := range all {
		data, err := d.JSON()
		if err != nil {
			return fmt.Errorf("%s: %w", d.Name, err)
		}
		if err := write(d.File(), data); err != nil {
			return err
		}
		written[filepath.Base(d.File())] = true
	}
	// A dashboard renamed or removed leaves no file behind.
	entries, err := os.ReadDir(dashboards.Dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") && !written[e.Name()] {
			if err := os.Remove(filepath.Join(dashboards.Dir, e.Name())); err != nil {
				return err
			}
		}
	}
	doc, err := os.ReadFile(dashboards.Doc)
	if err != nil {
		return err
	}
	updated, err := dashboards.UpdateDoc(doc, all)
	if err != nil {
		return err
	}
	return write(dashboards.Doc, updated)
}

// write writes data to path unless it already holds it.
func write(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	return os.WriteFile(path, data, 0o644)
}
