package fleetenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// RepoRoot returns the root of the FleetVM repository, or of the benchmark
// bundle the running program came in (see bundle.go): the fleet reads its
// CRDs, webhook configurations, RBAC and binaries below it.
//
// A bundle is found only beside the executable, so a program unpacked from
// one uses its own files even when started inside a checkout, and test
// binaries (built into temporary folders) always use the repository.
func RepoRoot() (string, error) {
	if dir, ok := executableBundle(); ok {
		return dir, nil
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
		if isRepoRoot(root) {
			return root, nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isRepoRoot(dir) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("fleetenv: cannot find the FleetVM repository root (go.mod of github.com/fleetvm/fleetvm)")
		}
		dir = parent
	}
}

func isRepoRoot(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && bytes.HasPrefix(b, []byte("module github.com/fleetvm/fleetvm\n"))
}

// binaryAssets returns the folder envtest starts kube-apiserver and etcd
// from: links to the pdeathsig shim, named after the real binaries in bin/.
// In the repository the shim is built here when missing or older than its
// source (it is small);
// kube-apiserver and etcd take minutes and are built by `make test-binaries`.
// A bundle ships all three, and a machine that runs one may have no Go.
func binaryAssets(root string) (string, error) {
	bin := filepath.Join(root, "bin")
	bundle := IsBundle(root)
	shim := filepath.Join(bin, "pdeathsig-shim")
	required := []string{"kube-apiserver", "etcd"}
	if bundle {
		required = append(required, "pdeathsig-shim")
	}
	for _, b := range required {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			if bundle {
				return "", fmt.Errorf("fleetvm test environment: the bundle at %s lacks %s: unpack it again, or build it again with 'make bench-bundle'", root, filepath.Join(bin, b))
			}
			return "", fmt.Errorf("fleetvm test environment: %s is missing: run 'make test-binaries' (or 'make test') first", filepath.Join(bin, b))
		}
	}
	if !bundle {
		if err := buildOnce(root, shim); err != nil {
			return "", err
		}
	}
	links := filepath.Join(bin, "pdeathsig")
	if err := os.MkdirAll(links, 0o755); err != nil {
		return "", err
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		link := filepath.Join(links, b)
		if target, err := os.Readlink(link); err == nil && target == "../pdeathsig-shim" {
			continue
		}
		_ = os.Remove(link)
		if err := os.Symlink("../pdeathsig-shim", link); err != nil && !os.IsExist(err) {
			return "", err
		}
	}
	return links, nil
}

var shimBuild struct {
	sync.Mutex
	done bool
}

func buildOnce(root, out string) error {
	shimBuild.Lock()
	defer shimBuild.Unlock()
	if shimBuild.done {
		return nil
	}
	// Kept while it is newer than its source: a checkout with a mended
	// shim builds it again.
	if bin, err := os.Stat(out); err == nil {
		src, err := os.Stat(filepath.Join(root, "hack", "pdeathsig", "main.go"))
		if err == nil && !bin.ModTime().Before(src.ModTime()) {
			shimBuild.done = true
			return nil
		}
	}
	// Build to a temporary name and rename, so parallel test binaries never
	// see a half-written file.
	tmp := fmt.Sprintf("%s.%d", out, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, "./hack/pdeathsig")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build pdeathsig shim: %v: %s", err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		return err
	}
	shimBuild.done = true
	return nil
}

// ModuleDir returns the folder of a Go module the project depends on, such
// as open-cluster-management.io/api, whose CRDs the fleet installs.
func ModuleDir(root, module string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %v: %s", module, err, stderr.String())
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("go list -m %s: module not downloaded (run 'go mod download')", module)
	}
	return dir, nil
}

type crdSet struct {
	hub, spoke []string
}

// crdPaths lists the CRD files of the hub and of the spokes. A bundle holds
// them collected in two folders (WriteBundle); in the repository they are
// found as repoCRDPaths says.
func crdPaths(root string) (crdSet, error) {
	if IsBundle(root) {
		return crdSet{
			hub:   []string{filepath.Join(root, bundleCRDs, "hub")},
			spoke: []string{filepath.Join(root, bundleCRDs, "spoke")},
		}, nil
	}
	return repoCRDPaths(root)
}

