package localfleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/yaml"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// Ready tells whether the FleetVirtualMachine's status describes its
// current spec and its Ready condition is True.
func Ready(fvm *fleetv1alpha1.FleetVirtualMachine) bool {
	c := meta.FindStatusCondition(fvm.Status.Conditions, fleetv1alpha1.ConditionReady)
	return fvm.Status.ObservedGeneration == fvm.Generation && c != nil &&
		c.ObservedGeneration == fvm.Generation && c.Status == "True"
}

// StatusTable renders FleetVirtualMachines as a table: one line per
// FleetVirtualMachine and cluster.
func StatusTable(fvms []fleetv1alpha1.FleetVirtualMachine) string {
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "FLEETVM\tREADY\tCLUSTER\tENV\tPHASE\tVM\tNODE\tIP\tARGO CD")
	for i := range fvms {
		fvm := &fvms[i]
		name := fvm.Namespace + "/" + fvm.Name
		status := "-"
		if c := meta.FindStatusCondition(fvm.Status.Conditions, fleetv1alpha1.ConditionReady); c != nil {
			status = c.Reason
		}
		summary := fmt.Sprintf("%d/%d %s", fvm.Status.Summary.Ready, fvm.Status.Summary.Desired, status)
		if len(fvm.Status.Clusters) == 0 {
			placed := "waiting for placement"
			if c := meta.FindStatusCondition(fvm.Status.Conditions, fleetv1alpha1.ConditionPlaced); c != nil {
				placed = c.Reason
			}
			_, _ = fmt.Fprintf(w, "%s\t%s\t-\t-\t%s\t-\t-\t-\t-\n", name, summary, placed)
			continue
		}
		for j, c := range fvm.Status.Clusters {
			if j > 0 {
				name, summary = "", ""
			}
			argo := "-"
			if c.SyncStatus != "" || c.Health != "" {
				argo = orDash(c.SyncStatus) + "/" + orDash(c.Health)
			}
			ips := strings.Join(c.IPAddresses, ",")
			_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, summary, c.Cluster, orDash(c.Environment),
				c.Phase, orDash(c.PrintableStatus), orDash(c.Node), orDash(ips), argo)
		}
	}
	_ = w.Flush()
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// LoadExamples reads every FleetVirtualMachine in the YAML files of dir
// (not its sub-folders), sorted by file name.
func LoadExamples(dir string) ([]*fleetv1alpha1.FleetVirtualMachine, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []*fleetv1alpha1.FleetVirtualMachine
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			fvm := &fleetv1alpha1.FleetVirtualMachine{}
			if err := dec.Decode(fvm); err != nil {
				_ = f.Close()
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			if fvm.Kind == "" {
				continue // an empty document
			}
			if fvm.Kind != "FleetVirtualMachine" {
				_ = f.Close()
				return nil, fmt.Errorf("%s: a %s, want only FleetVirtualMachines", file, fvm.Kind)
			}
			out = append(out, fvm)
		}
	}
	return out, nil
}

// Apply creates the FleetVirtualMachines on the hub, and their namespaces
// with the default cluster set bound to them, as an operator does for a
// team.
func (f *Fleet) Apply(ctx context.Context, fvms []*fleetv1alpha1.FleetVirtualMachine) error {
	for _, fvm := range fvms {
		if err := f.Hub.Tenant(ctx, fvm.Namespace); err != nil {
			return err
		}
		if err := f.Hub.Client.Create(ctx, fvm.DeepCopy()); err != nil {
			return fmt.Errorf("create FleetVirtualMachine %s/%s: %w", fvm.Namespace, fvm.Name, err)
		}
	}
	return nil
}

// List returns the hub's FleetVirtualMachines, sorted by namespace and name.
func (f *Fleet) List(ctx context.Context) ([]fleetv1alpha1.FleetVirtualMachine, error) {
	var list fleetv1alpha1.FleetVirtualMachineList
	if err := f.Hub.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b fleetv1alpha1.FleetVirtualMachine) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return list.Items, nil
}
