package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// TestMeasureSeesTheHubsTransform: FleetVMs whose managed fields are 2 KiB
// each measure at least 1.5 KiB less through the hub's cache transform,
// which drops them, than kept whole; a List file reads as its kind.
func TestMeasureSeesTheHubsTransform(t *testing.T) {
	fields := metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:x":"` + strings.Repeat("y", 2048) + `"}}`)}
	var items []json.RawMessage
	for i := range 2000 {
		fvm := &fleetv1alpha1.FleetVirtualMachine{
			TypeMeta: metav1.TypeMeta{APIVersion: fleetv1alpha1.GroupVersion.String(), Kind: "FleetVirtualMachine"},
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("vm-%04d", i), Namespace: "bench",
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: &fields}},
			},
		}
		raw, err := json.Marshal(fvm)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, raw)
	}
	hub, err := measure(items, nil)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := measure(items, func(o any) (any, error) { return o, nil })
	if err != nil {
		t.Fatal(err)
	}
	if hub.Kind != "FleetVirtualMachine" || hub.Objects != len(items) || hub.PerObject <= 0 || whole.PerObject-hub.PerObject < 1536 {
		t.Errorf("through the hub's transform %+v, kept whole %+v: want the kind, %d objects, and 1.5 KiB less each", hub, whole, len(items))
	}

	list, err := json.Marshal(map[string]any{"apiVersion": "fleetvm.io/v1alpha1", "kind": "FleetVirtualMachineList", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "fleetvirtualmachines.json")
	if err := os.WriteFile(path, list, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := measureFile(path)
	if err != nil || got.Kind != "FleetVirtualMachine" || got.Objects != len(items) || got.JSON < 2048 {
		t.Errorf("measureFile = %+v, %v; want %d FleetVirtualMachines of over 2 KiB of JSON each", got, err, len(items))
	}
}
