package kubectlfleetvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/consolelink"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
)

// kubevirtConsolePlugin is the ConsolePlugin OpenShift Virtualization
// installs (console.openshift.io/v1): the console plugin that draws the
// VM pages, the VNC console and, on an ACM hub, the Fleet Virtualization
// perspective.
const kubevirtConsolePlugin = "kubevirt-plugin"

var consolePluginGVK = schema.GroupVersionKind{Group: "console.openshift.io", Version: "v1", Kind: "ConsolePlugin"}

// fewClusters: up to this many ManagedClusters are read one by one; more
// are listed at once.
const fewClusters = 10

type consoleOptions struct {
	cluster          string
	vnc, fleet, open bool
}

func newConsoleCommand(o *options) *cobra.Command {
	co := &consoleOptions{}
	cmd := &cobra.Command{
		Use:   "console NAME",
		Short: "Print or open the web console link of every copy of a FleetVirtualMachine",
		Long: `console prints, one line per cluster, the link to each copy's VM page on the web
console of the cluster it runs on: OpenShift Virtualization's VirtualMachine page
on the console the cluster claims (its consoleurl.cluster.open-cluster-management.io
cluster claim, which ACM's klusterlet reports on OpenShift clusters). The links
are the hub's (status.clusters[].consoleURL); for the entries a large fleet keeps
compact, and where the hub gave none, they are made the same way from the
ManagedCluster's claim, which needs read access to ManagedClusters.

--vnc links to the VM's standalone VNC console instead. --fleet links to the
copy in the Fleet Virtualization perspective of the hub's own console: the hub
must manage itself as ACM's local-cluster (its console URL and OpenShift version
are that ManagedCluster's claims) and run OpenShift Virtualization 4.20 or later
(ConsolePlugin kubevirt-plugin). With --cluster, only that cluster's copy: the
link alone, for scripts. --open also opens the link in the browser (xdg-open,
or open on macOS): give --cluster when there is more than one copy.`,
		Example: `  # each copy's VM page, cluster by cluster
  kubectl fleetvm console -n vms rhel9

  # the VNC console of the copy on prod-a, in the browser
  kubectl fleetvm console -n vms rhel9 --cluster prod-a --vnc --open

  # the copy on prod-a in the hub console's Fleet Virtualization perspective
  kubectl fleetvm console -n vms rhel9 --cluster prod-a --fleet`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.complete(); err != nil {
				return err
			}
			return o.console(cmd.Context(), args[0], co)
		},
	}
	cmd.Flags().StringVar(&co.cluster, "cluster", "", "Only the copy on this managed cluster; the link alone.")
	cmd.Flags().BoolVar(&co.vnc, "vnc", false, "Link to the VM's standalone VNC console instead of its page.")
	cmd.Flags().BoolVar(&co.fleet, "fleet", false, "Link to the copy in the Fleet Virtualization perspective of the hub's console.")
	cmd.Flags().BoolVar(&co.open, "open", false, "Open the link in the browser too.")
	cmd.MarkFlagsMutuallyExclusive("vnc", "fleet")
	return cmd
}

// copyLink is the link to one copy, or why there is none.
type copyLink struct {
	cluster, url, missing string
}

func (o *options) console(ctx context.Context, name string, co *consoleOptions) error {
	fvm := &fleetv1alpha1.FleetVirtualMachine{}
	if err := o.client.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: name}, fvm); err != nil {
		return explainError(err, kindFVM, o.namespace, name)
	}
	entries := fvm.Status.Clusters
	if co.cluster != "" {
		entries = slices.DeleteFunc(slices.Clone(entries), func(c fleetv1alpha1.ClusterStatus) bool { return c.Cluster != co.cluster })
		if len(entries) == 0 {
			return fmt.Errorf("FleetVirtualMachine %s/%s has no copy on cluster %q (status.clusters): kubectl fleetvm status -n %s %s lists its clusters",
				fvm.Namespace, fvm.Name, co.cluster, fvm.Namespace, fvm.Name)
		}
	}
	switch {
	case len(entries) == 0:
		return fmt.Errorf("FleetVirtualMachine %s/%s has no copies yet: the placement has decided no cluster", fvm.Namespace, fvm.Name)
	case co.open && len(entries) > 1:
		return fmt.Errorf("--open opens one copy's console: give --cluster (%s has copies on %s)", fvm.Name, joinClusters(entries))
	}
	fvm.Status.Clusters = entries

	links, err := o.copyLinks(ctx, fvm, co)
	if err != nil {
		return err
	}
	if co.cluster != "" {
		l := links[0]
		if l.url == "" {
			return fmt.Errorf("no console link for the copy on %s: %s", l.cluster, l.missing)
		}
		_, _ = fmt.Fprintln(o.out, cell(l.url))
		if co.open {
			return o.openURL(l.url)
		}
		return nil
	}
	if err := writeLinks(o.out, links); err != nil {
		return err
	}
	for _, l := range links {
		if l.url == "" {
			_, _ = fmt.Fprintf(o.errOut, "No link for the copy on %s: %s\n", l.cluster, l.missing)
		}
	}
	if !co.open {
		return nil
	}
	if links[0].url == "" {
		return fmt.Errorf("nothing to open: no console link for the copy on %s", links[0].cluster)
	}
	return o.openURL(links[0].url)
}

