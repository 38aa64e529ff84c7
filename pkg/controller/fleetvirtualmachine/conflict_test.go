package fleetvirtualmachine

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/tenancy"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// testScheme knows every kind the reconciler reads and writes, for the
// package's fake-client tests.
func testScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, fleetv1alpha1.AddToScheme, clusterv1.Install, clusterv1alpha1.Install, clusterv1beta1.Install,
		clusterv1beta2.Install, argoapp.AddToScheme, workv1.Install,
	} {
		utilruntime.Must(add(scheme))
	}
	// The hub reads and writes AppProjects unstructured.
	scheme.AddKnownTypeWithName(tenancy.AppProjectGVK, &unstructured.Unstructured{})
	scheme.AddKnownTypeWithName(tenancy.AppProjectGVK.GroupVersion().WithKind("AppProjectList"), &unstructured.UnstructuredList{})
	return scheme
}

// TestReconcileStatusWriteConflict: a status write refused with 409
// Conflict (the cache is behind the API server) is not an error: the newer
// object's watch event brings the next reconcile, so the reconcile is not
// requeued with backoff, and the condition transitions of the status that
// was not written are not announced as events.
func TestReconcileStatusWriteConflict(t *testing.T) {
	transitions := map[string]bool{
		fleetv1alpha1.ReasonPlacementPending: true, fleetv1alpha1.ReasonReconciling: true, fleetv1alpha1.ReasonNoneReady: true,
	}
	cases := map[string]struct {
		statusErr       error
		wantErr         bool
		wantTransitions bool
	}{
		"status written":        {wantTransitions: true},
		"status write conflict": {statusErr: apierrors.NewConflict(schema.GroupResource{Group: "fleetvm.io", Resource: "fleetvirtualmachines"}, "web", nil)},
		// Not written, not announced, and nothing acted on: the retry
		// decides again.
		"status write fails another": {statusErr: apierrors.NewServiceUnavailable("etcd is away"), wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			scheme := testScheme()
			fvm := &fleetv1alpha1.FleetVirtualMachine{
				ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "web", Generation: 1, Finalizers: []string{fleetv1alpha1.FleetVirtualMachineFinalizer}},
				Spec: fleetv1alpha1.FleetVirtualMachineSpec{
					Template: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",` +
						`"spec":{"template":{"spec":{"domain":{"cpu":{"cores":2},"memory":{"guest":"4Gi"},"devices":{}}}}}}`)},
					Placement:   fleetv1alpha1.FleetPlacement{Environment: "prod"},
					RunStrategy: fleetv1alpha1.RunStrategyAlways,
				},
				// It was Ready: losing that is announced.
				Status: fleetv1alpha1.FleetVirtualMachineStatus{Conditions: []metav1.Condition{{
					Type: fleetv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: fleetv1alpha1.ReasonAllReady,
					LastTransitionTime: metav1.Now(),
				}}},
			}
			b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(fvm).WithStatusSubresource(fvm)
			if err := SetupIndexes(ctx, utiltesting.Indexer{Builder: b}); err != nil {
				t.Fatal(err)
			}
			statusWrites := 0
			c := b.WithInterceptorFuncs(interceptor.Funcs{
				// GitOpsCluster is written unstructured and not in the
				// fake client's scheme: it exists.
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if obj.GetObjectKind().GroupVersionKind().Kind == gitOpsClusterGVK.Kind {
						return nil
					}
					return c.Get(ctx, key, obj, opts...)
				},
				SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
					statusWrites++
					if tc.statusErr != nil {
						return tc.statusErr
					}
					return c.SubResource(sub).Update(ctx, obj, opts...)
				},
			}).Build()
			recorder := record.NewFakeRecorder(100)
			r := &Reconciler{Client: c, Recorder: recorder, Clock: clocktesting.NewFakeClock(metav1.Now().Time), Config: DefaultConfig()}

			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(fvm)})
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Errorf("Reconcile error = %v, want error: %v", err, tc.wantErr)
			}
			if statusWrites != 1 {
				t.Fatalf("%d status writes, want 1", statusWrites)
			}
			close(recorder.Events)
			gotTransitions := false
			for e := range recorder.Events {
				// FakeRecorder events read "Type Reason Message".
				if f := strings.Fields(e); len(f) > 1 && transitions[f[1]] {
					gotTransitions = true
				}
			}
			if gotTransitions != tc.wantTransitions {
				t.Errorf("condition transition events recorded: %v, want %v", gotTransitions, tc.wantTransitions)
			}
		})
	}
}
