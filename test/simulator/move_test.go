package simulator_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	exportv1beta1 "kubevirt.io/api/export/v1beta1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/simulator"
)

func vmExport(ns, name, kind, source string) *exportv1beta1.VirtualMachineExport {
	ref := corev1.TypedLocalObjectReference{Kind: kind, Name: source}
	if kind == "VirtualMachine" {
		ref.APIGroup = ptr.To(kubevirtv1.SchemeGroupVersion.Group)
	}
	return &exportv1beta1.VirtualMachineExport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       exportv1beta1.VirtualMachineExportSpec{Source: ref},
	}
}

func exportReady(ex *exportv1beta1.VirtualMachineExport) *exportv1beta1.Condition {
	if ex.Status == nil {
		return nil
	}
	for i := range ex.Status.Conditions {
		if ex.Status.Conditions[i].Type == exportv1beta1.ConditionReady {
			return &ex.Status.Conditions[i]
		}
	}
	return nil
}

// waitExport waits until the export is in phase with a Ready condition of
// that reason, and returns it.
func waitExport(t *testing.T, c client.Client, ns, name string, phase exportv1beta1.VirtualMachineExportPhase, reason string) *exportv1beta1.VirtualMachineExport {
	t.Helper()
	ex := &exportv1beta1.VirtualMachineExport{}
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		if err := get(t.Context(), c, ns, name, ex); err != nil {
			return false, err
		}
		r := exportReady(ex)
		return ex.Status != nil && ex.Status.Phase == phase && r != nil && r.Reason == reason, nil
	})
	if err != nil {
		t.Fatalf("VirtualMachineExport %s/%s: want %s with Ready reason %s, have %+v: %v", ns, name, phase, reason, ex.Status, err)
	}
	return ex
}

func waitDataVolume(t *testing.T, c client.Client, ns, name string, phase cdiv1beta1.DataVolumePhase) *cdiv1beta1.DataVolume {
	t.Helper()
	dv := &cdiv1beta1.DataVolume{}
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		if err := get(t.Context(), c, ns, name, dv); err != nil {
			return false, err
		}
		return dv.Status.Phase == phase, nil
	})
	if err != nil {
		t.Fatalf("DataVolume %s/%s: want %s, have %s: %v", ns, name, phase, dv.Status.Phase, err)
	}
	return dv
}

// testNode creates a node of 4 CPUs and 8Gi for the test alone.
func testNode(t *testing.T, c *fleetenv.Cluster, name string) {
	t.Helper()
	createNode(t, c, fleetenv.Node{Name: name, CPU: "4", Memory: "8Gi"})
}