// copyLinks makes the link to each copy of fvm.Status.Clusters, in order.
func (o *options) copyLinks(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, co *consoleOptions) ([]copyLink, error) {
	links := make([]copyLink, len(fvm.Status.Clusters))
	if co.fleet {
		hubConsole, hubVersion, err := o.hubConsole(ctx)
		if err != nil {
			return nil, err
		}
		vmOn, err := o.vmNames(ctx, fvm)
		if err != nil {
			return nil, fmt.Errorf("read the VM's name on the clusters: %w", err)
		}
		for i, c := range fvm.Status.Clusters {
			vm := vmOn(c.Cluster)
			links[i].cluster = c.Cluster
			if vm.Name == "" {
				links[i].missing = "the VM's name there is not known yet: its agent has not reported it"
				continue
			}
			url, err := consolelink.Fleet(hubConsole, hubVersion, c.Cluster, vm.Namespace, vm.Name)
			if err != nil {
				return nil, fmt.Errorf("no Fleet Virtualization link: %w", err)
			}
			links[i].url = url
		}
		return links, nil
	}

	fillErr := o.fillConsoles(ctx, fvm, func(fleetv1alpha1.ClusterStatus) bool { return true })
	for i, c := range fvm.Status.Clusters {
		links[i] = copyLink{cluster: c.Cluster, url: c.ConsoleURL}
		if co.vnc {
			links[i].url = consolelink.VNC(c.ConsoleURL)
		}
		switch {
		case links[i].url != "":
		case fillErr != nil:
			links[i].missing = fmt.Sprintf("the status has none, and it cannot be made from the cluster's claim: %v", fillErr)
		default:
			links[i].missing = fmt.Sprintf("the cluster claims no console URL (%s): not an OpenShift cluster, or its klusterlet does not report the claim", consolelink.ClaimConsoleURL)
		}
	}
	return links, nil
}

// fillConsoles makes, for the entries that match and have no consoleURL,
// the link the hub makes (consolelink.VM) from the console URL their
// cluster's ManagedCluster claims.
func (o *options) fillConsoles(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, which func(fleetv1alpha1.ClusterStatus) bool) error {
	var need []int
	for i, c := range fvm.Status.Clusters {
		if c.ConsoleURL == "" && which(c) {
			need = append(need, i)
		}
	}
	if len(need) == 0 {
		return nil
	}
	consoles := map[string]string{}
	if len(need) <= fewClusters {
		for _, i := range need {
			name := fvm.Status.Clusters[i].Cluster
			mc := &clusterv1.ManagedCluster{}
			switch err := o.client.Get(ctx, client.ObjectKey{Name: name}, mc); {
			case apierrors.IsNotFound(err):
			case err != nil:
				return fmt.Errorf("get ManagedCluster %s: %w", name, err)
			default:
				consoles[name] = consolelink.Console(mc.Status.ClusterClaims)
			}
		}
	} else {
		clusters := &clusterv1.ManagedClusterList{}
		if err := o.client.List(ctx, clusters); err != nil {
			return fmt.Errorf("list ManagedClusters: %w", err)
		}
		for _, mc := range clusters.Items {
			consoles[mc.Name] = consolelink.Console(mc.Status.ClusterClaims)
		}
	}
	vmOn, err := o.vmNames(ctx, fvm)
	if err != nil {
		return fmt.Errorf("read the VM's name on the clusters: %w", err)
	}
	for _, i := range need {
		c := &fvm.Status.Clusters[i]
		vm := vmOn(c.Cluster)
		c.ConsoleURL = consolelink.VM(consoles[c.Cluster], vm.Namespace, vm.Name)
	}
	return nil
}

