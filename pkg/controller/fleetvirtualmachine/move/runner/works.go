package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/move"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
)

// This file keeps the ManifestWorks of Cold moves (move.ExportWork,
// move.ImportWork) and Live moves (move.ReceiveWork, move.SendWork): made
// while a move needs them, removed with the move's end, and read back for
// the export's and the migrations' state.

// IndexMoveWork indexes the ManifestWorks of moves by the
// FleetVirtualMachine they move ("namespace/name").
const IndexMoveWork = "fleetvm.io/move-work"

// WorkKey is what IndexMoveWork indexes a ManifestWork by ("": not a
// move's).
func WorkKey(o client.Object) string {
	if o.GetLabels()[move.LabelMove] == "" {
		return ""
	}
	key, ok := delivery.OwnerKey(o)
	if !ok {
		return ""
	}
	return key.String()
}

// coldWorks are the works of one Cold move, as read.
type coldWorks struct {
	export, imports *workv1.ManifestWork
}

// readExport reads a started Cold move's works: the export's state for the
// move's step, and what the target's VM imports (nil until the export
// serves every volume and the target holds the token header).
func (r *Runner) readExport(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, m *fleetv1alpha1.FleetVirtualMachineMove) (move.Export, *delivery.Import, error) {
	w, err := r.coldWorks(ctx, m)
	if err != nil || w.export == nil {
		return move.Export{}, nil, err
	}
	templates := move.DataVolumeTemplates(fvm)
	fb := move.ReadExport(w.export)
	urls, failed := move.ExportState(fb, templates)
	if failed != "" {
		return move.Export{Failed: failed}, nil, nil
	}
	if urls == nil || w.imports == nil || !move.Carries(w.imports, move.Token(w.export)) ||
		!meta.IsStatusConditionTrue(w.imports.Status.Conditions, workv1.WorkApplied) {
		return move.Export{}, nil, nil
	}
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	header, ca := move.ImportFor(key, fb.Cert)
	return move.Export{Ready: true}, &delivery.Import{URLs: urls, HeaderSecret: header, CAConfigMap: ca}, nil
}

// moveWorks reads the move's two works from the cache (nil when absent).
func (r *Runner) coldWorks(ctx context.Context, m *fleetv1alpha1.FleetVirtualMachineMove) (coldWorks, error) {
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	var out coldWorks
	var err1, err2 error
	out.export, err1 = r.work(ctx, key, m.Spec.From, move.ExportWorkName(key))
	out.imports, err2 = r.work(ctx, key, m.Status.To, move.ImportWorkName(key))
	return out, errors.Join(err1, err2)
}

// moveWork reads one work of the move key from the cache (nil when
// absent), refusing one FleetVM did not make for it.
func (r *Runner) work(ctx context.Context, key types.NamespacedName, cluster, name string) (*workv1.ManifestWork, error) {
	if cluster == "" {
		return nil, nil
	}
	w := &workv1.ManifestWork{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: cluster, Name: name}, w); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get ManifestWork %s/%s: %w", cluster, name, err)
	case w.Annotations[move.AnnotationMove] != key.String():
		return nil, fmt.Errorf("ManifestWork %s/%s exists and was not made by FleetVM for move %s: FleetVM leaves it alone", cluster, name, key)
	}
	return w, nil
}

