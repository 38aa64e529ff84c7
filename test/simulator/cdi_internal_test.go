package simulator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

const stepDelay = 10 * time.Second

func cdiScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(cdiv1beta1.AddToScheme(s))
	return s
}

func newFakeSimulator(t *testing.T, objs ...client.Object) (*Simulator, client.Client, *clocktesting.FakePassiveClock) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(cdiScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&cdiv1beta1.DataVolume{}, &cdiv1beta1.DataSource{}, &corev1.PersistentVolumeClaim{}).Build()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	return New(Options{Client: c, Clock: clk, StepDelay: stepDelay}), c, clk
}

func standaloneDV(name string, src *cdiv1beta1.DataVolumeSource) *cdiv1beta1.DataVolume {
	return &cdiv1beta1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{Namespace: "images", Name: name, UID: "uid-golden"},
		Spec: cdiv1beta1.DataVolumeSpec{
			Source: src,
			Storage: &cdiv1beta1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")},
			}},
		},
	}
}

// TestImportSteps drives standalone DataVolumes through the reconciler
// with a fake clock: one step per step delay, never faster, and the phases
// CDI shows, ending Succeeded with a Bound claim, or Failed for a host
// under FailingHostSuffix.
func TestImportSteps(t *testing.T) {
	cases := map[string]struct {
		source     *cdiv1beta1.DataVolumeSource
		want       []string
		wantFailed string // a substring of the Ready message of a failed import
	}{
		"http": {
			source: &cdiv1beta1.DataVolumeSource{HTTP: &cdiv1beta1.DataVolumeSourceHTTP{URL: "https://images.example/rhel9.qcow2"}},
			want: []string{"ImportScheduled N/A", "ImportInProgress 0.0%", "ImportInProgress 25.0%", "ImportInProgress 50.0%",
				"ImportInProgress 75.0%", "ImportInProgress 100.0%", "Succeeded 100.0%"},
		},
		"registry": {
			source: &cdiv1beta1.DataVolumeSource{Registry: &cdiv1beta1.DataVolumeSourceRegistry{URL: ptr.To("docker://quay.example/golden/fedora:42")}},
			want: []string{"ImportScheduled N/A", "ImportInProgress 0.0%", "ImportInProgress 25.0%", "ImportInProgress 50.0%",
				"ImportInProgress 75.0%", "ImportInProgress 100.0%", "Succeeded 100.0%"},
		},
		"http host that fails": {
			source:     &cdiv1beta1.DataVolumeSource{HTTP: &cdiv1beta1.DataVolumeSourceHTTP{URL: "https://images.fail.invalid:8443/rhel9.qcow2"}},
			want:       []string{"ImportScheduled N/A", "Failed N/A"},
			wantFailed: "images.fail.invalid",
		},
		"s3 host that fails": {
			source:     &cdiv1beta1.DataVolumeSource{S3: &cdiv1beta1.DataVolumeSourceS3{URL: "https://bucket.fail.invalid/disk.img"}},
			want:       []string{"ImportScheduled N/A", "Failed N/A"},
			wantFailed: "bucket.fail.invalid",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			dv := standaloneDV("golden", tc.source)
			sim, c, clk := newFakeSimulator(t, dv)
			r := dataVolumeReconciler{sim}
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(dv)}
			var got []string
			for i := 0; i < 2*len(tc.want); i++ {
				before := phaseOf(t, c, dv)
				res, err := r.Reconcile(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				after := phaseOf(t, c, dv)
				if after == before {
					break
				}
				got = append(got, after)
				if res.RequeueAfter != stepDelay {
					t.Errorf("after %s: requeue after %v, want %v", after, res.RequeueAfter, stepDelay)
				}
				if strings.HasPrefix(after, "Succeeded") || strings.HasPrefix(after, "Failed") {
					continue // final: the next pass must not move it
				}
				// Not before the step delay has passed.
				clk.SetTime(clk.Now().Add(stepDelay - time.Second))
				if res, err = r.Reconcile(ctx, req); err != nil {
					t.Fatal(err)
				}
				if again := phaseOf(t, c, dv); again != after {
					t.Fatalf("moved from %s to %s before the step delay", after, again)
				}
				if res.RequeueAfter <= 0 || res.RequeueAfter > time.Second {
					t.Errorf("early reconcile of %s: requeue after %v, want the second left", after, res.RequeueAfter)
				}
				clk.SetTime(clk.Now().Add(time.Second))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("phases (-want,+got):\n%s", diff)
			}

			var final cdiv1beta1.DataVolume
			if err := c.Get(ctx, req.NamespacedName, &final); err != nil {
				t.Fatal(err)
			}
			ready := dvCondition(final.Status.Conditions, cdiv1beta1.DataVolumeReady)
			pvc := &corev1.PersistentVolumeClaim{}
			pvcErr := c.Get(ctx, req.NamespacedName, pvc)
			if tc.wantFailed != "" {
				if ready == nil || ready.Status != corev1.ConditionFalse || !strings.Contains(ready.Message, tc.wantFailed) {
					t.Errorf("Ready condition = %+v, want False naming %s", ready, tc.wantFailed)
				}
				if !apierrors.IsNotFound(pvcErr) {
					t.Errorf("claim of a failed import: %v, want NotFound", pvcErr)
				}
				return
			}
			if ready == nil || ready.Status != corev1.ConditionTrue {
				t.Errorf("Ready condition = %+v, want True", ready)
			}
			if pvcErr != nil {
				t.Fatalf("claim: %v", pvcErr)
			}
			gotClaim := map[string]string{
				"phase":    string(pvc.Status.Phase),
				"capacity": pvc.Status.Capacity.Storage().String(),
				"mode":     string(pvc.Spec.AccessModes[0]),
				"owner":    metav1.GetControllerOf(pvc).Kind + "/" + metav1.GetControllerOf(pvc).Name,
			}
			wantClaim := map[string]string{"phase": "Bound", "capacity": "5Gi", "mode": "ReadWriteOnce", "owner": "DataVolume/golden"}
			if diff := cmp.Diff(wantClaim, gotClaim); diff != "" {
				t.Errorf("claim (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDataVolumeGoneDeletesClaim: envtest runs no garbage collector, so
// the simulator deletes the claim of a deleted DataVolume, and only its own.
func TestDataVolumeGoneDeletesClaim(t *testing.T) {
	owner := metav1.OwnerReference{APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "DataVolume", Name: "golden", UID: "dv-uid", Controller: ptr.To(true)}
	owned := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: "images", Name: "golden", OwnerReferences: []metav1.OwnerReference{owner},
		// The API server's admission adds it; kube-controller-manager,
		// absent here, would remove it.
		Finalizers: []string{"kubernetes.io/pvc-protection"},
	}}
	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "images", Name: "other"}}
	sim, c, _ := newFakeSimulator(t, owned, foreign)
	for _, name := range []string{"golden", "other"} {
		if _, err := (dataVolumeReconciler{sim}).Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "images", Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(owned), &corev1.PersistentVolumeClaim{}); !apierrors.IsNotFound(err) {
		t.Errorf("claim of the deleted DataVolume: %v, want NotFound", err)
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(foreign), &corev1.PersistentVolumeClaim{}); err != nil {
		t.Errorf("claim no DataVolume owns: %v, want kept", err)
	}
}

// TestDataSourceReady: the Ready condition follows the source, as CDI's
// DataSource controller sets it.
func TestDataSourceReady(t *testing.T) {
	dvIn := func(phase cdiv1beta1.DataVolumePhase) *cdiv1beta1.DataVolume {
		return &cdiv1beta1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "images", Name: "rhel9"}, Status: cdiv1beta1.DataVolumeStatus{Phase: phase}}
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "images", Name: "rhel9"}}
	readyBy := func(message string) []cdiv1beta1.DataSourceCondition {
		return []cdiv1beta1.DataSourceCondition{{Type: cdiv1beta1.DataSourceReady, ConditionState: cdiv1beta1.ConditionState{
			Status: corev1.ConditionTrue, Reason: "Ready", Message: message,
		}}}
	}
	type want struct {
		Status corev1.ConditionStatus
		Reason string
	}
	cases := map[string]struct {
		noSource   bool
		sourceNS   string
		conditions []cdiv1beta1.DataSourceCondition
		objs       []client.Object
		want       want
	}{
		"nothing":                            {want: want{corev1.ConditionFalse, ReasonDataSourceNotFound}},
		"no source pvc":                      {noSource: true, want: want{corev1.ConditionFalse, ReasonDataSourceNoSource}},
		"importing":                          {objs: []client.Object{dvIn(cdiv1beta1.ImportInProgress)}, want: want{corev1.ConditionFalse, "ImportInProgress"}},
		"scheduled":                          {objs: []client.Object{dvIn(cdiv1beta1.ImportScheduled)}, want: want{corev1.ConditionFalse, "ImportScheduled"}},
		"new DataVolume":                     {objs: []client.Object{dvIn("")}, want: want{corev1.ConditionFalse, "Pending"}},
		"failed":                             {objs: []client.Object{dvIn(cdiv1beta1.Failed)}, want: want{corev1.ConditionFalse, "Failed"}},
		"succeeded":                          {objs: []client.Object{dvIn(cdiv1beta1.Succeeded), claim}, want: want{corev1.ConditionTrue, ReasonDataSourceReady}},
		"succeeded, source namespace ''":     {sourceNS: "-", objs: []client.Object{dvIn(cdiv1beta1.Succeeded)}, want: want{corev1.ConditionTrue, ReasonDataSourceReady}},
		"claim without DataVolume":           {objs: []client.Object{claim}, want: want{corev1.ConditionTrue, ReasonDataSourceReady}},
		"claim while DataVolume imports":     {objs: []client.Object{dvIn(cdiv1beta1.ImportInProgress), claim}, want: want{corev1.ConditionFalse, "ImportInProgress"}},
		"made Ready by hand, nothing behind": {conditions: readyBy("golden image of the test"), want: want{corev1.ConditionTrue, "Ready"}},
		"made Ready by hand, DataVolume importing": {
			conditions: readyBy(""), objs: []client.Object{dvIn(cdiv1beta1.ImportInProgress)}, want: want{corev1.ConditionFalse, "ImportInProgress"},
		},
		"made Ready by the simulator, source gone": {conditions: readyBy(dataSourceReadyMessage), want: want{corev1.ConditionFalse, ReasonDataSourceNotFound}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ds := &cdiv1beta1.DataSource{
				ObjectMeta: metav1.ObjectMeta{Namespace: "images", Name: "rhel"},
				Spec: cdiv1beta1.DataSourceSpec{Source: cdiv1beta1.DataSourceSource{
					PVC: &cdiv1beta1.DataVolumeSourcePVC{Namespace: "images", Name: "rhel9"},
				}},
				Status: cdiv1beta1.DataSourceStatus{Conditions: tc.conditions},
			}
			if tc.noSource {
				ds.Spec.Source.PVC = nil
			}
			if tc.sourceNS == "-" {
				ds.Spec.Source.PVC.Namespace = ""
			}
			sim, c, _ := newFakeSimulator(t, append(tc.objs, ds)...)
			if _, err := (dataSourceReconciler{sim}).Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ds)}); err != nil {
				t.Fatal(err)
			}
			var got cdiv1beta1.DataSource
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(ds), &got); err != nil {
				t.Fatal(err)
			}
			cond := findDataSourceCondition(got.Status.Conditions)
			if cond == nil {
				t.Fatal("no Ready condition")
			}
			if diff := cmp.Diff(tc.want, want{cond.Status, cond.Reason}); diff != "" {
				t.Errorf("Ready (-want,+got):\n%s", diff)
			}
			if len(got.Status.Conditions) != 1 {
				t.Errorf("conditions = %+v, want only Ready", got.Status.Conditions)
			}
		})
	}
}

func phaseOf(t *testing.T, c client.Client, dv *cdiv1beta1.DataVolume) string {
	t.Helper()
	var got cdiv1beta1.DataVolume
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(dv), &got); err != nil {
		t.Fatal(err)
	}
	return string(got.Status.Phase) + " " + string(got.Status.Progress)
}

func dvCondition(conds []cdiv1beta1.DataVolumeCondition, t cdiv1beta1.DataVolumeConditionType) *cdiv1beta1.DataVolumeCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
