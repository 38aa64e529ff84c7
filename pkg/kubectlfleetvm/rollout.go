package kubectlfleetvm

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/rollout"
)

// newRolloutCommand is kubectl fleetvm rollout: the verbs of kubectl
// rollout, for a FleetVirtualMachine with spec.rollout.
func newRolloutCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Status, pause, resume, abort, undo and history of a FleetVirtualMachine's rollout",
		Long: `rollout acts on the rollout of a FleetVirtualMachine with spec.rollout, as kubectl
rollout does for a Deployment. Every change of spec.template or spec.diskImages is
a revision (a ControllerRevision beside the FleetVirtualMachine); the hub gives it
to the clusters as spec.rollout allows.`,
	}
	run := func(f func(ctx context.Context, name string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			if err := o.complete(); err != nil {
				return err
			}
			return f(cmd.Context(), args[0])
		}
	}
	var toRevision int64
	undo := &cobra.Command{
		Use:   "undo NAME",
		Short: "Roll back to a revision: its template and disk images become the spec again, a new revision",
		Long: `undo puts the template and disk images of an earlier revision (the previous one,
or --to-revision) back into the spec, only while the object is as read (a JSON
patch that tests its resourceVersion): a change made since it was read is never
overwritten. As with a Deployment, that is a new revision, rolled out as
spec.rollout says.`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, name string) error { return o.rolloutUndo(ctx, name, toRevision) }),
	}
	undo.Flags().Int64Var(&toRevision, "to-revision", 0, "The revision to roll back to (default: the previous one).")
	cmd.AddCommand(
		&cobra.Command{
			Use: "status NAME", Short: "Where the rollout stands, and the clusters that have not succeeded on the latest revision",
			Args: cobra.ExactArgs(1), RunE: run(o.rolloutStatus),
		},
		&cobra.Command{
			Use: "pause NAME", Short: "Give no other cluster the latest revision until resumed (annotation " + fleetv1alpha1.AnnotationRolloutPaused + ")",
			Args: cobra.ExactArgs(1), RunE: run(func(ctx context.Context, name string) error {
				return o.annotateRollout(ctx, name, fleetv1alpha1.AnnotationRolloutPaused, "true", "paused")
			}),
		},
		&cobra.Command{
			Use: "resume NAME", Short: "Resume a paused rollout",
			Args: cobra.ExactArgs(1), RunE: run(func(ctx context.Context, name string) error {
				return o.annotateRollout(ctx, name, fleetv1alpha1.AnnotationRolloutPaused, "", "resumed")
			}),
		},
		&cobra.Command{
			Use:   "abort NAME",
			Short: "Give every cluster that has the latest revision the previous one again (annotation " + fleetv1alpha1.AnnotationRolloutAbort + ")",
			Args:  cobra.ExactArgs(1), RunE: run(o.rolloutAbort),
		},
		undo,
		&cobra.Command{
			Use: "history NAME", Short: "The revisions kept",
			Args: cobra.ExactArgs(1), RunE: run(o.rolloutHistory),
		},
	)
	return cmd
}

// getRolling reads the FleetVirtualMachine, which must have spec.rollout.
func (o *options) getRolling(ctx context.Context, name string) (*fleetv1alpha1.FleetVirtualMachine, error) {
	fvm := &fleetv1alpha1.FleetVirtualMachine{}
	if err := o.client.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: name}, fvm); err != nil {
		return nil, explainError(err, kindFVM, o.namespace, name)
	}
	if fvm.Spec.Rollout == nil {
		return nil, fmt.Errorf("%s/%s has no spec.rollout: a change reaches every cluster at once and no revision is kept", o.namespace, name)
	}
	return fvm, nil
}

func (o *options) rolloutStatus(ctx context.Context, name string) error {
	fvm, err := o.getRolling(ctx, name)
	if err != nil {
		return err
	}
	st := fvm.Status.Rollout
	if st == nil {
		_, _ = fmt.Fprintf(o.out, "%s/%s: no revision recorded yet\n", o.namespace, name)
		return nil
	}
	placed := len(activeClusters(fvm))
	_, _ = fmt.Fprintf(o.out, "revision %d (previous %d): %s, %d of %d clusters updated, %d failed\n",
		st.Revision, st.PreviousRevision, orUnknown(string(st.Phase)), st.Updated, placed, st.Failures)
	if fvm.Annotations[fleetv1alpha1.AnnotationRolloutPaused] == "true" {
		_, _ = fmt.Fprintln(o.out, "paused (kubectl fleetvm rollout resume "+name+")")
	}
	if st.Message != "" {
		_, _ = fmt.Fprintln(o.out, st.Message)
	}
	why, err := o.explainRollout(ctx, fvm)
	if err != nil {
		return err
	}
	if why.note != "" {
		_, _ = fmt.Fprintln(o.out, why.note)
	}
	return writeRolloutClusters(o.out, fvm, why, o.now())
}

