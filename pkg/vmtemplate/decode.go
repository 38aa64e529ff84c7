// Package vmtemplate decodes and checks the KubeVirt VirtualMachine carried by
// a FleetVirtualMachine's spec.template.
package vmtemplate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Decode decodes raw strictly into a kubevirt.io/v1 VirtualMachine: unknown
// fields, wrong types and a VM KubeVirt would refuse are errors naming the
// field path under path (spec.template). The VM is returned whenever it
// decoded, even with semantic errors.
func Decode(raw []byte, path *field.Path) (*kubevirtv1.VirtualMachine, field.ErrorList) {
	if len(raw) == 0 {
		return nil, field.ErrorList{field.Required(path, "a kubevirt.io/v1 VirtualMachine")}
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return nil, field.ErrorList{field.Invalid(path, "", "not valid JSON: "+err.Error())}
	}
	if errs := checkFields(path, generic, reflect.TypeFor[kubevirtv1.VirtualMachine]()); len(errs) > 0 {
		return nil, errs
	}
	vm := &kubevirtv1.VirtualMachine{}
	if err := json.Unmarshal(raw, vm); err != nil {
		return nil, field.ErrorList{field.Invalid(path, "", err.Error())}
	}
	return vm, Validate(vm, path)
}

// Validate checks the decoded VM for what KubeVirt's own admission would
// refuse and what FleetVM needs (a known memory size to place it).
func Validate(vm *kubevirtv1.VirtualMachine, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if vm.APIVersion != kubevirtv1.SchemeGroupVersion.String() {
		errs = append(errs, field.Invalid(path.Child("apiVersion"), vm.APIVersion, "must be kubevirt.io/v1"))
	}
	if vm.Kind != "VirtualMachine" {
		errs = append(errs, field.Invalid(path.Child("kind"), vm.Kind, "must be VirtualMachine"))
	}
	// The name and namespace land on every cluster: KubeVirt labels the
	// VM's pods with the name, so it must be a valid label value too.
	if vm.Name != "" {
		for _, msg := range validation.IsDNS1123Subdomain(vm.Name) {
			errs = append(errs, field.Invalid(path.Child("metadata", "name"), vm.Name, msg))
		}
		if len(vm.Name) > validation.DNS1123LabelMaxLength {
			errs = append(errs, field.TooLong(path.Child("metadata", "name"), vm.Name, validation.DNS1123LabelMaxLength))
		}
	}
	if vm.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(vm.Namespace) {
			errs = append(errs, field.Invalid(path.Child("metadata", "namespace"), vm.Namespace, msg))
		}
	}
	if vm.Spec.Template == nil {
		return append(errs, field.Required(path.Child("spec", "template"), "the VirtualMachineInstance template"))
	}
	specPath := path.Child("spec", "template", "spec")
	spec := &vm.Spec.Template.Spec
	domain := &spec.Domain

	if _, ok := Memory(vm); !ok {
		errs = append(errs, field.Required(specPath.Child("domain", "memory", "guest"),
			"the VM's memory: set domain.memory.guest or domain.resources.requests.memory"))
	}

	volumes := sets.New[string]()
	for i, v := range spec.Volumes {
		if volumes.Has(v.Name) {
			errs = append(errs, field.Duplicate(specPath.Child("volumes").Index(i).Child("name"), v.Name))
		}
		volumes.Insert(v.Name)
	}
	for i, d := range domain.Devices.Disks {
		if !volumes.Has(d.Name) {
			errs = append(errs, field.Invalid(specPath.Child("domain", "devices", "disks").Index(i).Child("name"), d.Name,
				"no volume of that name in spec.template.spec.volumes"))
		}
	}
	networks := sets.New[string]()
	for _, n := range spec.Networks {
		networks.Insert(n.Name)
	}
	for i, iface := range domain.Devices.Interfaces {
		if !networks.Has(iface.Name) {
			errs = append(errs, field.Invalid(specPath.Child("domain", "devices", "interfaces").Index(i).Child("name"), iface.Name,
				"no network of that name in spec.template.spec.networks"))
		}
	}
	dvts := sets.New[string]()
	for i, dv := range vm.Spec.DataVolumeTemplates {
		p := path.Child("spec", "dataVolumeTemplates").Index(i).Child("metadata", "name")
		switch {
		case dv.Name == "":
			errs = append(errs, field.Required(p, "every dataVolumeTemplate needs a name"))
		case dvts.Has(dv.Name):
			errs = append(errs, field.Duplicate(p, dv.Name))
		}
		dvts.Insert(dv.Name)
	}
	return errs
}

// Describe names a VM for messages: namespace/name or name.
func Describe(vm *kubevirtv1.VirtualMachine) string {
	if vm.Namespace == "" {
		return vm.Name
	}
	return fmt.Sprintf("%s/%s", vm.Namespace, vm.Name)
}
