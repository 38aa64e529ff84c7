package move

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"
)

// feedback is an export work as the work agent reports it back.
func feedback(applied metav1.ConditionStatus, values map[string]string) *workv1.ManifestWork {
	w := &workv1.ManifestWork{}
	w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: applied, Message: "no such kind"}}
	var fb []workv1.FeedbackValue
	for k, v := range values {
		fb = append(fb, workv1.FeedbackValue{Name: k, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(v)}})
	}
	w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{
		{ResourceMeta: workv1.ManifestResourceMeta{Resource: "secrets"}},
		{ResourceMeta: workv1.ManifestResourceMeta{Resource: "virtualmachineexports"}, StatusFeedbacks: workv1.StatusFeedbackResult{Values: fb}},
	}
	return w
}

func TestExportState(t *testing.T) {
	templates := []string{"db-root", "db-data"}
	for _, tc := range []struct {
		name     string
		work     *workv1.ManifestWork
		wantURLs map[string]string
		failed   string
	}{
		{name: "nothing reported yet", work: feedback(metav1.ConditionTrue, nil)},
		{name: "pending while the VM stops", work: feedback(metav1.ConditionTrue, map[string]string{feedbackPhase: "Pending", feedbackReason: "InUse"})},
		{name: "not applied", work: feedback(metav1.ConditionFalse, nil), failed: "could not apply it: no such kind"},
		{name: "exporter failed", work: feedback(metav1.ConditionTrue, map[string]string{feedbackPhase: "Pending", feedbackReason: "Unknown"}), failed: "its exporter pod failed"},
		{name: "skipped", work: feedback(metav1.ConditionTrue, map[string]string{feedbackPhase: "Skipped"}), failed: "no volumes"},
		{name: "ready without an external link", work: feedback(metav1.ConditionTrue, map[string]string{feedbackPhase: "Ready", feedbackURL + "0": "https://p/0"}),
			failed: "no external link for volume db-data"},
		{name: "ready", work: feedback(metav1.ConditionTrue, map[string]string{feedbackPhase: "Ready", feedbackReason: "PodReady", feedbackURL + "0": "https://p/0", feedbackURL + "1": "https://p/1"}),
			wantURLs: map[string]string{"db-root": "https://p/0", "db-data": "https://p/1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			urls, failed := ExportState(ReadExport(tc.work), templates)
			if (tc.failed == "") != (failed == "") || !strings.Contains(failed, tc.failed) {
				t.Fatalf("failed %q, want %q", failed, tc.failed)
			}
			if diff := cmp.Diff(tc.wantURLs, urls); diff != "" {
				t.Fatalf("urls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExportWork: the export names the VM and the token Secret the work
// carries, and the work asks for each template's gzip URL by its name.
func TestExportWork(t *testing.T) {
	m := newMove("b")
	w, err := ExportWork(m, types.NamespacedName{Namespace: "vms", Name: "web-vm"}, "s3cret", []string{"db-root"})
	if err != nil {
		t.Fatal(err)
	}
	if w.Namespace != "a" || w.Name != ExportWorkName(types.NamespacedName{Namespace: "vms", Name: "m1"}) {
		t.Fatalf("work %s/%s", w.Namespace, w.Name)
	}
	if Token(w) != "s3cret" {
		t.Fatalf("token %q", Token(w))
	}
	raw := string(w.Spec.Workload.Manifests[1].Raw)
	for _, want := range []string{`"kind":"VirtualMachineExport"`, `"name":"web-vm"`, `"tokenSecretRef":"fleetvm-move-`, `"namespace":"vms"`} {
		if !strings.Contains(raw, want) {
			t.Errorf("export %s lacks %s", raw, want)
		}
	}
	paths := w.Spec.ManifestConfigs[0].FeedbackRules[0].JsonPaths
	if got := paths[len(paths)-1]; got.Name != "url-0" || got.Path != `.status.links.external.volumes[?(@.name=="db-root")].formats[?(@.format=="gzip")].url` {
		t.Fatalf("url feedback %+v", got)
	}
}

// TestImportCarriesTheExportToken: the target's header is the export's
// token, and a work made for another token does not pass for it.
func TestImportCarriesTheExportToken(t *testing.T) {
	m := newMove("b")
	m.Status.To = "b"
	imp, err := ImportWork(m, "vms", "s3cret", "")
	if err != nil {
		t.Fatal(err)
	}
	if imp.Namespace != "b" || !Carries(imp, "s3cret") || Carries(imp, "other") || Carries(imp, "") {
		t.Fatalf("import work %s/%s carries %q", imp.Namespace, imp.Name, Token(imp))
	}
	if n := len(imp.Spec.Workload.Manifests); n != 1 {
		t.Fatalf("%d manifests without a CA, want the header Secret alone", n)
	}
	withCA, err := ImportWork(m, "vms", "s3cret", "-----BEGIN CERTIFICATE-----")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(withCA.Spec.Workload.Manifests); n != 2 {
		t.Fatalf("%d manifests with a CA, want the Secret and the ConfigMap", n)
	}
}

// migrationFeedbackWork is a migration work as the work agent reports it.
func migrationFeedbackWork(values map[string]string) *workv1.ManifestWork {
	w := feedback(metav1.ConditionTrue, values)
	w.Status.ResourceStatus.Manifests[1].ResourceMeta.Resource = "virtualmachineinstancemigrations"
	return w
}

func TestReadMigration(t *testing.T) {
	recv := migrationFeedbackWork(map[string]string{feedbackPhase: "WaitingForSync", feedbackAddress: "sync.b:9185"})
	if got := ReadMigration(recv, nil); got.ReceiverAddress != "sync.b:9185" || got.Failed != "" || got.succeeded() {
		t.Fatalf("waiting receiver: %+v", got)
	}
	done := migrationFeedbackWork(map[string]string{feedbackPhase: "Succeeded"})
	if got := ReadMigration(done, done); !got.succeeded() || got.Failed != "" {
		t.Fatalf("both succeeded: %+v", got)
	}
	failedSend := migrationFeedbackWork(map[string]string{feedbackPhase: "Failed", feedbackFailure: "connection refused"})
	if got := ReadMigration(recv, failedSend); got.Failed != "the source's migration failed: connection refused" {
		t.Fatalf("failed sender: %+v", got)
	}
	if got := ReadMigration(recv, feedback(metav1.ConditionFalse, nil)); !strings.Contains(got.Failed, "could not apply the migration") {
		t.Fatalf("send work not applied: %+v", got)
	}
}

// TestMigrationWorks: the two migrations share the move's ID, the
// receiver names the VM's instance, the sender connects to the address.
func TestMigrationWorks(t *testing.T) {
	m := newMove("b")
	m.Status.To = "b"
	vm := types.NamespacedName{Namespace: "vms", Name: "web-vm"}
	recv, err := ReceiveWork(m, vm)
	if err != nil {
		t.Fatal(err)
	}
	send, err := SendWork(m, vm, "sync.b:9185")
	if err != nil {
		t.Fatal(err)
	}
	id := MigrationID(types.NamespacedName{Namespace: "vms", Name: "m1"})
	for _, c := range []struct {
		w       *workv1.ManifestWork
		cluster string
		want    string
	}{
		{recv, "b", `"receive":{"migrationID":"` + id + `"}`},
		{send, "a", `"sendTo":{"migrationID":"` + id + `","connectURL":"sync.b:9185"}`},
	} {
		raw := string(c.w.Spec.Workload.Manifests[0].Raw)
		if c.w.Namespace != c.cluster || !strings.Contains(raw, c.want) || !strings.Contains(raw, `"vmiName":"web-vm"`) {
			t.Errorf("work %s/%s: %s, want %s", c.w.Namespace, c.w.Name, raw, c.want)
		}
	}
}