// writeRolloutClusters prints one row per cluster the rollout has not
// finished with (those with a record): its revision, state, decision
// group (when the strategy reads groups), since when, and why, in the
// hub's rule's words.
func writeRolloutClusters(out io.Writer, fvm *fleetv1alpha1.FleetVirtualMachine, why rolloutWhy, now time.Time) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := false
	for _, c := range fvm.Status.Clusters {
		r := c.Rollout
		if r == nil {
			continue
		}
		if !header {
			_, _ = fmt.Fprint(tw, "CLUSTER\tREVISION\tSTATE\t")
			if why.groups != nil {
				_, _ = fmt.Fprint(tw, "GROUP\t")
			}
			_, _ = fmt.Fprintln(tw, "SINCE\tREADY SINCE\tWHY")
			header = true
		}
		_, _ = fmt.Fprintf(tw, "%s\t%d\t%s\t", c.Cluster, r.Revision, r.State)
		if why.groups != nil {
			g, ok := why.groups[c.Cluster]
			_, _ = fmt.Fprintf(tw, "%s\t", map[bool]string{true: groupLabel(g), false: "-"}[ok])
		}
		reason := why.plan[c.Cluster].Reason
		if reason == "" {
			reason = "-"
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\n", age(now, r.Since), age(now, r.ReadySince), reason)
	}
	return tw.Flush()
}

// groupLabel is a decision group as OCM's labels name it: its index,
// and its name when it has one.
func groupLabel(g rollout.Group) string {
	if g.Name == "" {
		return strconv.Itoa(int(g.Index))
	}
	return fmt.Sprintf("%d (%s)", g.Index, g.Name)
}

// annotateRollout sets (value "" removes) a rollout annotation with a
// merge patch.
func (o *options) annotateRollout(ctx context.Context, name, annotation, value, done string) error {
	fvm, err := o.getRolling(ctx, name)
	if err != nil {
		return err
	}
	var v any = value
	if value == "" {
		v = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{annotation: v}}})
	if err != nil {
		return err
	}
	if err := o.client.Patch(ctx, fvm, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); err != nil {
		return explainError(err, kindFVM, o.namespace, name)
	}
	_, _ = fmt.Fprintf(o.out, "fleetvirtualmachine.fleetvm.io/%s rollout %s\n", name, done)
	return nil
}

func (o *options) rolloutAbort(ctx context.Context, name string) error {
	fvm, err := o.getRolling(ctx, name)
	if err != nil {
		return err
	}
	st := fvm.Status.Rollout
	if st == nil || st.PreviousRevision == 0 {
		return fmt.Errorf("%s/%s has no previous revision to go back to", o.namespace, name)
	}
	return o.annotateRollout(ctx, name, fleetv1alpha1.AnnotationRolloutAbort, strconv.FormatInt(st.Revision, 10),
		fmt.Sprintf("of revision %d aborted: its clusters go back to revision %d", st.Revision, st.PreviousRevision))
}

// revisionContent is what a FleetVM's ControllerRevision holds.
type revisionContent struct {
	Template   *runtime.RawExtension              `json:"template"`
	DiskImages []fleetv1alpha1.DiskImageReference `json:"diskImages,omitempty"`
	Source     *fleetv1alpha1.GitSource           `json:"source,omitempty"`
}

// revisions are the FleetVirtualMachine's ControllerRevisions, oldest
// first.
func (o *options) revisions(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) ([]appsv1.ControllerRevision, error) {
	list := &appsv1.ControllerRevisionList{}
	if err := o.client.List(ctx, list, client.InNamespace(fvm.Namespace),
		client.MatchingLabels{fleetv1alpha1.LabelFleetVMName: fvm.Name, fleetv1alpha1.LabelFleetVMNamespace: fvm.Namespace}); err != nil {
		return nil, fmt.Errorf("list the revisions of %s/%s: %w", fvm.Namespace, fvm.Name, err)
	}
	out := slices.DeleteFunc(list.Items, func(cr appsv1.ControllerRevision) bool { return !metav1.IsControlledBy(&cr, fvm) })
	slices.SortFunc(out, func(a, b appsv1.ControllerRevision) int { return int(a.Revision - b.Revision) })
	return out, nil
}

