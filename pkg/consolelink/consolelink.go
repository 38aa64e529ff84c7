// Package consolelink builds the web console links of a VM's copies: the
// VM's page, and its VNC console, on the console of the cluster it runs on
// (the OpenShift console with OpenShift Virtualization's plugin), and its
// page in the Fleet Virtualization perspective of the hub's console (Red
// Hat Advanced Cluster Management). Where a console is comes from the
// ManagedCluster's claims. The hub (status.clusters[].consoleURL) and
// kubectl fleetvm use the same rules.
package consolelink

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	clusterv1 "open-cluster-management.io/api/cluster/v1"
)

const (
	// ClaimConsoleURL is the cluster claim that holds the cluster's web
	// console URL. ACM's klusterlet (its work manager) writes it as a
	// ClusterClaim on every OpenShift cluster, from the console's own
	// configuration; OCM's registration agent copies it into the
	// ManagedCluster's status.clusterClaims.
	ClaimConsoleURL = "consoleurl.cluster.open-cluster-management.io"
	// ClaimOpenShiftVersion is the cluster claim that holds the cluster's
	// OpenShift version ("4.21.3"), written the same way.
	ClaimOpenShiftVersion = "version.openshift.io"
	// LocalClusterLabel, "true", marks the ManagedCluster that is the hub
	// itself (ACM's local-cluster): its claims are the hub's.
	LocalClusterLabel = "local-cluster"
	// MaxLength is the longest link status.clusters[].consoleURL holds:
	// a longer one is left out. A claim holds at most 1,024 characters,
	// so a link to a VM of any valid name fits.
	MaxLength = 2048
)

// vmPath is the path segment of KubeVirt VirtualMachines on the console:
// the console addresses a custom resource by group~version~kind.
const vmPath = "kubevirt.io~v1~VirtualMachine"

// Claim returns the value of the named claim, "" when the cluster does
// not claim it.
func Claim(claims []clusterv1.ManagedClusterClaim, name string) string {
	for _, c := range claims {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// Console returns the console URL the cluster claims, as an absolute
// http(s) URL without a trailing slash, query or fragment; "" when it
// claims none or not a URL a link can start with.
func Console(claims []clusterv1.ManagedClusterClaim) string {
	return base(Claim(claims, ClaimConsoleURL))
}

func base(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Opaque != "" {
		return ""
	}
	return u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/")
}

// VM returns the link to the VM's page on a cluster's console (console as
// Console returns it): the VirtualMachine details page of OpenShift
// Virtualization's console plugin, /k8s/ns/NAMESPACE/kubevirt.io~v1~VirtualMachine/NAME.
// "" when console is empty, the VM is not known, or the link would be
// longer than MaxLength.
func VM(console, namespace, name string) string {
	console = base(console)
	if console == "" || namespace == "" || name == "" {
		return ""
	}
	link := console + "/k8s/ns/" + url.PathEscape(namespace) + "/" + vmPath + "/" + url.PathEscape(name)
	if len(link) > MaxLength {
		return ""
	}
	return link
}

// VNC returns the link to the standalone VNC console of the VM whose page
// is vmPage (as VM returns it): the plugin's route
// /k8s/ns/NAMESPACE/kubevirt.io~v1~VirtualMachine/NAME/console/standalone.
// "" when vmPage is.
func VNC(vmPage string) string {
	if vmPage == "" {
		return ""
	}
	return vmPage + "/console/standalone"
}

// Fleet returns the link to the VM's copy on cluster in the Fleet
// Virtualization perspective of the hub's console, which OpenShift
// Virtualization's console plugin draws on an ACM hub. hubConsole and
// hubVersion are the hub's console URL and OpenShift version (the claims
// of its local-cluster). The plugin ships with OpenShift Virtualization,
// one release per OpenShift minor version, and its route changed:
//
//   - 4.22 and later: /fleet-virtualization/kubevirt.io~v1~VirtualMachine/cluster/CLUSTER/ns/NAMESPACE/NAME
//   - 4.20 and 4.21:  /k8s/cluster/CLUSTER/ns/NAMESPACE/kubevirt.io~v1~VirtualMachine/NAME
//
// Before 4.20 there is no Fleet Virtualization perspective. The error
// says why there is no link.
func Fleet(hubConsole, hubVersion, cluster, namespace, name string) (string, error) {
	console := base(hubConsole)
	if console == "" {
		return "", fmt.Errorf("the hub claims no console URL (%s)", ClaimConsoleURL)
	}
	if cluster == "" || namespace == "" || name == "" {
		return "", fmt.Errorf("the VM's cluster, namespace or name is not known")
	}
	major, minor, ok := openShiftVersion(hubVersion)
	switch {
	case !ok:
		return "", fmt.Errorf("the hub's OpenShift version %q (claim %s) is not known: the Fleet Virtualization route depends on it", hubVersion, ClaimOpenShiftVersion)
	case major < 4 || major == 4 && minor < 20:
		return "", fmt.Errorf("the hub runs OpenShift %s: the Fleet Virtualization perspective comes with OpenShift Virtualization 4.20", hubVersion)
	}
	c, ns, n := url.PathEscape(cluster), url.PathEscape(namespace), url.PathEscape(name)
	if major == 4 && minor < 22 {
		return console + "/k8s/cluster/" + c + "/ns/" + ns + "/" + vmPath + "/" + n, nil
	}
	return console + "/fleet-virtualization/" + vmPath + "/cluster/" + c + "/ns/" + ns + "/" + n, nil
}

// openShiftVersion returns the major and minor version of an OpenShift
// version ("4.21.3", "4.22.0-rc.1"; "3" for OpenShift 3).
func openShiftVersion(version string) (major, minor int, ok bool) {
	ma, rest, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(version), "v"), ".")
	mi, _, _ := strings.Cut(rest, ".")
	major, err := strconv.Atoi(ma)
	if err != nil || major < 0 {
		return 0, 0, false
	}
	if mi == "" {
		return major, 0, true
	}
	minor, err = strconv.Atoi(mi)
	return major, minor, err == nil && minor >= 0
}