// EnsureWorks makes the works the moves' steps ask for (plan.Moves): a
// Cold move's export while it exports, and its import once the export
// serves; a Live move's migrations. It removes every other move work of
// the FleetVirtualMachine: a move that ended, rolled back or is gone.
func (r *Runner) EnsureWorks(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, plan Plan) error {
	keep := map[types.NamespacedName]bool{}
	var errs []error
	for _, st := range plan.Moves {
		if err := r.ensureLiveWorks(ctx, fvm, st, keep); err != nil {
			errs = append(errs, err)
		}
		if !st.Out.Export {
			continue
		}
		m := st.Move
		w, err := r.coldWorks(ctx, m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		token := ""
		if w.export != nil {
			token = move.Token(w.export)
		}
		if token == "" {
			if token, err = newToken(); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		vm := vmclaim.Identity(fvm)
		want, err := move.ExportWork(m, vm, token, move.DataVolumeTemplates(fvm))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		keep[client.ObjectKeyFromObject(want)] = true
		if _, err := r.written.Ensure(ctx, r.Client, want, w.export); err != nil {
			errs = append(errs, fmt.Errorf("write ManifestWork %s: %w", klog.KObj(want), err))
			continue
		}
		if w.export == nil || m.Status.To == "" {
			continue
		}
		// The export serves: the target gets the token header (and CA).
		fb := move.ReadExport(w.export)
		if urls, _ := move.ExportState(fb, move.DataVolumeTemplates(fvm)); urls == nil {
			continue
		}
		imp, err := move.ImportWork(m, vm.Namespace, token, fb.Cert)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		keep[client.ObjectKeyFromObject(imp)] = true
		if _, err := r.written.Ensure(ctx, r.Client, imp, w.imports); err != nil {
			errs = append(errs, fmt.Errorf("write ManifestWork %s: %w", klog.KObj(imp), err))
		}
	}
	return errors.Join(append(errs, r.deleteWorks(ctx, types.NamespacedName{Namespace: fvm.Namespace, Name: fvm.Name}, keep))...)
}

// deleteMoveWorks deletes the move works of the FleetVirtualMachine key
// but those to keep.
func (r *Runner) deleteWorks(ctx context.Context, key types.NamespacedName, keep map[types.NamespacedName]bool) error {
	var works workv1.ManifestWorkList
	if err := r.Client.List(ctx, &works, client.MatchingFields{IndexMoveWork: key.String()}); err != nil {
		return fmt.Errorf("list move ManifestWorks: %w", err)
	}
	var errs []error
	for i := range works.Items {
		w := &works.Items[i]
		if keep[client.ObjectKeyFromObject(w)] || !w.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, w, client.Preconditions{UID: &w.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete ManifestWork %s: %w", klog.KObj(w), err))
		}
	}
	return errors.Join(errs...)
}

// newToken is a new export token: 32 random bytes, hex.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make an export token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// liveWorks are the works of one Live move, as read.
type liveWorks struct {
	receive, send *workv1.ManifestWork
}

// migrationWorks reads a Live move's two works from the cache.
func (r *Runner) migrationWorks(ctx context.Context, m *fleetv1alpha1.FleetVirtualMachineMove) (liveWorks, error) {
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	var out liveWorks
	var err1, err2 error
	out.receive, err1 = r.work(ctx, key, m.Status.To, move.ReceiveWorkName(key))
	out.send, err2 = r.work(ctx, key, m.Spec.From, move.SendWorkName(key))
	return out, errors.Join(err1, err2)
}

// ensureLiveWorks makes a Live move's migrations as its step asks: the
// receiving one on the target, then the sending one on the source, to the
// address the receiving one reports. It returns the works to keep.
func (r *Runner) ensureLiveWorks(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, st Stepped, keep map[types.NamespacedName]bool) error {
	if !st.Out.Receive && !st.Out.Send {
		return nil
	}
	m := st.Move
	w, err := r.migrationWorks(ctx, m)
	if err != nil {
		return err
	}
	vm := vmclaim.Identity(fvm)
	var errs []error
	if st.Out.Receive {
		want, err := move.ReceiveWork(m, vm)
		if err != nil {
			return err
		}
		keep[client.ObjectKeyFromObject(want)] = true
		if _, err := r.written.Ensure(ctx, r.Client, want, w.receive); err != nil {
			errs = append(errs, fmt.Errorf("write ManifestWork %s: %w", klog.KObj(want), err))
		}
	}
	if address := move.ReadMigration(w.receive, nil).ReceiverAddress; st.Out.Send && address != "" {
		want, err := move.SendWork(m, vm, address)
		if err != nil {
			return err
		}
		keep[client.ObjectKeyFromObject(want)] = true
		if _, err := r.written.Ensure(ctx, r.Client, want, w.send); err != nil {
			errs = append(errs, fmt.Errorf("write ManifestWork %s: %w", klog.KObj(want), err))
		}
	}
	return errors.Join(errs...)
}
