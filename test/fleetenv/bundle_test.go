package fleetenv

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBundle writes a bundle's files and reads them back as the fleet
// does, with no API server: every CRD the repository lists is in the
// bundle under its own name, the deploy files sit at their repository
// paths, and the bundle's binaries are used as they are, never built.
func TestBundle(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if IsBundle(dst) {
		t.Fatal("an empty folder is taken for a bundle")
	}
	if err := WriteBundle(root, dst, "v0.0.0-test"); err != nil {
		t.Fatal(err)
	}
	if !IsBundle(dst) {
		t.Fatal("the bundle written is not taken for one")
	}
	marker, err := os.ReadFile(filepath.Join(dst, BundleMarker))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{BundleMarker + " v0.0.0-test\n", ocmAPIModule + " v", argoCDModule + " v"} {
		if !strings.Contains(string(marker), want) {
			t.Errorf("marker %q lacks %q", marker, want)
		}
	}

	repo, err := repoCRDPaths(root)
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := crdPaths(dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []struct {
		name         string
		repo, bundle []string
	}{{"hub", repo.hub, bundle.hub}, {"spoke", repo.spoke, bundle.spoke}} {
		want := crdNames(t, set.repo)
		got := crdNames(t, set.bundle)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s CRDs in the bundle (-want,+got):\n%s", set.name, diff)
		}
		for _, p := range set.bundle {
			if !strings.HasPrefix(p, dst) {
				t.Errorf("%s CRD path %s is outside the bundle", set.name, p)
			}
		}
	}
	for _, p := range bundleDeployPaths {
		want, err := treeFiles(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		got, err := treeFiles(filepath.Join(dst, p))
		if err != nil {
			t.Errorf("bundle: %v", err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s in the bundle (-want,+got):\n%s", p, diff)
		}
	}

	// Without its binaries the bundle says so, and builds nothing.
	if _, err := binaryAssets(dst); err == nil || !strings.Contains(err.Error(), "bundle") {
		t.Errorf("binaryAssets of a bundle without binaries: err = %v, want one naming the bundle", err)
	}
	bin := filepath.Join(dst, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if err := os.WriteFile(filepath.Join(bin, b), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := binaryAssets(dst); err == nil || !strings.Contains(err.Error(), "pdeathsig-shim") {
		t.Errorf("binaryAssets of a bundle without the shim: err = %v, want one naming pdeathsig-shim", err)
	}
	if _, err := os.Stat(filepath.Join(bin, "pdeathsig-shim")); err == nil {
		t.Error("binaryAssets built the shim into a bundle")
	}
	if err := os.WriteFile(filepath.Join(bin, "pdeathsig-shim"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	links, err := binaryAssets(dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if target, err := os.Readlink(filepath.Join(links, b)); err != nil || target != "../pdeathsig-shim" {
			t.Errorf("%s: link to %q, %v; want ../pdeathsig-shim", b, target, err)
		}
	}
}

// crdNames returns the base names of the CRD files paths stand for, sorted.
func crdNames(t *testing.T, paths []string) []string {
	t.Helper()
	var names []string
	for _, p := range paths {
		n, err := baseNames(p)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, n...)
	}
	slices.Sort(names)
	return names
}

// baseNames returns the base names of the files path stands for: itself,
// or the YAML and JSON files of a folder.
func baseNames(path string) ([]string, error) {
	files, err := crdFiles(path)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	return names, nil
}

// treeFiles returns the files under path, relative to it: path itself
// when it is a file (as ".").
func treeFiles(path string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(path, p)
		files = append(files, rel)
		return err
	})
	return files, err
}
