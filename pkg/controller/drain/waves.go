// Package drain empties a cluster marked for maintenance: for every
// ManagedCluster with the fleetvm.io/drain taint it moves each
// FleetVirtualMachine copy off the cluster with a FleetVirtualMachineMove,
// a few at a time.
package drain

import (
	"cmp"
	"slices"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// Limits bound how many moves off one cluster run at once. The defaults
// are KubeVirt's own for migrations: 5 per cluster
// (parallelMigrationsPerCluster) and 2 leaving one node
// (parallelOutboundMigrationsPerNode).
type Limits struct {
	PerCluster int
	PerNode    int
}

// DefaultLimits are KubeVirt's migration defaults.
var DefaultLimits = Limits{PerCluster: 5, PerNode: 2}

// Copy is one FleetVirtualMachine copy on the draining cluster.
type Copy struct {
	Namespace string
	FleetVM   string
	// Node is the node the VM runs on ("" unknown: counted as a node of its
	// own).
	Node string
}

func (c Copy) key() string { return c.Namespace + "/" + c.FleetVM }

func compareCopies(a, b Copy) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.FleetVM, b.FleetVM))
}

// Next returns the copies of waiting to start moving now, in order,
// given the moves running (active): as many as the limits leave room
// for.
func Next(waiting, active []Copy, l Limits) []Copy {
	perNode := map[string]int{}
	for _, c := range active {
		perNode[c.Node]++
	}
	room := l.PerCluster - len(active)
	sorted := slices.Clone(waiting)
	slices.SortFunc(sorted, compareCopies)
	var out []Copy
	for _, c := range sorted {
		if room <= 0 {
			break
		}
		if c.Node != "" && perNode[c.Node] >= l.PerNode {
			continue
		}
		perNode[c.Node]++
		room--
		out = append(out, c)
	}
	return out
}

// Waves plans a whole drain as if each wave ended before the next
// started: what kubectl fleetvm drain --dry-run prints. The controller
// starts a move as soon as one ends, so a real drain is never slower.
func Waves(copies []Copy, l Limits) [][]Copy {
	left := slices.Clone(copies)
	var waves [][]Copy
	for len(left) > 0 {
		wave := Next(left, nil, l)
		if len(wave) == 0 {
			break // limits of zero: nothing would ever start
		}
		waves = append(waves, wave)
		started := map[string]bool{}
		for _, c := range wave {
			started[c.key()] = true
		}
		left = slices.DeleteFunc(left, func(c Copy) bool { return started[c.key()] })
	}
	return waves
}

// CopiesOn lists the copies of fvms placed on cluster: those FleetVM
// records there that are not already leaving or being removed.
func CopiesOn(fvms []fleetv1alpha1.FleetVirtualMachine, cluster string) []Copy {
	var out []Copy
	for i := range fvms {
		f := &fvms[i]
		for _, c := range f.Status.Clusters {
			if c.Cluster != cluster || c.LeavingSince != nil || c.RemovingSince != nil {
				continue
			}
			out = append(out, Copy{Namespace: f.Namespace, FleetVM: f.Name, Node: c.Node})
		}
	}
	slices.SortFunc(out, compareCopies)
	return out
}
