package simulator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	kubevirtv1 "kubevirt.io/api/core/v1"
	exportv1beta1 "kubevirt.io/api/export/v1beta1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// SetupWithManager registers the simulator with a manager of the spoke.
func (s *Simulator) SetupWithManager(mgr ctrl.Manager) error {
	if err := s.discoverStatusSubresources(mgr); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("kubevirt-simulator").
		For(&kubevirtv1.VirtualMachine{}).
		Owns(&kubevirtv1.VirtualMachineInstance{}).
		Owns(&cdiv1beta1.DataVolume{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(s.podToVMs)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(s.unschedulableVMs)).
		Watches(&cdiv1beta1.DataSource{}, handler.EnqueueRequestsFromMapFunc(s.waitingVMs))
	// On a cluster with Multus, a network that appears lets VMs waiting
	// for it start.
	nad := &metav1.PartialObjectMetadata{}
	nad.SetGroupVersionKind(schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"})
	if _, err := mgr.GetRESTMapper().RESTMapping(nad.GroupVersionKind().GroupKind(), "v1"); err == nil {
		b = b.Watches(nad, handler.EnqueueRequestsFromMapFunc(s.notStartedVMs))
	}
	err := b.Complete(s)
	if err != nil {
		return fmt.Errorf("set up KubeVirt simulator: %w", err)
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("cdi-simulator-datavolume").
		For(&cdiv1beta1.DataVolume{}).
		Owns(&corev1.PersistentVolumeClaim{}).
		Watches(&cdiv1beta1.DataSource{}, handler.EnqueueRequestsFromMapFunc(s.dataVolumesFrom)).
		// A VM asked to start, or a pod, may be the first consumer a
		// DataVolume waits for.
		Watches(&kubevirtv1.VirtualMachine{}, handler.EnqueueRequestsFromMapFunc(s.dataVolumesConsumedBy)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(s.dataVolumesConsumedBy)).
		Complete(dataVolumeReconciler{s})
	if err != nil {
		return fmt.Errorf("set up CDI DataVolume simulator: %w", err)
	}
	if err := s.setupMoves(mgr); err != nil {
		return err
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("cdi-simulator-datasource").
		For(&cdiv1beta1.DataSource{}).
		Watches(&cdiv1beta1.DataVolume{}, handler.EnqueueRequestsFromMapFunc(s.dataSourcesOf)).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(s.dataSourcesOf)).
		Complete(dataSourceReconciler{s})
	if err != nil {
		return fmt.Errorf("set up CDI DataSource simulator: %w", err)
	}
	return nil
}

// setupMoves registers what plays moving VMs between clusters:
// VirtualMachineExports and decentralized migrations. Each runs where the
// spoke serves its kind and the manager's scheme knows it (the test
// fleets install both CRDs; fleetvm-agent's scheme has no exports, which
// Peers.RunBeside adds).
func (s *Simulator) setupMoves(mgr ctrl.Manager) error {
	serves := func(gvk schema.GroupVersionKind) bool {
		if !mgr.GetScheme().Recognizes(gvk) {
			return false
		}
		_, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		return err == nil
	}
	if serves(exportv1beta1.SchemeGroupVersion.WithKind("VirtualMachineExport")) {
		err := ctrl.NewControllerManagedBy(mgr).
			Named("kubevirt-simulator-export").
			For(&exportv1beta1.VirtualMachineExport{}).
			Watches(&kubevirtv1.VirtualMachine{}, handler.EnqueueRequestsFromMapFunc(s.exportsIn)).
			Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(s.exportsIn)).
			Watches(&cdiv1beta1.DataVolume{}, handler.EnqueueRequestsFromMapFunc(s.exportsIn)).
			Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(s.exportsIn)).
			Complete(exportReconciler{s})
		if err != nil {
			return fmt.Errorf("set up KubeVirt export simulator: %w", err)
		}
	}
	if serves(kubevirtv1.VirtualMachineInstanceMigrationGroupVersionKind) {
		err := ctrl.NewControllerManagedBy(mgr).
			Named("kubevirt-simulator-migration").
			For(&kubevirtv1.VirtualMachineInstanceMigration{}).
			Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(s.migrationsOf)).
			Complete(migrationReconciler{s})
		if err != nil {
			return fmt.Errorf("set up KubeVirt migration simulator: %w", err)
		}
	}
	return nil
}

// discoverStatusSubresources asks the API server which of the resources
// the simulator writes have a status subresource.
func (s *Simulator) discoverStatusSubresources(mgr ctrl.Manager) error {
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	for _, gv := range []string{kubevirtv1.SchemeGroupVersion.String(), cdiv1beta1.SchemeGroupVersion.String(), exportv1beta1.SchemeGroupVersion.String()} {
		list, err := dc.ServerResourcesForGroupVersion(gv)
		if err != nil {
			if apierrors.IsNotFound(err) && gv == exportv1beta1.SchemeGroupVersion.String() {
				continue // no exports on this spoke
			}
			return fmt.Errorf("discover %s: %w", gv, err)
		}
		names := map[string]bool{}
		for _, r := range list.APIResources {
			names[r.Name] = true
		}
		s.mu.Lock()
		for _, r := range []string{"virtualmachines", "virtualmachineinstances", "virtualmachineinstancemigrations", "datavolumes", "datasources", "virtualmachineexports"} {
			if names[r] {
				s.statusSubresource[r] = names[r+"/status"]
			}
		}
		s.mu.Unlock()
	}
	return nil
}

// podToVMs maps a pod to its VM and, since it may have freed room, to
// the VMs waiting for a node.
func (s *Simulator) podToVMs(ctx context.Context, o client.Object) []reconcile.Request {
	out := s.unschedulableVMs(ctx, o)
	if name := o.GetLabels()[LabelVMName]; name != "" {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}})
	}
	return out
}

func (s *Simulator) unschedulableVMs(ctx context.Context, _ client.Object) []reconcile.Request {
	return s.vmsWith(ctx, func(vm *kubevirtv1.VirtualMachine) bool {
		return vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusUnschedulable
	})
}

func (s *Simulator) notStartedVMs(ctx context.Context, _ client.Object) []reconcile.Request {
	return s.vmsWith(ctx, func(vm *kubevirtv1.VirtualMachine) bool {
		return !vm.Status.Created
	})
}

func (s *Simulator) waitingVMs(ctx context.Context, _ client.Object) []reconcile.Request {
	return s.vmsWith(ctx, func(vm *kubevirtv1.VirtualMachine) bool {
		return len(vm.Spec.DataVolumeTemplates) > 0
	})
}

func (s *Simulator) vmsWith(ctx context.Context, keep func(*kubevirtv1.VirtualMachine) bool) []reconcile.Request {
	var vms kubevirtv1.VirtualMachineList
	if err := s.client.List(ctx, &vms); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list VirtualMachines")
		return nil
	}
	var out []reconcile.Request
	for i := range vms.Items {
		if keep(&vms.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&vms.Items[i])})
		}
	}
	return out
}

// RunBeside returns what fleetvm-agent's Options.AlsoRun takes: the
// simulator on the agent's spoke manager, stepping every stepDelay.
func RunBeside(stepDelay time.Duration) func(ctrl.Manager) error {
	return func(mgr ctrl.Manager) error {
		return New(Options{Client: mgr.GetClient(), StepDelay: stepDelay}).SetupWithManager(mgr)
	}
}
