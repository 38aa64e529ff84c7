package kubectlfleetvm

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/consolelink"
)

// TestFillConsoles: the entries without a link get the one the hub would
// make from their ManagedCluster's console claim, read one by one for a
// few entries and listed once for many; a git source's VM is the one its
// agent reports; entries with a link, and those not asked for, are left
// alone.
func TestFillConsoles(t *testing.T) {
	console := func(c string) string { return "https://console." + c + ".example.com" }
	cluster := func(name string, claims bool) *clusterv1.ManagedCluster {
		mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if claims {
			mc.Status.ClusterClaims = []clusterv1.ManagedClusterClaim{{Name: consolelink.ClaimConsoleURL, Value: console(name)}}
		}
		return mc
	}
	inline := &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "web"},
		Spec:       fleetv1alpha1.FleetVirtualMachineSpec{Template: &runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"web-vm"}}`)}},
	}
	git := &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "web"}}
	gitReport := &fleetv1alpha1.VMReport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "vms.web"},
		Spec: fleetv1alpha1.VMReportSpec{FleetVM: fleetv1alpha1.FleetVMReference{Namespace: "vms", Name: "web"},
			VMs: []fleetv1alpha1.VMState{{Namespace: "vms", Name: "from-git"}}},
	}
	many := make([]string, fewClusters+1)
	for i := range many {
		many[i] = fmt.Sprintf("c%02d", i)
	}

	for name, tc := range map[string]struct {
		fvm      *fleetv1alpha1.FleetVirtualMachine
		entries  []fleetv1alpha1.ClusterStatus
		clusters []string // ManagedClusters claiming a console; "x" claims none
		which    func(fleetv1alpha1.ClusterStatus) bool
		want     map[string]string
		gets     int
		lists    int
	}{
		"a few brief entries, one Get each": {
			fvm:      inline,
			entries:  []fleetv1alpha1.ClusterStatus{{Cluster: "a", ConsoleURL: "kept"}, {Cluster: "b"}, {Cluster: "x"}, {Cluster: "gone"}},
			clusters: []string{"a", "b"},
			want: map[string]string{"a": "kept", "b": console("b") + "/k8s/ns/vms/kubevirt.io~v1~VirtualMachine/web-vm",
				"x": "", "gone": ""},
			gets: 3,
		},
		"only those asked for": {
			fvm:      inline,
			entries:  []fleetv1alpha1.ClusterStatus{{Cluster: "a", LastTransitionTime: ago(0)}, {Cluster: "b"}},
			clusters: []string{"a", "b"},
			which:    brief,
			want:     map[string]string{"a": "", "b": console("b") + "/k8s/ns/vms/kubevirt.io~v1~VirtualMachine/web-vm"},
			gets:     1,
		},
		"many: one List": {
			fvm:      inline,
			entries:  statusOf(many...),
			clusters: many,
			want: func() map[string]string {
				w := map[string]string{}
				for _, c := range many {
					w[c] = console(c) + "/k8s/ns/vms/kubevirt.io~v1~VirtualMachine/web-vm"
				}
				return w
			}(),
			lists: 1,
		},
		"a git source: the reported VM": {
			fvm:      git,
			entries:  []fleetv1alpha1.ClusterStatus{{Cluster: "a"}, {Cluster: "b"}},
			clusters: []string{"a", "b"},
			want:     map[string]string{"a": console("a") + "/k8s/ns/vms/kubevirt.io~v1~VirtualMachine/from-git", "b": ""},
			gets:     2, lists: 1,
		},
	} {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{gitReport}
			for _, c := range tc.clusters {
				objs = append(objs, cluster(c, c != "x"))
			}
			objs = append(objs, cluster("x", false))
			gets, lists := 0, 0
			c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(objs...).
				WithIndex(&fleetv1alpha1.VMReport{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).
				WithInterceptorFuncs(interceptor.Funcs{
					Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
						gets++
						return c.Get(ctx, key, obj, opts...)
					},
					List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
						lists++
						return c.List(ctx, list, opts...)
					},
				}).Build()
			fvm := tc.fvm.DeepCopy()
			fvm.Status.Clusters = tc.entries
			which := tc.which
			if which == nil {
				which = func(fleetv1alpha1.ClusterStatus) bool { return true }
			}
			o := &options{client: c}
			if err := o.fillConsoles(t.Context(), fvm, which); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, e := range fvm.Status.Clusters {
				got[e.Cluster] = e.ConsoleURL
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("links (-want,+got):\n%s", diff)
			}
			if gets != tc.gets || lists != tc.lists {
				t.Errorf("%d Gets and %d Lists, want %d and %d", gets, lists, tc.gets, tc.lists)
			}
		})
	}
}

// TestFillConsolesForbidden: a user who may not read ManagedClusters is
// told so; no link is made up.
func TestFillConsolesForbidden(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return apierrors.NewForbidden(schema.GroupResource{Group: "cluster.open-cluster-management.io", Resource: "managedclusters"}, "a", nil)
		},
	}).Build()
	fvm := &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "web"}}
	fvm.Status.Clusters = statusOf("a")
	o := &options{client: c}
	err := o.fillConsoles(t.Context(), fvm, brief)
	if !apierrors.IsForbidden(err) || fvm.Status.Clusters[0].ConsoleURL != "" {
		t.Errorf("error %v, link %q: want the Forbidden error and no link", err, fvm.Status.Clusters[0].ConsoleURL)
	}
}

func statusOf(clusters ...string) []fleetv1alpha1.ClusterStatus {
	out := make([]fleetv1alpha1.ClusterStatus, 0, len(clusters))
	for _, c := range clusters {
		out = append(out, fleetv1alpha1.ClusterStatus{Cluster: c})
	}
	return out
}
