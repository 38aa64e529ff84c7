package consolelink

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
)

const console = "https://console-openshift-console.apps.prod-a.example.com"

func TestConsole(t *testing.T) {
	for name, tc := range map[string]struct {
		claims []clusterv1.ManagedClusterClaim
		want   string
	}{
		"no claims":           {},
		"other claims only":   {claims: []clusterv1.ManagedClusterClaim{{Name: ClaimOpenShiftVersion, Value: "4.21.3"}}},
		"the console's claim": {claims: []clusterv1.ManagedClusterClaim{{Name: "id.k8s.io", Value: "x"}, {Name: ClaimConsoleURL, Value: console}}, want: console},
		"trailing slash, query and fragment dropped": {
			claims: []clusterv1.ManagedClusterClaim{{Name: ClaimConsoleURL, Value: " " + console + "/?a=b#c "}}, want: console},
		"a path prefix kept":       {claims: []clusterv1.ManagedClusterClaim{{Name: ClaimConsoleURL, Value: "http://host:9000/console/"}}, want: "http://host:9000/console"},
		"not a URL":                {claims: []clusterv1.ManagedClusterClaim{{Name: ClaimConsoleURL, Value: "console.example.com"}}},
		"another scheme":           {claims: []clusterv1.ManagedClusterClaim{{Name: ClaimConsoleURL, Value: "javascript:alert(1)"}}},
		"credentials in it":        {claims: []clusterv1.ManagedClusterClaim{{Name: ClaimConsoleURL, Value: "https://u:p@host"}}},
		"a control character":      {claims: []clusterv1.ManagedClusterClaim{{Name: ClaimConsoleURL, Value: "https://host/\x1b[31m"}}},
		"empty value":              {claims: []clusterv1.ManagedClusterClaim{{Name: ClaimConsoleURL}}},
		"a space in the host":      {claims: []clusterv1.ManagedClusterClaim{{Name: ClaimConsoleURL, Value: "https://ho st"}}},
		"escapes what a path must": {claims: []clusterv1.ManagedClusterClaim{{Name: ClaimConsoleURL, Value: "https://host/a b"}}, want: "https://host/a%20b"},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Console(tc.claims)); diff != "" {
				t.Errorf("Console (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestVMAndVNC(t *testing.T) {
	for name, tc := range map[string]struct {
		console, namespace, name string
		want                     string
	}{
		"the VM's page": {console: console, namespace: "vms", name: "web",
			want: console + "/k8s/ns/vms/kubevirt.io~v1~VirtualMachine/web"},
		"a console as claimed": {console: console + "/", namespace: "vms", name: "web",
			want: console + "/k8s/ns/vms/kubevirt.io~v1~VirtualMachine/web"},
		"no console":                  {namespace: "vms", name: "web"},
		"not a URL":                   {console: "prod-a", namespace: "vms", name: "web"},
		"VM not known":                {console: console},
		"namespace missing":           {console: console, name: "web"},
		"longer than the field holds": {console: "https://" + strings.Repeat("h", MaxLength), namespace: "vms", name: "web"},
	} {
		t.Run(name, func(t *testing.T) {
			got := VM(tc.console, tc.namespace, tc.name)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("VM (-want,+got):\n%s", diff)
			}
			wantVNC := ""
			if tc.want != "" {
				wantVNC = tc.want + "/console/standalone"
			}
			if diff := cmp.Diff(wantVNC, VNC(got)); diff != "" {
				t.Errorf("VNC (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestLongestClaimFits: a claim at its longest (1,024 characters) and a VM
// of the longest names still make a link within MaxLength.
func TestLongestClaimFits(t *testing.T) {
	claim := "https://" + strings.Repeat("h", 1024-len("https://"))
	link := VM(claim, strings.Repeat("n", 63), strings.Repeat("v", 253))
	if link == "" || len(link) > MaxLength {
		t.Errorf("link of %d characters, want one within %d", len(link), MaxLength)
	}
}

func TestFleet(t *testing.T) {
	const hub = "https://console-openshift-console.apps.hub.example.com"
	for name, tc := range map[string]struct {
		console, version string
		want, wantErr    string
	}{
		"4.22: the fleet-virtualization route": {console: hub, version: "4.22.1",
			want: hub + "/fleet-virtualization/kubevirt.io~v1~VirtualMachine/cluster/prod-a/ns/vms/web"},
		"a release candidate": {console: hub, version: "4.22.0-rc.1",
			want: hub + "/fleet-virtualization/kubevirt.io~v1~VirtualMachine/cluster/prod-a/ns/vms/web"},
		"a later major version": {console: hub, version: "5.0.0",
			want: hub + "/fleet-virtualization/kubevirt.io~v1~VirtualMachine/cluster/prod-a/ns/vms/web"},
		"4.21: the cluster route": {console: hub, version: "4.21.3",
			want: hub + "/k8s/cluster/prod-a/ns/vms/kubevirt.io~v1~VirtualMachine/web"},
		"4.20": {console: hub + "/", version: "4.20.0",
			want: hub + "/k8s/cluster/prod-a/ns/vms/kubevirt.io~v1~VirtualMachine/web"},
		"4.19 has none":   {console: hub, version: "4.19.9", wantErr: "comes with OpenShift Virtualization 4.20"},
		"OpenShift 3":     {console: hub, version: "3", wantErr: "comes with OpenShift Virtualization 4.20"},
		"version unknown": {console: hub, wantErr: "is not known"},
		"not a version":   {console: hub, version: "latest", wantErr: "is not known"},
		"no console":      {version: "4.22.1", wantErr: "claims no console URL"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Fleet(tc.console, tc.version, "prod-a", "vms", "web")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Fleet = %q, %v; want an error saying %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Fleet (-want,+got):\n%s", diff)
			}
		})
	}
}