// vmNames tells the VM's namespace and name on a cluster: the one the hub
// delivers from an inline template, else the one the cluster's agent
// reports (a git source's VM: read from the VMReports, one list call).
func (o *options) vmNames(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) (func(cluster string) types.NamespacedName, error) {
	if _, inline := vmclaim.Key(fvm); inline {
		vm := vmclaim.Identity(fvm)
		return func(string) types.NamespacedName { return vm }, nil
	}
	reported, err := o.reportedVMs(ctx, fvm)
	if err != nil {
		return nil, err
	}
	return func(cluster string) types.NamespacedName {
		vm := reported[cluster]
		return types.NamespacedName{Namespace: vm.Namespace, Name: vm.Name}
	}, nil
}

// hubConsole reads the hub's console URL and OpenShift version: the
// claims of the ManagedCluster that is the hub itself (labelled
// local-cluster=true), once the hub is shown to have OpenShift
// Virtualization's console plugin.
func (o *options) hubConsole(ctx context.Context) (console, version string, err error) {
	clusters := &clusterv1.ManagedClusterList{}
	if err := o.client.List(ctx, clusters, client.MatchingLabels{consolelink.LocalClusterLabel: "true"}); err != nil {
		return "", "", fmt.Errorf("list the ManagedCluster labelled %s=true (the hub itself): %w", consolelink.LocalClusterLabel, err)
	}
	switch n := len(clusters.Items); {
	case n == 0:
		return "", "", fmt.Errorf("no Fleet Virtualization link: no ManagedCluster is labelled %s=true, so the hub does not manage itself (ACM's local-cluster) and its console is not known",
			consolelink.LocalClusterLabel)
	case n > 1:
		var names []string
		for _, mc := range clusters.Items {
			names = append(names, mc.Name)
		}
		return "", "", fmt.Errorf("no Fleet Virtualization link: %d ManagedClusters are labelled %s=true (%s), so which is the hub is not known",
			n, consolelink.LocalClusterLabel, strings.Join(names, ", "))
	}
	if err := o.hasFleetVirtualization(ctx); err != nil {
		return "", "", fmt.Errorf("no Fleet Virtualization link: %w", err)
	}
	claims := clusters.Items[0].Status.ClusterClaims
	return consolelink.Claim(claims, consolelink.ClaimConsoleURL), consolelink.Claim(claims, consolelink.ClaimOpenShiftVersion), nil
}

// hasFleetVirtualization tells whether the hub's console can have the Fleet
// Virtualization perspective: OpenShift Virtualization's console plugin is
// installed on the hub. A user who may not read ConsolePlugins is given
// the link all the same.
func (o *options) hasFleetVirtualization(ctx context.Context) error {
	plugin := &unstructured.Unstructured{}
	plugin.SetGroupVersionKind(consolePluginGVK)
	err := o.client.Get(ctx, client.ObjectKey{Name: kubevirtConsolePlugin}, plugin)
	switch {
	case err == nil, apierrors.IsForbidden(err):
		return nil
	case meta.IsNoMatchError(err) || isCRDMissing(err):
		return errors.New("the hub has no OpenShift console (no console.openshift.io ConsolePlugins), so no Fleet Virtualization perspective")
	case apierrors.IsNotFound(err):
		return fmt.Errorf("OpenShift Virtualization's console plugin (ConsolePlugin %s) is not installed on the hub: its console has no Fleet Virtualization perspective",
			kubevirtConsolePlugin)
	}
	return fmt.Errorf("get ConsolePlugin %s: %w", kubevirtConsolePlugin, err)
}

// writeLinks prints one line per copy: its cluster and its link.
func writeLinks(out io.Writer, links []copyLink) error {
	tw := newTable(out)
	row(tw, "CLUSTER", "URL")
	for _, l := range links {
		row(tw, l.cluster, l.url)
	}
	return tw.Flush()
}

func joinClusters(entries []fleetv1alpha1.ClusterStatus) string {
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Cluster)
	}
	return strings.Join(names, ", ")
}

// openInBrowser opens url with the desktop's opener. The URL is one
// argument, never read by a shell; consolelink only makes http(s) URLs.
func openInBrowser(url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		cmd = exec.Command("xdg-open", url)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("open the link with %s: %w: %s", cmd.Args[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}