// repoCRDPaths lists the CRD files of the hub and of the spokes in the
// repository.
//
// Hub: FleetVM's own; OCM cluster, addon and work; Argo CD; GitOpsCluster.
// Spokes: KubeVirt (VMs, instances, migrations, exports), CDI, Multus'
// NetworkAttachmentDefinition, OCM's AppliedManifestWork and ClusterClaim. OCM and Argo CD CRDs come from their Go modules
// so they always match the pinned versions; the others are copies in
// test/testdata/crds.
func repoCRDPaths(root string) (crdSet, error) {
	ocm, err := ModuleDir(root, ocmAPIModule)
	if err != nil {
		return crdSet{}, err
	}
	argo, err := ModuleDir(root, argoCDModule)
	if err != nil {
		return crdSet{}, err
	}
	third := filepath.Join(root, "test", "testdata", "crds")
	hub := []string{
		filepath.Join(root, "deploy", "crds"),
		filepath.Join(ocm, "cluster/v1/0000_00_clusters.open-cluster-management.io_managedclusters.crd.yaml"),
		filepath.Join(ocm, "cluster/v1alpha1/0000_02_clusters.open-cluster-management.io_clusterclaims.crd.yaml"),
		filepath.Join(ocm, "cluster/v1alpha1/0000_05_clusters.open-cluster-management.io_addonplacementscores.crd.yaml"),
		filepath.Join(ocm, "cluster/v1beta1/0000_02_clusters.open-cluster-management.io_placements.crd.yaml"),
		filepath.Join(ocm, "cluster/v1beta1/0000_03_clusters.open-cluster-management.io_placementdecisions.crd.yaml"),
		filepath.Join(ocm, "cluster/v1beta2/0000_00_clusters.open-cluster-management.io_managedclustersets.crd.yaml"),
		filepath.Join(ocm, "cluster/v1beta2/0000_01_clusters.open-cluster-management.io_managedclustersetbindings.crd.yaml"),
		// The v1beta1 files serve v1alpha1 (storage) and v1beta1.
		filepath.Join(ocm, "addon/v1beta1/0000_00_addon.open-cluster-management.io_clustermanagementaddons.crd.yaml"),
		filepath.Join(ocm, "addon/v1beta1/0000_01_addon.open-cluster-management.io_managedclusteraddons.crd.yaml"),
		filepath.Join(ocm, "addon/v1beta1/0000_02_addon.open-cluster-management.io_addondeploymentconfigs.crd.yaml"),
		filepath.Join(ocm, "addon/v1alpha1/0000_03_addon.open-cluster-management.io_addontemplates.crd.yaml"),
		filepath.Join(ocm, "work/v1/0000_00_work.open-cluster-management.io_manifestworks.crd.yaml"),
		filepath.Join(argo, "manifests/crds/application-crd.yaml"),
		filepath.Join(argo, "manifests/crds/applicationset-crd.yaml"),
		filepath.Join(argo, "manifests/crds/appproject-crd.yaml"),
		filepath.Join(third, "apps.open-cluster-management.io_gitopsclusters.yaml"),
	}
	spoke := []string{
		filepath.Join(third, "kubevirt.io_virtualmachines.yaml"),
		filepath.Join(third, "kubevirt.io_virtualmachineinstances.yaml"),
		filepath.Join(third, "kubevirt.io_virtualmachineinstancemigrations.yaml"),
		filepath.Join(third, "export.kubevirt.io_virtualmachineexports.yaml"),
		filepath.Join(third, "cdi.kubevirt.io_datavolumes.yaml"),
		filepath.Join(third, "cdi.kubevirt.io_datasources.yaml"),
		filepath.Join(third, "cdi.kubevirt.io_dataimportcrons.yaml"),
		filepath.Join(third, "k8s.cni.cncf.io_network-attachment-definitions.yaml"),
		filepath.Join(ocm, "work/v1/0000_01_work.open-cluster-management.io_appliedmanifestworks.crd.yaml"),
		// What a cluster claims (its console URL): the klusterlet's
		// registration agent copies them into its ManagedCluster.
		filepath.Join(ocm, "cluster/v1alpha1/0000_02_clusters.open-cluster-management.io_clusterclaims.crd.yaml"),
	}
	return crdSet{hub: hub, spoke: spoke}, nil
}
