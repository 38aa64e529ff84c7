package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// dumpedKinds are the kinds the hub caches one or more of per FleetVM or
// per cluster, as cacheDump writes them: the file name and the List.
var dumpedKinds = []struct {
	file string
	list schema.GroupVersionKind
}{
	{"fleetvirtualmachines", schema.GroupVersionKind{Group: "fleetvm.io", Version: "v1alpha1", Kind: "FleetVirtualMachineList"}},
	{"vmreports", schema.GroupVersionKind{Group: "fleetvm.io", Version: "v1alpha1", Kind: "VMReportList"}},
	{"applications", schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "ApplicationList"}},
	{"applicationsets", schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "ApplicationSetList"}},
	{"placementdecisions", schema.GroupVersionKind{Group: "cluster.open-cluster-management.io", Version: "v1beta1", Kind: "PlacementDecisionList"}},
	{"managedclusters", schema.GroupVersionKind{Group: "cluster.open-cluster-management.io", Version: "v1", Kind: "ManagedClusterList"}},
	{"addonplacementscores", schema.GroupVersionKind{Group: "cluster.open-cluster-management.io", Version: "v1alpha1", Kind: "AddOnPlacementScoreList"}},
	{"manifestworks", schema.GroupVersionKind{Group: "work.open-cluster-management.io", Version: "v1", Kind: "ManifestWorkList"}},
}

// cacheDump writes, once the burst converged, every object of the kinds
// the hub holds per FleetVM or per cluster into cfg.CacheDump, a JSON List
// per kind as the API server lists them: hack/cachesize reads them to
// measure what the hub's cache holds per object.
func (h *harness) cacheDump(ctx context.Context) error {
	if err := os.MkdirAll(h.cfg.CacheDump, 0o755); err != nil {
		return err
	}
	for _, k := range dumpedKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(k.list)
		if err := h.admin.List(ctx, list); err != nil {
			return fmt.Errorf("list %s: %w", k.file, err)
		}
		data, err := json.Marshal(list)
		if err != nil {
			return fmt.Errorf("encode %s: %w", k.file, err)
		}
		if err := os.WriteFile(filepath.Join(h.cfg.CacheDump, k.file+".json"), data, 0o644); err != nil {
			return err
		}
		h.logf("cache dump: %d %s", len(list.Items), k.file)
	}
	return nil
}