func setRunStrategy(t *testing.T, c client.Client, ns, name string, strategy kubevirtv1.VirtualMachineRunStrategy) {
	t.Helper()
	vm, err := vmStatus(t.Context(), c, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.RunStrategy = &strategy
	if err := c.Patch(t.Context(), vm, patch); err != nil {
		t.Fatal(err)
	}
}

// stoppedVMWithDisk makes a VM with one imported disk on the cluster,
// waits until it runs, halts it and waits until it is Stopped: the source
// of a cold move.
func stoppedVMWithDisk(t *testing.T, c *fleetenv.Cluster, ns, name string) {
	t.Helper()
	testNode(t, c, "n-"+ns)
	vm := agenttest.VM(ns, name, agenttest.DataVolumeTemplate(name+"-root", agenttest.HTTPSource("https://images.example/rhel9.qcow2")))
	if err := c.Client.Create(t.Context(), vm); err != nil {
		t.Fatal(err)
	}
	waitPrintable(t, c.Client, ns, name, kubevirtv1.VirtualMachineStatusRunning, true)
	setRunStrategy(t, c.Client, ns, name, kubevirtv1.RunStrategyHalted)
	waitPrintable(t, c.Client, ns, name, kubevirtv1.VirtualMachineStatusStopped, false)
}

// TestExportOfVM: as KubeVirt does, an export of a running VM waits
// (Pending, Ready=False InUse); once the VM is stopped it is Ready, with a
// token Secret and links to each of the VM's disks, in the cluster through
// its service and from outside through the export proxy; a VM started
// again takes the export back to Pending.
func TestExportOfVM(t *testing.T) {
	ctx := t.Context()
	ns := fresh("export-vm")
	s := spoke(t, ns)
	testNode(t, s, "n-"+ns)
	if err := s.Client.Create(ctx, agenttest.VM(ns, "db", agenttest.DataVolumeTemplate("db-root", agenttest.HTTPSource("https://images.example/rhel9.qcow2")))); err != nil {
		t.Fatal(err)
	}
	waitPrintable(t, s.Client, ns, "db", kubevirtv1.VirtualMachineStatusRunning, true)
	if err := s.Client.Create(ctx, vmExport(ns, "db", "VirtualMachine", "db")); err != nil {
		t.Fatal(err)
	}
	ex := waitExport(t, s.Client, ns, "db", exportv1beta1.Pending, simulator.ReasonExportInUse)
	if r := exportReady(ex); r.Status != corev1.ConditionFalse || r.Message != "Virtual Machine "+ns+"/db is running" {
		t.Errorf("Ready of an export of a running VM = %+v, want False naming the running VM", r)
	}
	if ex.Status.Links != nil && (ex.Status.Links.Internal != nil || ex.Status.Links.External != nil) {
		t.Errorf("export of a running VM has links: %+v", ex.Status.Links)
	}

	setRunStrategy(t, s.Client, ns, "db", kubevirtv1.RunStrategyHalted)
	ex = waitExport(t, s.Client, ns, "db", exportv1beta1.Ready, simulator.ReasonExportPodReady)
	if r := exportReady(ex); r.Status != corev1.ConditionTrue {
		t.Errorf("Ready = %+v, want True", r)
	}
	internal := "https://virt-export-db." + ns + ".svc"
	external := "https://" + proxyHost("spoke") + "/api/export.kubevirt.io/v1beta1/namespaces/" + ns + "/virtualmachineexports/db"
	link := func(base, kind string) *exportv1beta1.VirtualMachineExportLink {
		return &exportv1beta1.VirtualMachineExportLink{
			Manifests: []exportv1beta1.VirtualMachineExportManifest{
				{Type: exportv1beta1.AllManifests, Url: base + "/" + kind + "/manifests/all"},
				{Type: exportv1beta1.AuthHeader, Url: base + "/" + kind + "/manifests/secret"},
			},
			Volumes: []exportv1beta1.VirtualMachineExportVolume{{Name: "db-root", Formats: []exportv1beta1.VirtualMachineExportVolumeFormat{
				{Format: exportv1beta1.KubeVirtRaw, Url: base + "/volumes/db-root/disk.img"},
				{Format: exportv1beta1.KubeVirtGz, Url: base + "/volumes/db-root/disk.img.gz"},
			}}},
		}
	}
	want := &exportv1beta1.VirtualMachineExportLinks{Internal: link(internal, "internal"), External: link(external, "external")}
	if diff := cmp.Diff(want, ex.Status.Links); diff != "" {
		t.Errorf("links (-want,+got):\n%s", diff)
	}
	if ex.Status.ServiceName != "virt-export-db" || ptr.Deref(ex.Status.VirtualMachineName, "") != "db" ||
		ptr.Deref(ex.Status.TokenSecretRef, "") != "export-token-db" || ex.Status.TTLExpirationTime == nil {
		t.Errorf("status serviceName %q virtualMachineName %v tokenSecretRef %v ttlExpirationTime %v; want virt-export-db, db, export-token-db and a TTL",
			ex.Status.ServiceName, ex.Status.VirtualMachineName, ex.Status.TokenSecretRef, ex.Status.TTLExpirationTime)
	}
	secret := &corev1.Secret{}
	if err := get(ctx, s.Client, ns, "export-token-db", secret); err != nil {
		t.Fatalf("token Secret: %v", err)
	}
	if len(secret.Data[simulator.ExportTokenKey]) == 0 || !metav1.IsControlledBy(secret, ex) {
		t.Errorf("token Secret data %v owner %v, want a token, owned by the export", secret.Data, metav1.GetControllerOf(secret))
	}

	// Started again: KubeVirt pauses the export.
	setRunStrategy(t, s.Client, ns, "db", kubevirtv1.RunStrategyAlways)
	waitExport(t, s.Client, ns, "db", exportv1beta1.Pending, simulator.ReasonExportInUse)
}

// TestExportOfClaim: an export of a claim is Ready with the claim's
// images and PVCReady=True (PVCBound); one of a missing claim waits with
// PVCReady=False (PVCNotFound); one of a VM with no disks is Skipped.
func TestExportOfClaim(t *testing.T) {
	ctx := t.Context()
	ns := fresh("export-claim")
	s := spoke(t, ns)
	dv, _ := goldenImage(ns, "image", "https://images.example/fedora.qcow2")
	for _, o := range []client.Object{dv, vmExport(ns, "image", "PersistentVolumeClaim", "image"),
		vmExport(ns, "missing", "PersistentVolumeClaim", "missing"), vmExport(ns, "diskless", "VirtualMachine", "diskless"),
		agenttest.VM(ns, "diskless", agenttest.RunStrategy(kubevirtv1.RunStrategyHalted))} {
		if err := s.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	pvcReady := func(ex *exportv1beta1.VirtualMachineExport) string {
		for _, c := range ex.Status.Conditions {
			if c.Type == exportv1beta1.ConditionPVC {
				return string(c.Status) + " " + c.Reason
			}
		}
		return ""
	}
	ex := waitExport(t, s.Client, ns, "image", exportv1beta1.Ready, simulator.ReasonExportPodReady)
	if got := pvcReady(ex); got != "True PVCBound" {
		t.Errorf("PVCReady of an export of a Bound claim = %q, want True PVCBound", got)
	}
	wantVolumes := []exportv1beta1.VirtualMachineExportVolume{{Name: "image", Formats: []exportv1beta1.VirtualMachineExportVolumeFormat{
		{Format: exportv1beta1.KubeVirtRaw, Url: "https://virt-export-image." + ns + ".svc/volumes/image/disk.img"},
		{Format: exportv1beta1.KubeVirtGz, Url: "https://virt-export-image." + ns + ".svc/volumes/image/disk.img.gz"},
	}}}
	if diff := cmp.Diff(wantVolumes, ex.Status.Links.Internal.Volumes); diff != "" || len(ex.Status.Links.Internal.Manifests) != 0 {
		t.Errorf("internal volumes (-want,+got):\n%s\nmanifests: %v (want none for a claim)", diff, ex.Status.Links.Internal.Manifests)
	}
	missing := waitExport(t, s.Client, ns, "missing", exportv1beta1.Pending, simulator.ReasonExportInUse)
	if got := pvcReady(missing); got != "False PVCNotFound" {
		t.Errorf("PVCReady of an export of a missing claim = %q, want False PVCNotFound", got)
	}
	waitExport(t, s.Client, ns, "diskless", exportv1beta1.Skipped, simulator.ReasonExportNoVolume)
}

// TestImportFromExport: a DataVolume on the target cluster importing from
// the external link of a Ready export on the source cluster succeeds; one
// naming an export that does not exist there, one whose exporter fails
// (not Ready), or a volume or format the export did not issue, fails; so
// does an internal link, which names a service of the source cluster that
// no export of the target cluster has.
func TestImportFromExport(t *testing.T) {
	ctx := t.Context()
	ns, failNS := fresh("cold-move"), fresh(nsExportFails)
	src := spoke(t, ns)
	stoppedVMWithDisk(t, src, ns, "db")
	if err := src.Client.Create(ctx, vmExport(ns, "db", "VirtualMachine", "db")); err != nil {
		t.Fatal(err)
	}
	ex := waitExport(t, src.Client, ns, "db", exportv1beta1.Ready, simulator.ReasonExportPodReady)
	// The data on the exported disk, which an import carries.
	marker := "written on spoke by " + t.Name()
	root := &corev1.PersistentVolumeClaim{}
	if err := get(ctx, src.Client, ns, "db-root", root); err != nil {
		t.Fatal(err)
	}
	root.Annotations = map[string]string{simulator.DataAnnotation: marker}
	if err := src.Client.Update(ctx, root); err != nil {
		t.Fatal(err)
	}

	failSrc := cluster(t, "spoke", failNS)
	stoppedVMWithDisk(t, failSrc, failNS, "db")
	if err := failSrc.Client.Create(ctx, vmExport(failNS, "db", "VirtualMachine", "db")); err != nil {
		t.Fatal(err)
	}
	failing := waitExport(t, failSrc.Client, failNS, "db", exportv1beta1.Pending, simulator.ReasonExportUnknown)
	if failing.Status.Links != nil && failing.Status.Links.External != nil {
		t.Errorf("a failing export issued links: %+v", failing.Status.Links)
	}

	dst := cluster(t, "target", ns)
	externalURL := func(ns, export string) string {
		return fmt.Sprintf("https://%s/api/export.kubevirt.io/v1beta1/namespaces/%s/virtualmachineexports/%s/volumes/db-root/disk.img.gz",
			proxyHost("spoke"), ns, export)
	}
	cases := map[string]struct {
		url     string
		want    cdiv1beta1.DataVolumePhase
		message string
	}{
		"external-link":  {url: ex.Status.Links.External.Volumes[0].Formats[1].Url, want: cdiv1beta1.Succeeded},
		"no-such-export": {url: externalURL(ns, "nope"), want: cdiv1beta1.Failed, message: "404"},
		"export-fails":   {url: externalURL(failNS, "db"), want: cdiv1beta1.Failed, message: "404"},
		"internal-link":  {url: ex.Status.Links.Internal.Volumes[0].Formats[0].Url, want: cdiv1beta1.Failed, message: "404"},
		"other-volume":   {url: strings.Replace(externalURL(ns, "db"), "db-root", "db-data", 1), want: cdiv1beta1.Failed, message: "404"},
		"unknown-format": {url: strings.Replace(externalURL(ns, "db"), "disk.img.gz", "disk.qcow2", 1), want: cdiv1beta1.Failed, message: "404"},
	}
	if cases["external-link"].url != externalURL(ns, "db") {
		t.Fatalf("external gzip link = %s, want %s", cases["external-link"].url, externalURL(ns, "db"))
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dv, _ := goldenImage(ns, name, tc.url)
			if err := dst.Client.Create(ctx, dv); err != nil {
				t.Fatal(err)
			}
			got := waitDataVolume(t, dst.Client, ns, name, tc.want)
			if tc.want == cdiv1beta1.Failed {
				var ready *cdiv1beta1.DataVolumeCondition
				for i := range got.Status.Conditions {
					if got.Status.Conditions[i].Type == cdiv1beta1.DataVolumeReady {
						ready = &got.Status.Conditions[i]
					}
				}
				if ready == nil || ready.Status != corev1.ConditionFalse || !strings.Contains(ready.Message, tc.message) {
					t.Errorf("Ready = %+v, want False with a message containing %q", ready, tc.message)
				}
				return
			}
			pvc := &corev1.PersistentVolumeClaim{}
			if err := get(ctx, dst.Client, ns, name, pvc); err != nil {
				t.Fatalf("claim of an import from the export: %v", err)
			}
			if got := pvc.Annotations[simulator.DataAnnotation]; got != marker {
				t.Errorf("claim imported from the export holds data %q, want the exported claim's %q", got, marker)
			}
		})
	}
}

