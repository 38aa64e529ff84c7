package kubectlfleetvm

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

const kindFDI = "FleetDiskImage"

func newImagesCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images [NAME]",
		Short: "Show FleetDiskImages: on which clusters, and how many VMs use them there",
		Long: `images lists FleetDiskImages with one row per cluster the image is on: its
phase there, the import progress, and the VMs on that cluster that use it
(every VM, fleet-managed or not), then the totals per image.`,
		Example: `  kubectl fleetvm images -n vms
  kubectl fleetvm images -A`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.complete(); err != nil {
				return err
			}
			var images []fleetv1alpha1.FleetDiskImage
			if len(args) == 1 {
				if o.allNamespaces {
					return fmt.Errorf("a NAME and --all-namespaces do not go together: give -n NAMESPACE instead")
				}
				fdi := &fleetv1alpha1.FleetDiskImage{}
				if err := o.client.Get(cmd.Context(), client.ObjectKey{Namespace: o.namespace, Name: args[0]}, fdi); err != nil {
					return explainError(err, kindFDI, o.namespace, args[0])
				}
				images = append(images, *fdi)
			} else {
				var err error
				if images, err = o.listImages(cmd.Context()); err != nil {
					return err
				}
			}
			if len(images) == 0 {
				_, _ = fmt.Fprintln(o.errOut, noneFound("FleetDiskImages", o.listNamespace()))
				return nil
			}
			return writeImages(o.out, images, o.allNamespaces, o.now())
		},
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List FleetDiskImages in all namespaces.")
	return cmd
}

func (o *options) listImages(ctx context.Context) ([]fleetv1alpha1.FleetDiskImage, error) {
	list := &fleetv1alpha1.FleetDiskImageList{}
	if err := o.client.List(ctx, list, client.InNamespace(o.listNamespace())); err != nil {
		return nil, explainError(err, kindFDI, o.listNamespace(), "")
	}
	return list.Items, nil
}

// writeImages prints one row per image and cluster, then one row of totals
// per image and a grand total.
func writeImages(out io.Writer, images []fleetv1alpha1.FleetDiskImage, allNamespaces bool, now time.Time) error {
	images = slices.Clone(images)
	slices.SortFunc(images, func(a, b fleetv1alpha1.FleetDiskImage) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	withNS := func(ns string, cells ...string) []string {
		if allNamespaces {
			return append([]string{ns}, cells...)
		}
		return cells
	}

	tw := newTable(out)
	row(tw, withNS("NAMESPACE", "IMAGE", "CLUSTER", "PHASE", "PROGRESS", "REFERENCES", "LAST USED", "USED BY")...)
	for _, img := range images {
		if len(img.Status.Clusters) == 0 {
			row(tw, withNS(img.Namespace, img.Name, none, "NotOnAnyCluster", none, "0", none, none)...)
			continue
		}
		clusters := slices.Clone(img.Status.Clusters)
		slices.SortFunc(clusters, func(a, b fleetv1alpha1.ImageClusterStatus) int { return strings.Compare(a.Cluster, b.Cluster) })
		for _, c := range clusters {
			row(tw, withNS(img.Namespace, img.Name, c.Cluster, string(c.Phase), c.Progress, itoa(c.References),
				age(now, c.LastReferencedTime), usedBy(c))...)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	_, _ = fmt.Fprintln(out)
	tw = newTable(out)
	row(tw, withNS("NAMESPACE", "IMAGE", "CLUSTERS", "READY", "REFERENCES", "IN USE")...)
	var refs int32
	for _, img := range images {
		t := img.Status.Totals
		refs += t.References
		row(tw, withNS(img.Namespace, img.Name, itoa(t.Clusters), itoa(t.Ready), itoa(t.References), inUse(&img))...)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(out, "\nTotal: %d images, %d references\n", len(images), refs)
	return nil
}

// usedBy names the VMs the status names, and how many more there are.
func usedBy(c fleetv1alpha1.ImageClusterStatus) string {
	s := strings.Join(c.Users, ",")
	if more := int(c.References) - len(c.Users); more > 0 && len(c.Users) > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

func inUse(img *fleetv1alpha1.FleetDiskImage) string {
	if c := meta.FindStatusCondition(img.Status.Conditions, fleetv1alpha1.ConditionInUse); c != nil {
		return string(c.Status)
	}
	return none
}