func (o *options) rolloutHistory(ctx context.Context, name string) error {
	fvm, err := o.getRolling(ctx, name)
	if err != nil {
		return err
	}
	revs, err := o.revisions(ctx, fvm)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(o.out, 0, 4, 2, ' ', 0)
	// A git source's revisions differ by their targetRevision (or the
	// options it is rendered with): the column says which commit each is.
	git := fvm.Spec.Source != nil
	if git {
		_, _ = fmt.Fprintln(tw, "REVISION\tTARGETREVISION\tCONTROLLERREVISION\tAGE")
	} else {
		_, _ = fmt.Fprintln(tw, "REVISION\tCONTROLLERREVISION\tAGE")
	}
	for _, cr := range revs {
		mark := ""
		if st := fvm.Status.Rollout; st != nil && st.Revision == cr.Revision {
			mark = " (latest)"
		}
		if git {
			target := "<unknown>"
			var content revisionContent
			if err := json.Unmarshal(cr.Data.Raw, &content); err == nil && content.Source != nil {
				target = cmp.Or(content.Source.TargetRevision, "HEAD")
			}
			_, _ = fmt.Fprintf(tw, "%d%s\t%s\t%s\t%s\n", cr.Revision, mark, target, cr.Name, age(o.now(), &cr.CreationTimestamp))
			continue
		}
		_, _ = fmt.Fprintf(tw, "%d%s\t%s\t%s\n", cr.Revision, mark, cr.Name, age(o.now(), &cr.CreationTimestamp))
	}
	return tw.Flush()
}

func (o *options) rolloutUndo(ctx context.Context, name string, to int64) error {
	fvm, err := o.getRolling(ctx, name)
	if err != nil {
		return err
	}
	if to == 0 {
		if fvm.Status.Rollout == nil || fvm.Status.Rollout.PreviousRevision == 0 {
			return fmt.Errorf("%s/%s has no previous revision: name one with --to-revision", o.namespace, name)
		}
		to = fvm.Status.Rollout.PreviousRevision
	}
	revs, err := o.revisions(ctx, fvm)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(revs, func(cr appsv1.ControllerRevision) bool { return cr.Revision == to })
	if i < 0 {
		return fmt.Errorf("revision %d of %s/%s is not kept (kubectl fleetvm rollout history %s)", to, o.namespace, name, name)
	}
	var content revisionContent
	if err := json.Unmarshal(revs[i].Data.Raw, &content); err != nil || (content.Template == nil) == (content.Source == nil) ||
		(content.Source != nil) != (fvm.Spec.Source != nil) {
		return fmt.Errorf("revision %d of %s/%s (%s) holds no %s: %v", to, o.namespace, name, revs[i].Name, specKind(fvm), err)
	}
	// A JSON patch: the template (or git source) is replaced whole (a
	// merge patch would keep the fields the revision does not have), and
	// only while the object is as read.
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": fvm.ResourceVersion},
	}
	if content.Source != nil {
		ops = append(ops, map[string]any{"op": "replace", "path": "/spec/source", "value": content.Source})
	} else {
		ops = append(ops, map[string]any{"op": "replace", "path": "/spec/template", "value": content.Template})
	}
	switch {
	case len(content.DiskImages) > 0:
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/diskImages", "value": content.DiskImages})
	case len(fvm.Spec.DiskImages) > 0:
		ops = append(ops, map[string]any{"op": "remove", "path": "/spec/diskImages"})
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if err := o.client.Patch(ctx, fvm, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(FieldManager)); err != nil {
		return explainError(err, kindFVM, o.namespace, name)
	}
	_, _ = fmt.Fprintf(o.out, "fleetvirtualmachine.fleetvm.io/%s rolled back to the %s of revision %d\n", name, specKind(fvm), to)
	return nil
}

// specKind names what a revision of fvm holds.
func specKind(fvm *fleetv1alpha1.FleetVirtualMachine) string {
	if fvm.Spec.Source != nil {
		return "git source"
	}
	return "template"
}
