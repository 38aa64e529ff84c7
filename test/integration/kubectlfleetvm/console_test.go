package kubectlfleetvm

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/consolelink"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// consoleOf is the console URL a test cluster claims.
func consoleOf(cluster string) string {
	return "https://console-openshift-console.apps." + cluster + ".example.com"
}

// claimingCluster creates a ManagedCluster with the given claims in its
// status, as OCM's registration agent writes them from the spoke's
// ClusterClaims.
func claimingCluster(t *testing.T, name string, labels map[string]string, claims ...clusterv1.ManagedClusterClaim) {
	t.Helper()
	mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}
	create(t, mc)
	mc.Status.ClusterClaims = claims
	if err := fleet.Hub.Client.Status().Update(t.Context(), mc); err != nil {
		t.Fatal(err)
	}
}

// TestConsole: kubectl fleetvm status and console link every copy to its
// VM's page on its cluster's console: the link the hub wrote in the
// status, or for a compact entry the one made the hub's way from the
// ManagedCluster's claim; --vnc the VNC console; --fleet the hub console's
// Fleet Virtualization perspective, once the hub shows it has one.
func TestConsole(t *testing.T) {
	ns := namespace(t, "console")
	create(t, utiltesting.MakeFleetVM(ns, "web").VM(2, "4Gi").VMName("web-vm").Clusters(3).ClusterSets("default").Obj())
	claimingCluster(t, "console-a", nil, clusterv1.ManagedClusterClaim{Name: consolelink.ClaimConsoleURL, Value: consoleOf("console-a")})
	claimingCluster(t, "console-b", nil, clusterv1.ManagedClusterClaim{Name: "product.open-cluster-management.io", Value: "EKS"})
	claimingCluster(t, "console-c", nil, clusterv1.ManagedClusterClaim{Name: consolelink.ClaimConsoleURL, Value: consoleOf("console-c") + "/"})
	pageOn := func(cluster string) string {
		return consoleOf(cluster) + "/k8s/ns/console/kubevirt.io~v1~VirtualMachine/web-vm"
	}
	base := get(t, ns, "web").CreationTimestamp
	at := metav1.NewTime(base.Add(time.Minute))
	running := fleetv1alpha1.ClusterStatus{Environment: "prod", Phase: fleetv1alpha1.ClusterPhaseRunning, PrintableStatus: "Running", Ready: true,
		Node: "node-1", SyncStatus: "Synced", Health: "Healthy", LastTransitionTime: &at}
	a, b := running, running
	a.Cluster, a.ConsoleURL = "console-a", pageOn("console-a")                                                                         // as the hub writes it
	b.Cluster = "console-b"                                                                                                            // its cluster claims no console
	c := fleetv1alpha1.ClusterStatus{Cluster: "console-c", Environment: "prod", Phase: fleetv1alpha1.ClusterPhaseRunning, Ready: true} // compact
	placeOn(t, ns, "web", a, b, c)
	now := base.Add(10 * time.Minute)

	t.Run("status shows each copy's link", func(t *testing.T) {
		r := kubectl(t, now, "status", "-n", ns, "web")
		if r.err != nil {
			t.Fatalf("status: %v\n%s", r.err, r.errOut)
		}
		want := `FleetVirtualMachine console/web  runStrategy Always  generation 1, status observed 1

CLUSTER    ENV   PHASE    READY  NODE    IPS  SYNC/HEALTH     SINCE  MESSAGE
console-a  prod  Running  true   node-1  -    Synced/Healthy  9m     -
console-b  prod  Running  true   node-1  -    Synced/Healthy  9m     -
console-c  prod  Running  true   -       -    -               -      -

CLUSTER    CONSOLE
console-a  ` + pageOn("console-a") + `
console-b  -
console-c  ` + pageOn("console-c") + `

Summary: desired 0, placed 0, ready 0, running 0, stopped 0, failed 0, unknown 0
`
		if diff := cmp.Diff(want, lines(r.out)); diff != "" {
			t.Errorf("output (-want,+got):\n%s", diff)
		}
	})

	t.Run("console: one line per copy, why one has none", func(t *testing.T) {
		r := kubectl(t, now, "console", "-n", ns, "web")
		if r.err != nil {
			t.Fatalf("console: %v\n%s", r.err, r.errOut)
		}
		want := `CLUSTER    URL
console-a  ` + pageOn("console-a") + `
console-b  -
console-c  ` + pageOn("console-c") + `
`
		if diff := cmp.Diff(want, lines(r.out)); diff != "" {
			t.Errorf("output (-want,+got):\n%s", diff)
		}
		if !strings.Contains(r.errOut, "No link for the copy on console-b: the cluster claims no console URL") {
			t.Errorf("stderr does not say why console-b has no link:\n%s", r.errOut)
		}
	})

	t.Run("one cluster's VNC console, opened", func(t *testing.T) {
		r := kubectl(t, now, "console", "-n", ns, "web", "--cluster", "console-c", "--vnc", "--open")
		if r.err != nil {
			t.Fatalf("console: %v\n%s", r.err, r.errOut)
		}
		want := pageOn("console-c") + "/console/standalone\n"
		if r.out != want || r.opened != want {
			t.Errorf("printed %q and opened %q, want %q both", r.out, r.opened, want)
		}
	})

	for name, tc := range map[string]struct {
		args    []string
		wantErr string
	}{
		"no copy on the cluster":      {args: []string{"--cluster", "prod-z"}, wantErr: `has no copy on cluster "prod-z"`},
		"a cluster without a console": {args: []string{"--cluster", "console-b"}, wantErr: "no console link for the copy on console-b: the cluster claims no console URL"},
		"--open with several copies":  {args: []string{"--open"}, wantErr: "give --cluster"},
		"--vnc and --fleet exclusive": {args: []string{"--vnc", "--fleet"}, wantErr: "none of the others can be"},
		"--fleet on an unmanaged hub": {args: []string{"--fleet"}, wantErr: "no ManagedCluster is labelled local-cluster=true"},
	} {
		t.Run(name, func(t *testing.T) {
			r := kubectl(t, now, append([]string{"console", "-n", ns, "web"}, tc.args...)...)
			if r.err == nil || !strings.Contains(r.err.Error(), tc.wantErr) {
				t.Errorf("error = %v, want one saying %q\nstdout:\n%s", r.err, tc.wantErr, r.out)
			}
			if r.opened != "" {
				t.Errorf("opened %q", r.opened)
			}
		})
	}

	t.Run("--fleet once the hub has Fleet Virtualization", func(t *testing.T) {
		const hubConsole = "https://console-openshift-console.apps.hub.example.com"
		claimingCluster(t, "local-cluster", map[string]string{consolelink.LocalClusterLabel: "true"},
			clusterv1.ManagedClusterClaim{Name: consolelink.ClaimConsoleURL, Value: hubConsole},
			clusterv1.ManagedClusterClaim{Name: consolelink.ClaimOpenShiftVersion, Value: "4.22.1"})
		fleetArgs := []string{"console", "-n", ns, "web", "--fleet", "--cluster", "console-b"}

		r := kubectl(t, now, fleetArgs...)
		if want := "the hub has no OpenShift console"; r.err == nil || !strings.Contains(r.err.Error(), want) {
			t.Errorf("without the console's API: error = %v, want one saying %q", r.err, want)
		}
		installConsolePluginCRD(t)
		r = kubectl(t, now, fleetArgs...)
		if want := "ConsolePlugin kubevirt-plugin) is not installed on the hub"; r.err == nil || !strings.Contains(r.err.Error(), want) {
			t.Errorf("without OpenShift Virtualization's plugin: error = %v, want one saying %q", r.err, want)
		}
		plugin := &unstructured.Unstructured{}
		plugin.SetAPIVersion("console.openshift.io/v1")
		plugin.SetKind("ConsolePlugin")
		plugin.SetName("kubevirt-plugin")
		create(t, plugin)

		r = kubectl(t, now, fleetArgs...)
		if r.err != nil {
			t.Fatalf("console --fleet: %v\n%s", r.err, r.errOut)
		}
		// The copy on a cluster that claims no console has its page on the hub's.
		want := hubConsole + "/fleet-virtualization/kubevirt.io~v1~VirtualMachine/cluster/console-b/ns/console/web-vm\n"
		if r.out != want {
			t.Errorf("printed %q, want %q", r.out, want)
		}
	})
}

// installConsolePluginCRD installs a stand-in for the OpenShift console's
// ConsolePlugin CRD (console.openshift.io/v1, cluster-scoped, any spec)
// and waits until the API server serves it.
func installConsolePluginCRD(t *testing.T) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "consoleplugins.console.openshift.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "console.openshift.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "consoleplugins", Singular: "consoleplugin", Kind: "ConsolePlugin", ListKind: "ConsolePluginList"},
			Scope: apiextensionsv1.ClusterScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
	create(t, crd)
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKeyFromObject(crd), got); err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("ConsolePlugin CRD never established: %v", err)
	}
}
