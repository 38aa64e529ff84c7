package fleetenv

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// workWait bounds each wait on the work agents: generous, for a loaded
// machine; the waits end as soon as the condition holds.
const workWait = 90 * time.Second

// TestWorkAgents runs the real OCM work agents: a ManifestWork for one spoke
// lands its ConfigMap on that spoke only, reports Applied, Available and the
// status feedback of its JSONPaths (a scalar, and an object as raw JSON),
// follows an update, and deleting it removes the ConfigMap. Stop ends the
// agents.
func TestWorkAgents(t *testing.T) {
	ctx := t.Context()
	f, err := Start(ctx, Options{Spokes: []string{"east", "west"}, NoPlacementController: true, WorkAgents: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})
	for _, name := range []string{"east", "west"} {
		if err := f.RegisterManagedCluster(ctx, ManagedCluster{Name: name}); err != nil {
			t.Fatal(err)
		}
		if err := f.Spoke(name).EnsureNamespace(ctx, "images"); err != nil {
			t.Fatal(err)
		}
	}
	east, west := f.Spoke("east"), f.Spoke("west")

	work := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: "golden", Namespace: "east"},
		Spec: workv1.ManifestWorkSpec{
			Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{configMapManifest(t, "hello")}},
			ManifestConfigs: []workv1.ManifestConfigOption{{
				ResourceIdentifier: workv1.ResourceIdentifier{Resource: "configmaps", Namespace: "images", Name: "golden"},
				FeedbackRules: []workv1.FeedbackRule{{
					Type: workv1.JSONPathsType,
					JsonPaths: []workv1.JsonPath{
						{Name: "greeting", Path: ".data.greeting"},
						{Name: "data", Path: ".data"},
					},
				}},
			}},
		},
	}
	if err := f.Hub.Client.Create(ctx, work); err != nil {
		t.Fatal(err)
	}

	var cm corev1.ConfigMap
	key := client.ObjectKey{Namespace: "images", Name: "golden"}
	err = Eventually(ctx, workWait, func() (bool, error) {
		if err := east.Client.Get(ctx, key, &cm); err != nil {
			return false, err
		}
		return cm.Data["greeting"] == "hello", nil
	})
	if err != nil {
		t.Fatalf("ConfigMap on east: %v (data %v)", err, cm.Data)
	}
	// Only east's agent reads east's cluster namespace.
	if err := west.Client.Get(ctx, key, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap on west: err = %v, want NotFound", err)
	}

	waitFeedback(ctx, t, f.Hub.Client, work, "hello", `{"greeting":"hello"}`)

	// An update of the ManifestWork reaches the spoke and the feedback.
	err = Eventually(ctx, workWait, func() (bool, error) {
		if err := f.Hub.Client.Get(ctx, client.ObjectKeyFromObject(work), work); err != nil {
			return false, err
		}
		work.Spec.Workload.Manifests = []workv1.Manifest{configMapManifest(t, "bye")}
		return true, f.Hub.Client.Update(ctx, work)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFeedback(ctx, t, f.Hub.Client, work, "bye", `{"greeting":"bye"}`)

	if err := f.Hub.Client.Delete(ctx, work); err != nil {
		t.Fatal(err)
	}
	err = Eventually(ctx, workWait, func() (bool, error) {
		err := east.Client.Get(ctx, key, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Errorf("ConfigMap on east after the ManifestWork was deleted: %v", err)
	}
	// The agent removes its finalizer once the spoke is clean.
	err = Eventually(ctx, workWait, func() (bool, error) {
		err := f.Hub.Client.Get(ctx, client.ObjectKeyFromObject(work), &workv1.ManifestWork{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Errorf("ManifestWork still on the hub: %v", err)
	}

	// Stop ends the agents: no goroutine of theirs outlives the fleet.
	if !workAgentRunning() {
		t.Fatal("no work agent goroutine while the fleet runs: the check below would prove nothing")
	}
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := Eventually(context.Background(), 30*time.Second, func() (bool, error) { return !workAgentRunning(), nil }); err != nil {
		t.Errorf("work agent goroutines still running 30s after Stop: %v", err)
	}
}

// workAgentRunning tells whether a goroutine runs, or was started by, the
// OCM work agent.
func workAgentRunning() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Contains(string(buf[:n]), "open-cluster-management.io/ocm/pkg/work/")
		}
		buf = make([]byte, 2*len(buf))
	}
}

func configMapManifest(t *testing.T, greeting string) workv1.Manifest {
	t.Helper()
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "images", Name: "golden"},
		Data:       map[string]string{"greeting": greeting},
	}
	raw, err := json.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	return workv1.Manifest{RawExtension: k8sruntime.RawExtension{Raw: raw}}
}

// waitFeedback waits until the ManifestWork is Applied and Available for
// its current generation and its ConfigMap's feedback holds greeting (a
// string) and data (raw JSON).
func waitFeedback(ctx context.Context, t *testing.T, hub client.Client, work *workv1.ManifestWork, greeting, data string) {
	t.Helper()
	var last string
	err := Eventually(ctx, workWait, func() (bool, error) {
		var got workv1.ManifestWork
		if err := hub.Get(ctx, client.ObjectKeyFromObject(work), &got); err != nil {
			return false, err
		}
		for _, c := range []string{workv1.WorkApplied, workv1.WorkAvailable} {
			cond := meta.FindStatusCondition(got.Status.Conditions, c)
			if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != got.Generation {
				last = fmt.Sprintf("condition %s = %+v at generation %d", c, cond, got.Generation)
				return false, nil
			}
		}
		if n := len(got.Status.ResourceStatus.Manifests); n != 1 {
			last = fmt.Sprintf("%d manifest statuses", n)
			return false, nil
		}
		values := map[string]string{}
		for _, v := range got.Status.ResourceStatus.Manifests[0].StatusFeedbacks.Values {
			switch {
			case v.Value.String != nil:
				values[v.Name] = *v.Value.String
			case v.Value.JsonRaw != nil:
				values[v.Name] = *v.Value.JsonRaw
			}
		}
		last = fmt.Sprintf("feedback %v", values)
		return values["greeting"] == greeting && values["data"] == data, nil
	})
	if err != nil {
		t.Fatalf("ManifestWork %s status: %v; last seen: %s", work.Name, err, last)
	}
}