// migrationPair is the two migrations of a decentralized migration of the
// VM ns/name from "spoke" to "target".
func migrationPair(ns, name, id string) (source, target *kubevirtv1.VirtualMachineInstanceMigration) {
	source = &kubevirtv1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-out"},
		Spec: kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: name,
			SendTo: &kubevirtv1.VirtualMachineInstanceMigrationSource{MigrationID: id, ConnectURL: syncAddress("target")}},
	}
	target = &kubevirtv1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-in"},
		Spec: kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: name,
			Receive: &kubevirtv1.VirtualMachineInstanceMigrationTarget{MigrationID: id}},
	}
	return source, target
}

// claimData is the data marker on a claim ("" without one).
func claimData(t *testing.T, c client.Client, ns, name string) string {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := get(t.Context(), c, ns, name, pvc); err != nil {
		t.Fatalf("claim %s/%s: %v", ns, name, err)
	}
	return pvc.Annotations[simulator.DataAnnotation]
}

// liveMoveSetup starts the VM ns/name on "spoke" and its receiver on
// "target" (runStrategy WaitAsReceiver, to run Always afterwards), each
// with an imported disk <name>-root, writes a data marker on the source's
// disk, waits until the receiver waits, and creates both migrations. It
// returns the marker (the receiver's disk, imported from elsewhere, has
// none).
func liveMoveSetup(t *testing.T, ns, name, id string) (src, dst *fleetenv.Cluster, marker string) {
	t.Helper()
	ctx := t.Context()
	src, dst = cluster(t, "spoke", ns), cluster(t, "target", ns)
	for _, c := range []*fleetenv.Cluster{src, dst} {
		testNode(t, c, "n-"+ns)
	}
	disk := agenttest.DataVolumeTemplate(name+"-root", agenttest.HTTPSource("https://images.example/rhel9.qcow2"))
	if err := src.Client.Create(ctx, agenttest.VM(ns, name, agenttest.Resources("2", "2Gi"), disk)); err != nil {
		t.Fatal(err)
	}
	receiver := agenttest.VM(ns, name, agenttest.Resources("2", "2Gi"), disk, agenttest.RunStrategy(kubevirtv1.RunStrategyWaitAsReceiver))
	receiver.Annotations = map[string]string{kubevirtv1.RestoreRunStrategy: string(kubevirtv1.RunStrategyAlways)}
	if err := dst.Client.Create(ctx, receiver); err != nil {
		t.Fatal(err)
	}
	waitPrintable(t, src.Client, ns, name, kubevirtv1.VirtualMachineStatusRunning, true)
	// The data on the running VM's disk, which a live migration carries.
	marker = "written on spoke by " + t.Name()
	root := &corev1.PersistentVolumeClaim{}
	if err := get(ctx, src.Client, ns, name+"-root", root); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(root.DeepCopy())
	metav1.SetMetaDataAnnotation(&root.ObjectMeta, simulator.DataAnnotation, marker)
	if err := src.Client.Patch(ctx, root, patch); err != nil {
		t.Fatal(err)
	}
	waitPrintable(t, dst.Client, ns, name, kubevirtv1.VirtualMachineStatusWaitingForReceiver, false)
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := get(ctx, dst.Client, ns, name, vmi); err != nil {
		t.Fatal(err)
	}
	if vmi.Status.Phase != kubevirtv1.WaitingForSync || !vmi.IsMigrationTarget() {
		t.Errorf("receiver instance phase %s annotations %v, want WaitingForSync and %s", vmi.Status.Phase, vmi.Annotations, kubevirtv1.CreateMigrationTarget)
	}
	if pods := launcherPods(t, dst.Client, ns, name); len(pods) != 0 {
		t.Errorf("a waiting receiver has launcher pods %v", podNodes(pods))
	}
	out, in := migrationPair(ns, name, id)
	if err := dst.Client.Create(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := src.Client.Create(ctx, out); err != nil {
		t.Fatal(err)
	}
	return src, dst, marker
}

// waitMigration waits until the migration is in phase, and returns it.
func waitMigration(t *testing.T, c client.Client, ns, name string, phase kubevirtv1.VirtualMachineInstanceMigrationPhase) *kubevirtv1.VirtualMachineInstanceMigration {
	t.Helper()
	m := &kubevirtv1.VirtualMachineInstanceMigration{}
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		if err := get(t.Context(), c, ns, name, m); err != nil {
			return false, err
		}
		return m.Status.Phase == phase, nil
	})
	if err != nil {
		t.Fatalf("migration %s/%s: want %s, have %s: %v", ns, name, phase, m.Status.Phase, err)
	}
	return m
}

