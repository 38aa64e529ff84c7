// Package agenttest holds object builders and test helpers shared by the
// agent's and the KubeVirt simulator's tests. It needs no test
// environment: unit tests that import it compile no API server.
package agenttest

import (
	"context"
	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"io"
	"os"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	exportv1beta1 "kubevirt.io/api/export/v1beta1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/hub"
)

// APIScheme has the kinds of fleetvm-hub's scheme with Argo CD's own
// types for Argo CD's kinds (hub.Scheme has the hub's view of them,
// package argoapp): for the tests and simulators that write them as Argo
// CD or a person does.
func APIScheme() *runtime.Scheme {
	return hub.SchemeWith(argov1alpha1.AddToScheme)
}

// Scheme knows every type a test fleet holds: APIScheme's, plus the ones
// only tests and spokes use: apiextensions, OCM addons, KubeVirt (with its
// exports) and CDI. It is fleetenv's scheme too, defined here so that
// unit tests need no test environment.
func Scheme() *runtime.Scheme {
	s := APIScheme()
	for _, add := range []func(*runtime.Scheme) error{
		apiextensionsv1.AddToScheme,
		addonv1alpha1.Install,
		kubevirtv1.AddToScheme,
		exportv1beta1.AddToScheme,
		cdiv1beta1.AddToScheme,
	} {
		utilruntime.Must(add(s))
	}
	return s
}

// Logger discards logs unless FLEETENV_VERBOSE is set.
func Logger() logr.Logger {
	if os.Getenv("FLEETENV_VERBOSE") != "" {
		return zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true))
	}
	return zap.New(zap.WriteTo(io.Discard), zap.UseDevMode(true))
}

// VMOption changes a VM under construction.
type VMOption func(*kubevirtv1.VirtualMachine)

// VM builds a kubevirt.io/v1 VirtualMachine asking for 1 CPU and 1Gi,
// runStrategy Always.
func VM(namespace, name string, opts ...VMOption) *kubevirtv1.VirtualMachine {
	vm := &kubevirtv1.VirtualMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways),
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
					Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
					}},
				}},
			},
		},
	}
	for _, o := range opts {
		o(vm)
	}
	return vm
}

// Resources sets the VM's CPU and memory requests.
func Resources(cpu, memory string) VMOption {
	return func(vm *kubevirtv1.VirtualMachine) {
		vm.Spec.Template.Spec.Domain.Resources.Requests = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
		}
	}
}

// Multus attaches the VM to a Multus network (a NetworkAttachmentDefinition,
// "name" or "namespace/name") by bridge.
func Multus(name, networkName string) VMOption {
	return func(vm *kubevirtv1.VirtualMachine) {
		spec := &vm.Spec.Template.Spec
		spec.Domain.Devices.Interfaces = append(spec.Domain.Devices.Interfaces, kubevirtv1.Interface{
			Name: name, InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}},
		})
		spec.Networks = append(spec.Networks, kubevirtv1.Network{
			Name: name, NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: networkName}},
		})
	}
}

// RunStrategy sets spec.runStrategy.
func RunStrategy(s kubevirtv1.VirtualMachineRunStrategy) VMOption {
	return func(vm *kubevirtv1.VirtualMachine) { vm.Spec.RunStrategy = ptr.To(s) }
}

// Running sets the legacy spec.running and clears runStrategy.
func Running(running bool) VMOption {
	return func(vm *kubevirtv1.VirtualMachine) {
		vm.Spec.RunStrategy = nil
		vm.Spec.Running = ptr.To(running)
	}
}

// FleetVM labels the VM as managed by a FleetVirtualMachine.
func FleetVM(namespace, name string) VMOption {
	return func(vm *kubevirtv1.VirtualMachine) {
		if vm.Labels == nil {
			vm.Labels = map[string]string{}
		}
		vm.Labels[fleetv1alpha1.LabelFleetVMNamespace] = namespace
		vm.Labels[fleetv1alpha1.LabelFleetVMName] = name
	}
}

