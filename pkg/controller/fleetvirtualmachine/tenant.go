package fleetvirtualmachine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/status"
	"github.com/fleetvm/fleetvm/pkg/diskimage"
	"github.com/fleetvm/fleetvm/pkg/tenancy"
)

// +kubebuilder:rbac:groups=argoproj.io,namespace=argocd,resources=appprojects,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=work.open-cluster-management.io,resources=manifestworks,verbs=get;list;watch;create;update;patch;delete

// deliveryProject returns the Argo CD AppProject the FleetVirtualMachine's
// Applications run under, making the namespace's own project (see package
// tenancy) when that is the one: spec.delivery.project empty, or naming
// it. Another project must serve the namespace (list it in
// spec.sourceNamespaces): Argo CD lets an Application in its own namespace
// name any project, so FleetVM checks instead.
func (r *Reconciler) deliveryProject(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) (string, error) {
	name := tenancy.ProjectFor(fvm.Namespace, fvm.Spec.Delivery.Project)
	if name == tenancy.ProjectName(fvm.Namespace) {
		return name, r.ensureTenantProject(ctx, fvm.Namespace)
	}
	p := tenancy.NewAppProject()
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Config.ArgoNamespace, Name: name}, p); {
	case apierrors.IsNotFound(err):
		return "", status.Forbidden("spec.delivery.project: AppProject %s does not exist in %s", name, r.Config.ArgoNamespace)
	case err != nil:
		return "", fmt.Errorf("get AppProject %s/%s: %w", r.Config.ArgoNamespace, name, err)
	}
	if !tenancy.ServesNamespace(p, fvm.Namespace) {
		return "", status.Forbidden("spec.delivery.project: AppProject %s does not serve namespace %s (its spec.sourceNamespaces does not list it); leave the field empty for the namespace's own project", name, fvm.Namespace)
	}
	return name, nil
}

// ensureTenantProject creates or updates the namespace's own AppProject.
// A project of that name that FleetVM did not make is left alone.
func (r *Reconciler) ensureTenantProject(ctx context.Context, namespace string) error {
	labels := delivery.ManagedLabels()
	labels[tenancy.LabelNamespace] = namespace
	want := tenancy.Project(r.Config.ArgoNamespace, namespace, r.Config.TenantKinds, labels)
	got := tenancy.NewAppProject()
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), got)
	switch {
	case apierrors.IsNotFound(err):
		got = nil
	case err != nil:
		return fmt.Errorf("get AppProject %s: %w", klog.KObj(want), err)
	case got.GetLabels()[tenancy.LabelNamespace] != namespace:
		return status.Forbidden("AppProject %s exists and was not made by FleetVM for namespace %s: FleetVM leaves it alone", klog.KObj(got), namespace)
	}
	if _, err := r.written.Ensure(ctx, r.Client, want, got); err != nil {
		return fmt.Errorf("write AppProject %s: %w", klog.KObj(want), err)
	}
	return nil
}

// namespaceWorkName is the ManifestWork that makes a namespace's
// FleetVMs' namespace and its ServiceAccount on a cluster.
func namespaceWorkName(namespace string) string {
	return "fleetvm-namespace-" + namespace
}

// ensureNamespaces makes, on each cluster the FleetVirtualMachine is
// delivered to, through one OCM ManifestWork per namespace in the
// cluster's namespace: the FleetVirtualMachine's namespace (unless every
// FleetVirtualMachine of the namespace says spec.delivery.createNamespace
// false), and the namespace's ServiceAccount with its Role and
// RoleBinding (tenancy.ClusterObjects), which Argo CD syncs as when sync
// impersonation is on. Removing the work leaves the namespaces (VMs live
// there) and removes the rest. Argo CD's CreateNamespace would need the
// project to allow the cluster-scoped Namespace kind, and a git repository
// could then change any namespace (kube-system's pod security labels among
// them).
//
// The work depends only on the namespace's FleetVirtualMachines and
// FleetDiskImages, never on which FleetVirtualMachine writes it, so the
// FleetVirtualMachines of a namespace agree on it.
func (r *Reconciler) ensureNamespaces(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, clusters []string) error {
	if len(clusters) == 0 {
		return nil
	}
	manifests, err := r.tenantManifests(ctx, fvm)
	if err != nil {
		return err
	}
	labels := delivery.ManagedLabels()
	labels[tenancy.LabelNamespace] = fvm.Namespace
	orphan := []workv1.OrphaningRule{{Resource: "namespaces", Name: fvm.Namespace}}
	if r.Config.ImageNamespace != "" {
		orphan = append(orphan, workv1.OrphaningRule{Resource: "namespaces", Name: r.Config.ImageNamespace})
	}
	var errs []error
	for _, cluster := range clusters {
		want := &workv1.ManifestWork{
			ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: namespaceWorkName(fvm.Namespace), Labels: labels},
			Spec: workv1.ManifestWorkSpec{
				Workload: workv1.ManifestsTemplate{Manifests: manifests},
				DeleteOption: &workv1.DeleteOption{
					PropagationPolicy: workv1.DeletePropagationPolicyTypeSelectivelyOrphan,
					SelectivelyOrphan: &workv1.SelectivelyOrphan{OrphaningRules: orphan},
				},
			},
		}
		got := &workv1.ManifestWork{}
		switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), got); {
		case apierrors.IsNotFound(err):
			got = nil
		case err != nil:
			errs = append(errs, fmt.Errorf("get ManifestWork %s: %w", klog.KObj(want), err))
			continue
		case got.GetLabels()[tenancy.LabelNamespace] != fvm.Namespace:
			errs = append(errs, fmt.Errorf("ManifestWork %s exists and was not made by FleetVM for namespace %s: FleetVM leaves it alone", klog.KObj(got), fvm.Namespace))
			continue
		}
		if _, err := r.written.Ensure(ctx, r.Client, want, got); err != nil {
			errs = append(errs, fmt.Errorf("write ManifestWork %s: %w", klog.KObj(want), err))
		}
	}
	return errors.Join(errs...)
}

