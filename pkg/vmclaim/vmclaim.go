// Package vmclaim decides which FleetVirtualMachine owns a VM. A VM is
// known on every cluster by its name and namespace; two FleetVirtualMachines
// that deliver the same VM would have Argo CD fight over it, and deleting
// either would delete it. One FleetVirtualMachine per VM: the admission
// webhook refuses a second, and when two race past admission the
// controller lets exactly one deliver (Winner).
package vmclaim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/fieldindex"
)

// IndexVM indexes FleetVirtualMachines with an inline template by the VM
// they deliver ("namespace/name" of the VM on the clusters), those whose
// VM is of another name than theirs only: most VMs are of their
// FleetVirtualMachine's name, and ClaimantsOf reads that one by its name,
// so the index holds no set per FleetVirtualMachine.
const IndexVM = "fleetvm.io/vm"

// Identity is the name and namespace of the VM on every cluster: the
// template's name when set, else the FleetVirtualMachine's; always the
// FleetVirtualMachine's namespace (a FleetVirtualMachine delivers only into
// its own namespace; admission refuses a template that names another).
func Identity(fvm *fleetv1alpha1.FleetVirtualMachine) types.NamespacedName {
	id := types.NamespacedName{Namespace: fvm.Namespace, Name: fvm.Name}
	if fvm.Spec.Template == nil {
		return id
	}
	var t struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if json.Unmarshal(fvm.Spec.Template.Raw, &t) == nil && t.Metadata.Name != "" {
		id.Name = t.Metadata.Name
	}
	return id
}

// Key is the index value of a FleetVirtualMachine: its VM's
// "namespace/name". Git sources carry VMs the hub cannot see: they claim
// nothing.
func Key(fvm *fleetv1alpha1.FleetVirtualMachine) (string, bool) {
	if fvm.Spec.Template == nil {
		return "", false
	}
	return Identity(fvm).String(), true
}

// SetupIndex registers IndexVM, for Lists across namespaces (the value
// names the VM's namespace).
func SetupIndex(ctx context.Context, indexer client.FieldIndexer) error {
	err := fieldindex.Add(ctx, indexer, &fleetv1alpha1.FleetVirtualMachine{}, IndexVM, fieldindex.AllNamespaces, func(o client.Object) []string {
		if key, ok := Key(o.(*fleetv1alpha1.FleetVirtualMachine)); ok && key != client.ObjectKeyFromObject(o).String() {
			return []string{key}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("index %s: %w", IndexVM, err)
	}
	return nil
}

// Claimants lists the FleetVirtualMachines that deliver the VM fvm
// delivers, fvm included when the reader holds it. reader must index
// FleetVirtualMachines by IndexVM (a cache with SetupIndex).
func Claimants(ctx context.Context, reader client.Reader, fvm *fleetv1alpha1.FleetVirtualMachine) ([]fleetv1alpha1.FleetVirtualMachine, error) {
	key, ok := Key(fvm)
	if !ok {
		return nil, nil
	}
	return ClaimantsOf(ctx, reader, key)
}

// ClaimantsOf lists the FleetVirtualMachines that deliver the VM key
// ("namespace/name"): those IndexVM finds, and the one of the VM's name
// when it delivers that VM.
func ClaimantsOf(ctx context.Context, reader client.Reader, key string) ([]fleetv1alpha1.FleetVirtualMachine, error) {
	var list fleetv1alpha1.FleetVirtualMachineList
	if err := reader.List(ctx, &list, client.MatchingFields{IndexVM: key}); err != nil {
		return nil, fmt.Errorf("list FleetVirtualMachines delivering VM %s: %w", key, err)
	}
	ns, name, _ := strings.Cut(key, "/")
	named := &fleetv1alpha1.FleetVirtualMachine{}
	switch err := reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, named); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("read FleetVirtualMachine %s, which may deliver VM %s: %w", key, key, err)
	default:
		if k, ok := Key(named); ok && k == key {
			list.Items = append(list.Items, *named)
		}
	}
	return list.Items, nil
}

// Winner returns, of FleetVirtualMachines that claim one VM, the one that
// delivers it: the oldest (creation time, then namespace/name, so every
// reader agrees). A FleetVirtualMachine being deleted still holds its
// claim until it is gone: its VM is being removed or left running.
func Winner(claimants []fleetv1alpha1.FleetVirtualMachine) *fleetv1alpha1.FleetVirtualMachine {
	var best *fleetv1alpha1.FleetVirtualMachine
	for i := range claimants {
		c := &claimants[i]
		if best == nil || older(c, best) {
			best = c
		}
	}
	return best
}

func older(a, b *fleetv1alpha1.FleetVirtualMachine) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return strings.Compare(a.Name, b.Name) < 0
}