func addVolume(vm *kubevirtv1.VirtualMachine, v kubevirtv1.Volume) {
	vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, v)
	vm.Spec.Template.Spec.Domain.Devices.Disks = append(vm.Spec.Template.Spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: v.Name})
}

// DataVolumeTemplate adds a dataVolumeTemplate and a volume using it.
func DataVolumeTemplate(name string, spec cdiv1beta1.DataVolumeSpec) VMOption {
	return func(vm *kubevirtv1.VirtualMachine) {
		if spec.Storage == nil && spec.PVC == nil {
			spec.Storage = &cdiv1beta1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			}}
		}
		vm.Spec.DataVolumeTemplates = append(vm.Spec.DataVolumeTemplates, kubevirtv1.DataVolumeTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec,
		})
		addVolume(vm, kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{
			DataVolume: &kubevirtv1.DataVolumeSource{Name: name},
		}})
	}
}

// HTTPSource is a DataVolume spec importing from url.
func HTTPSource(url string) cdiv1beta1.DataVolumeSpec {
	return cdiv1beta1.DataVolumeSpec{Source: &cdiv1beta1.DataVolumeSource{HTTP: &cdiv1beta1.DataVolumeSourceHTTP{URL: url}}}
}

// DataSourceRef is a DataVolume spec cloning the DataSource namespace/name
// (namespace "" defaults to the DataVolume's).
func DataSourceRef(namespace, name string) cdiv1beta1.DataVolumeSpec {
	ref := &cdiv1beta1.DataVolumeSourceRef{Kind: cdiv1beta1.DataVolumeDataSource, Name: name}
	if namespace != "" {
		ref.Namespace = ptr.To(namespace)
	}
	return cdiv1beta1.DataVolumeSpec{SourceRef: ref}
}

// ContainerDisk adds a containerDisk volume.
func ContainerDisk(volume, image string) VMOption {
	return func(vm *kubevirtv1.VirtualMachine) {
		addVolume(vm, kubevirtv1.Volume{Name: volume, VolumeSource: kubevirtv1.VolumeSource{
			ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: image},
		}})
	}
}

// PVC adds a persistentVolumeClaim volume.
func PVC(volume, claim string) VMOption {
	return func(vm *kubevirtv1.VirtualMachine) {
		addVolume(vm, kubevirtv1.Volume{Name: volume, VolumeSource: kubevirtv1.VolumeSource{
			PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			},
		}})
	}
}

// DataVolume adds a dataVolume volume naming a DataVolume that is not one
// of the VM's templates.
func DataVolume(volume, dv string) VMOption {
	return func(vm *kubevirtv1.VirtualMachine) {
		addVolume(vm, kubevirtv1.Volume{Name: volume, VolumeSource: kubevirtv1.VolumeSource{
			DataVolume: &kubevirtv1.DataVolumeSource{Name: dv},
		}})
	}
}

// ReadyDataSource builds a DataSource with condition Ready=True.
func ReadyDataSource(namespace, name string) *cdiv1beta1.DataSource {
	return &cdiv1beta1.DataSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: cdiv1beta1.DataSourceSpec{Source: cdiv1beta1.DataSourceSource{
			PVC: &cdiv1beta1.DataVolumeSourcePVC{Namespace: namespace, Name: name},
		}},
		Status: cdiv1beta1.DataSourceStatus{Conditions: []cdiv1beta1.DataSourceCondition{{
			Type: cdiv1beta1.DataSourceReady, ConditionState: cdiv1beta1.ConditionState{Status: corev1.ConditionTrue, Reason: "Ready"},
		}}},
	}
}

// StartManager starts a controller-runtime manager on cfg with the
// controllers setup registers, and stops it when the test ends.
func StartManager(t testing.TB, cfg *rest.Config, setup func(ctrl.Manager) error) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 Scheme(),
		Logger:                 Logger(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}
