package fleetenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// A benchmark bundle is a folder, shipped as an archive by `make
// bench-bundle`, that runs the fleet benchmark on a Linux machine with no
// Go toolchain, no module cache and no checkout. RepoRoot returns it in
// place of the repository, and it holds what the fleet reads there, at the
// same paths where it can:
//
//	fleetvm-bench-bundle   the marker (BundleMarker and the version, then
//	                       the versions of the modules the CRDs come from)
//	fleetvm-bench          the benchmark (hack/bench)
//	bin/                   fleetvm-hub, kube-apiserver, etcd, pdeathsig-shim
//	crds/hub/, crds/spoke/ every CRD file crdPaths lists, collected, so
//	                       nothing asks `go list` where the modules are
//	deploy/webhook/,       as in the repository, for WebhookOptions,
//	deploy/rbac/role.yaml, ReadHubRBAC and the drain scenario's delivery
//	deploy/charts/         stand-in
//	  fleetvm-vm/
//
// WriteBundle writes the marker, the CRDs and the deploy files; the
// Makefile builds and copies the binaries.

// BundleMarker names the file at the root of a bundle; the file's first
// line starts with it too.
const BundleMarker = "fleetvm-bench-bundle"

// bundleCRDs is the folder of a bundle that holds the collected CRDs.
const bundleCRDs = "crds"

// The modules whose CRD files the fleet installs.
const (
	ocmAPIModule = "open-cluster-management.io/api"
	argoCDModule = "github.com/argoproj/argo-cd/v3"
)

// bundleDeployPaths are what the fleet reads from deploy/ besides the
// CRDs: the webhook configurations (a folder, as envtest reads it), the
// hub's RBAC, and the VM chart that the drain scenario's delivery stand-in
// renders. A bundle keeps them at their repository paths.
var bundleDeployPaths = []string{
	filepath.Join("deploy", "webhook"),
	filepath.Join("deploy", "rbac", "role.yaml"),
	filepath.Join("deploy", "charts", "fleetvm-vm"),
}

// IsBundle reports whether dir is the root of a benchmark bundle.
func IsBundle(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, BundleMarker))
	return err == nil && bytes.HasPrefix(b, []byte(BundleMarker+" "))
}

// executableBundle returns the folder of the running program when it is
// the root of a bundle. os.Executable resolves links on Linux, so a link
// to the bundle's fleetvm-bench from elsewhere finds the bundle too.
func executableBundle() (string, bool) {
	exe, err := os.Executable()
	if err != nil {
		return "", false
	}
	dir := filepath.Dir(exe)
	return dir, IsBundle(dir)
}

// WriteBundle writes into dst, from the repository at root, what a bundle
// holds besides its binaries, the marker last so that a bundle cut short
// is not taken for one. version names the bundle in its marker.
func WriteBundle(root, dst, version string) error {
	if !isRepoRoot(root) {
		return fmt.Errorf("write bundle: %s is not the FleetVM repository", root)
	}
	if strings.ContainsAny(version, " \n") || version == "" {
		return fmt.Errorf("write bundle: version %q: want one word", version)
	}
	crds, err := repoCRDPaths(root)
	if err != nil {
		return err
	}
	for _, set := range []struct {
		name  string
		paths []string
	}{{"hub", crds.hub}, {"spoke", crds.spoke}} {
		if err := collectCRDs(set.paths, filepath.Join(dst, bundleCRDs, set.name)); err != nil {
			return fmt.Errorf("write bundle: %s CRDs: %w", set.name, err)
		}
	}
	for _, p := range bundleDeployPaths {
		if err := copyPath(filepath.Join(root, p), filepath.Join(dst, p)); err != nil {
			return fmt.Errorf("write bundle: %w", err)
		}
	}
	// The CRDs' provenance: the bundle no longer has go.mod to say it.
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Version}}", ocmAPIModule, argoCDModule)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	modules, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("write bundle: go list -m: %v: %s", err, stderr.String())
	}
	marker := BundleMarker + " " + version + "\n" + string(modules)
	return os.WriteFile(filepath.Join(dst, BundleMarker), []byte(marker), 0o644)
}

// collectCRDs copies the CRD files of paths, a folder standing for the
// CRD files in it as envtest reads them, into the folder dst. Two files of
// the same name would overwrite one another: that is an error.
func collectCRDs(paths []string, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	seen := map[string]string{}
	for _, p := range paths {
		files, err := crdFiles(p)
		if err != nil {
			return err
		}
		for _, f := range files {
			name := filepath.Base(f)
			if other, ok := seen[name]; ok {
				return fmt.Errorf("%s and %s share the name %s", other, f, name)
			}
			seen[name] = f
			if err := copyFile(f, filepath.Join(dst, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// crdFiles returns path when it is a file, or the files of the folder
// path that envtest would install: those named *.yaml, *.yml or *.json.
func crdFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && slices.Contains([]string{".yaml", ".yml", ".json"}, filepath.Ext(e.Name())) {
			files = append(files, filepath.Join(path, e.Name()))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s holds no CRD files", path)
	}
	return files, nil
}

// copyPath copies the file src to dst, or the folder src with everything
// in it (a chart has templates/) into the folder dst.
func copyPath(src, dst string) error {
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return copyFile(src, dst)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := copyPath(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
