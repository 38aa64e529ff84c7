// Command benchbundle finishes a benchmark bundle that `make bench-bundle`
// has put the binaries into: it adds what the fleet reads from the
// repository (fleetenv.WriteBundle: the CRDs, the webhook configurations,
// the hub's RBAC, the marker) and a README, then the Makefile packs the
// folder. The folder's name is the archive's, and the README's commands
// use it.
//
//	go run ./hack/benchbundle --version v0.1.0 _output/fleetvm-bench-v0.1.0-linux-amd64
package main

import (
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// binaries are what the Makefile puts into the bundle: the benchmark at
// its root, where fleetenv looks for the marker, and the rest in bin/,
// where the fleet starts them from.
var binaries = []string{
	"fleetvm-bench",
	"bin/fleetvm-hub",
	"bin/kube-apiserver",
	"bin/etcd",
	"bin/pdeathsig-shim",
}

func main() {
	version := flag.String("version", "", "The version the bundle is named after (git describe).")
	flag.Parse()
	if flag.NArg() != 1 || *version == "" {
		fmt.Fprintln(os.Stderr, "usage: benchbundle --version VERSION FOLDER")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *version); err != nil {
		fmt.Fprintln(os.Stderr, "benchbundle:", err)
		os.Exit(1)
	}
}

func run(dir, version string) error {
	root, err := fleetenv.RepoRoot()
	if err != nil {
		return err
	}
	var dynamic []string
	for _, b := range binaries {
		linked, err := dynamicallyLinked(filepath.Join(dir, b))
		if err != nil {
			return err
		}
		if linked {
			dynamic = append(dynamic, filepath.Base(b))
		}
	}
	if err := fleetenv.WriteBundle(root, dir, version); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(readme(filepath.Base(dir), dynamic)), 0o644)
}

// dynamicallyLinked reports whether the ELF executable at path asks for a
// dynamic loader: such a binary runs only where its C library is.
func dynamicallyLinked(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true, nil
		}
	}
	return false, nil
}

func readme(name string, dynamic []string) string {
	libc := "Every binary in it is statically linked."
	if len(dynamic) > 0 {
		libc = "These need the C library (glibc) they were linked against, or a newer\none: " +
			strings.Join(dynamic, ", ") + "."
	}
	return strings.ReplaceAll(strings.ReplaceAll(`# FleetVM fleet benchmark: NAME

FleetVM's fleet benchmark (`+"`make bench`"+` in the repository) with everything
it reads: fleetvm-hub, kube-apiserver, etcd, the CRDs of the hub and of the
clusters, the webhook configurations, the hub's RBAC and the VM chart. It
needs Linux and no Go.

LIBC

    tar xzf NAME.tar.gz
    cd NAME
    BENCH_SCALE=0.1 ./fleetvm-bench --rest 1m

The default run is 1,000 clusters and 1,000 FleetVMs, with 5 minutes at
rest; BENCH_SCALE scales both counts (0.1: 100 each). It prints a table and
writes the JSON report and the hub's log to _output/bench (--out). The
other flags: --clusters, --fleetvms, --hub-workers, --rest, --out and more
(./fleetvm-bench --help); BENCH_SERIES=1 runs the scaling series.

    ./fleetvm-bench --drain 500 --timeout 30m

drains a cluster holding 500 copies instead, on a hub and three clusters
with the KubeVirt simulator: the time, the moves at once against the
limits, and the VMs that ever ran on two clusters (0, or it fails).

The fleet writes links into bin/pdeathsig/ and its API servers' data under
$TMPDIR, so unpack it where you may write. What the figures mean:
docs/developer-guide/benchmarks.md in the FleetVM repository.
`, "NAME", name), "LIBC", libc)
}