// tenantManifests are the namespace work's manifests: the namespace when
// a FleetVirtualMachine of it asks for it, the image namespace when the
// namespace has disk images (the image Role lives there; the image works
// make it too, with the same content), and tenancy.ClusterObjects with the
// namespace's FleetDiskImages.
//
// Every reconcile of every FleetVirtualMachine delivering somewhere asks
// this: the namespace's FleetVirtualMachines are read only when fvm itself
// does not ask for the namespace, and never copied.
func (r *Reconciler) tenantManifests(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) ([]workv1.Manifest, error) {
	namespace := fvm.Namespace
	wantsNamespace := func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		d := f.Spec.Delivery.CreateNamespace
		return d == nil || *d
	}
	createNamespace := wantsNamespace(fvm)
	if !createNamespace {
		var fvms fleetv1alpha1.FleetVirtualMachineList
		if err := r.Client.List(ctx, &fvms, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list FleetVirtualMachines of namespace %s: %w", namespace, err)
		}
		for i := range fvms.Items {
			createNamespace = createNamespace || wantsNamespace(&fvms.Items[i])
		}
	}
	var images fleetv1alpha1.FleetDiskImageList
	if err := r.Client.List(ctx, &images, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list FleetDiskImages of namespace %s: %w", namespace, err)
	}
	var objs []runtime.Object
	if createNamespace {
		objs = append(objs, &corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": fleetv1alpha1.PartOfValue}},
		})
	}
	names := make([]string, 0, len(images.Items))
	for _, fdi := range images.Items {
		names = append(names, diskimage.ObjectName(client.ObjectKeyFromObject(&fdi)))
	}
	if len(names) > 0 && r.Config.ImageNamespace != "" {
		// As the image works write it (fleetdiskimage.desiredWork).
		objs = append(objs, &corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: r.Config.ImageNamespace, Labels: delivery.ManagedLabels()},
		})
	}
	for _, o := range tenancy.ClusterObjects(namespace, r.Config.ImageNamespace, r.Config.TenantKinds, names) {
		objs = append(objs, o)
	}
	manifests := make([]workv1.Manifest, 0, len(objs))
	for _, o := range objs {
		raw, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		manifests = append(manifests, workv1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
	}
	return manifests, nil
}

// cleanupTenant removes the namespace's own AppProject and its namespace
// ManifestWorks (the namespaces stay on the clusters, the ServiceAccount
// and its rights go) once no
// FleetVirtualMachine of the namespace but the one of UID self is left,
// being deleted or not, and no Argo CD Application runs under the project
// any more: Argo CD cannot delete an Application whose project is gone,
// so the VMs it delivers would never be removed. requeue says it waits
// for Applications.
func (r *Reconciler) cleanupTenant(ctx context.Context, namespace string, self types.UID) (requeue bool, err error) {
	// Two at most, not copied: one that is not self is enough to stay, and
	// a namespace of 5,000 deleted at once would otherwise copy every
	// FleetVirtualMachine of it once per deletion.
	var others fleetv1alpha1.FleetVirtualMachineList
	if err := r.Client.List(ctx, &others, client.InNamespace(namespace), client.Limit(2), client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("list FleetVirtualMachines of namespace %s: %w", namespace, err)
	}
	if slices.ContainsFunc(others.Items, func(o fleetv1alpha1.FleetVirtualMachine) bool { return o.UID != self }) {
		return false, nil
	}
	project := tenancy.ProjectName(namespace)
	var apps argoapp.ApplicationList
	if err := r.Client.List(ctx, &apps, client.InNamespace(r.Config.ArgoNamespace), client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("list Applications: %w", err)
	}
	if slices.ContainsFunc(apps.Items, func(a argoapp.Application) bool { return a.Spec.Project == project }) {
		return true, nil
	}
	var errs []error
	p := tenancy.NewAppProject()
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: r.Config.ArgoNamespace, Name: project}, p)
	switch {
	case err == nil && p.GetLabels()[tenancy.LabelNamespace] == namespace:
		if err := r.deletions.Delete(ctx, r.Client, p); err != nil {
			errs = append(errs, fmt.Errorf("delete AppProject %s: %w", klog.KObj(p), err))
		}
	case err != nil && !apierrors.IsNotFound(err):
		errs = append(errs, err)
	}
	var works workv1.ManifestWorkList
	if err := r.Client.List(ctx, &works, client.MatchingLabels{tenancy.LabelNamespace: namespace}); err != nil {
		return false, errors.Join(append(errs, err)...)
	}
	for i := range works.Items {
		w := &works.Items[i]
		if w.Name != namespaceWorkName(namespace) {
			continue
		}
		if err := r.deletions.Delete(ctx, r.Client, w); err != nil {
			errs = append(errs, fmt.Errorf("delete ManifestWork %s: %w", klog.KObj(w), err))
		}
	}
	return false, errors.Join(errs...)
}