func phasesOf(m *kubevirtv1.VirtualMachineInstanceMigration) []kubevirtv1.VirtualMachineInstanceMigrationPhase {
	var out []kubevirtv1.VirtualMachineInstanceMigrationPhase
	for _, p := range m.Status.PhaseTransitionTimestamps {
		out = append(out, p.Phase)
	}
	return out
}

// TestDecentralizedMigration: both migrations walk KubeVirt's phases for
// their side; the target VM's disk holds the source's data once the
// target migration says Succeeded; then the source VM is halted with no
// instance or pod left, and the target VM runs (runStrategy from its
// restore annotation) on the target cluster's node.
func TestDecentralizedMigration(t *testing.T) {
	ctx := t.Context()
	ns := fresh("live-move")
	src, dst, marker := liveMoveSetup(t, ns, "web", ns)

	out := waitMigration(t, src.Client, ns, "web-out", kubevirtv1.MigrationSucceeded)
	in := waitMigration(t, dst.Client, ns, "web-in", kubevirtv1.MigrationSucceeded)
	// Read right after Succeeded: the data is there by the time it says so.
	if got := claimData(t, dst.Client, ns, "web-root"); got != marker {
		t.Errorf("target VM's disk holds data %q after the migration, want the source's %q", got, marker)
	}
	wantOut := []kubevirtv1.VirtualMachineInstanceMigrationPhase{kubevirtv1.MigrationSynchronizing, kubevirtv1.MigrationPending,
		kubevirtv1.MigrationScheduling, kubevirtv1.MigrationScheduled, kubevirtv1.MigrationPreparingTarget,
		kubevirtv1.MigrationTargetReady, kubevirtv1.MigrationRunning, kubevirtv1.MigrationSucceeded}
	wantIn := []kubevirtv1.VirtualMachineInstanceMigrationPhase{kubevirtv1.MigrationWaitingForSync, kubevirtv1.MigrationPending,
		kubevirtv1.MigrationScheduling, kubevirtv1.MigrationScheduled, kubevirtv1.MigrationPreparingTarget,
		kubevirtv1.MigrationTargetReady, kubevirtv1.MigrationRunning, kubevirtv1.MigrationSucceeded}
	if diff := cmp.Diff(wantOut, phasesOf(out)); diff != "" {
		t.Errorf("source migration phases (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(wantIn, phasesOf(in)); diff != "" {
		t.Errorf("target migration phases (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{syncAddress("target")}, in.Status.SynchronizationAddresses); diff != "" {
		t.Errorf("target migration's synchronizationAddresses (-want,+got):\n%s", diff)
	}

	// The source: halted, nothing left running.
	vm := waitPrintable(t, src.Client, ns, "web", kubevirtv1.VirtualMachineStatusStopped, false)
	if RunStrategy := simulator.RunStrategy(vm); RunStrategy != kubevirtv1.RunStrategyHalted {
		t.Errorf("source VM runStrategy = %s, want Halted", RunStrategy)
	}
	if err := get(ctx, src.Client, ns, "web", &kubevirtv1.VirtualMachineInstance{}); !apierrors.IsNotFound(err) {
		t.Errorf("source instance after the move: %v, want NotFound", err)
	}
	if err := fleetenv.Eventually(ctx, wait, func() (bool, error) { return len(launcherPods(t, src.Client, ns, "web")) == 0, nil }); err != nil {
		t.Errorf("source launcher pod left: %v", err)
	}

	// The target: running, on its node, as a plain instance.
	vm = waitPrintable(t, dst.Client, ns, "web", kubevirtv1.VirtualMachineStatusRunning, true)
	if RunStrategy := simulator.RunStrategy(vm); RunStrategy != kubevirtv1.RunStrategyAlways {
		t.Errorf("target VM runStrategy = %s, want Always (its restore annotation)", RunStrategy)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := get(ctx, dst.Client, ns, "web", vmi); err != nil {
		t.Fatal(err)
	}
	if vmi.Status.Phase != kubevirtv1.Running || vmi.Status.NodeName != "n-"+ns || vmi.IsMigrationTarget() ||
		vmi.Status.MigrationState == nil || !vmi.Status.MigrationState.Completed || vmi.Status.MigrationState.Failed {
		t.Errorf("target instance phase %s node %s receiver %v migrationState %+v; want Running on n-%s, no receiver, completed",
			vmi.Status.Phase, vmi.Status.NodeName, vmi.IsMigrationTarget(), vmi.Status.MigrationState, ns)
	}
	if pods := launcherPods(t, dst.Client, ns, "web"); len(pods) != 1 || pods[0].Spec.NodeName != "n-"+ns {
		t.Errorf("target launcher pods = %v, want one on n-%s", podNodes(pods), ns)
	}
}

// TestMigrationFailsHalfway: a migration that fails once both sides run
// it leaves both migrations Failed, the source VM running where it was
// with its data, and the target VM not running, its receiver waiting with
// no pod and its disk without the source's data.
func TestMigrationFailsHalfway(t *testing.T) {
	ctx := t.Context()
	ns := fresh("halfway")
	src, dst, marker := liveMoveSetup(t, ns, "web", fresh(idFailsHalfway))

	out := waitMigration(t, src.Client, ns, "web-out", kubevirtv1.MigrationFailed)
	in := waitMigration(t, dst.Client, ns, "web-in", kubevirtv1.MigrationFailed)
	if got := claimData(t, dst.Client, ns, "web-root"); got != "" {
		t.Errorf("target VM's disk holds data %q after a failed migration, want none (the source's is %q)", got, marker)
	}
	if got := claimData(t, src.Client, ns, "web-root"); got != marker {
		t.Errorf("source VM's disk holds data %q after a failed migration, want its own %q", got, marker)
	}
	for _, m := range []*kubevirtv1.VirtualMachineInstanceMigration{out, in} {
		phases := phasesOf(m)
		if len(phases) < 2 || phases[len(phases)-2] != kubevirtv1.MigrationRunning {
			t.Errorf("migration %s phases %v, want Running then Failed (halfway)", m.Name, phases)
		}
		if m.Status.MigrationState == nil || !m.Status.MigrationState.Failed || m.Status.MigrationState.FailureReason == "" {
			t.Errorf("migration %s migrationState %+v, want failed with a reason", m.Name, m.Status.MigrationState)
		}
	}

	waitPrintable(t, src.Client, ns, "web", kubevirtv1.VirtualMachineStatusRunning, true)
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := get(ctx, src.Client, ns, "web", vmi); err != nil {
		t.Fatal(err)
	}
	if vmi.Status.Phase != kubevirtv1.Running || vmi.Status.MigrationState == nil || !vmi.Status.MigrationState.Failed {
		t.Errorf("source instance phase %s migrationState %+v, want Running with a failed migration", vmi.Status.Phase, vmi.Status.MigrationState)
	}
	if pods := launcherPods(t, src.Client, ns, "web"); len(pods) != 1 {
		t.Errorf("source launcher pods = %v, want the one it had", podNodes(pods))
	}

	waitPrintable(t, dst.Client, ns, "web", kubevirtv1.VirtualMachineStatusWaitingForReceiver, false)
	if err := get(ctx, dst.Client, ns, "web", vmi); err != nil {
		t.Fatal(err)
	}
	if vmi.Status.Phase != kubevirtv1.WaitingForSync || vmi.Status.MigrationState == nil || !vmi.Status.MigrationState.Failed {
		t.Errorf("receiver phase %s migrationState %+v, want WaitingForSync with a failed migration", vmi.Status.Phase, vmi.Status.MigrationState)
	}
	if err := fleetenv.Eventually(ctx, wait, func() (bool, error) { return len(launcherPods(t, dst.Client, ns, "web")) == 0, nil }); err != nil {
		t.Errorf("receiver launcher pod left after the failure: %v", err)
	}
}

// TestReceiverNeverReady: while the receiver gets no pod, the target
// migration waits in Pending, the source one in Scheduling, and the
// source VM keeps running.
func TestReceiverNeverReady(t *testing.T) {
	ns := fresh(nsReceiverNeverReady)
	src, dst, _ := liveMoveSetup(t, ns, "web", ns)
	waitMigration(t, dst.Client, ns, "web-in", kubevirtv1.MigrationPending)
	waitMigration(t, src.Client, ns, "web-out", kubevirtv1.MigrationScheduling)
	if pods := launcherPods(t, dst.Client, ns, "web"); len(pods) != 0 {
		t.Errorf("receiver that never gets ready has launcher pods %v", podNodes(pods))
	}
	waitPrintable(t, src.Client, ns, "web", kubevirtv1.VirtualMachineStatusRunning, true)
	waitPrintable(t, dst.Client, ns, "web", kubevirtv1.VirtualMachineStatusWaitingForReceiver, false)
}
