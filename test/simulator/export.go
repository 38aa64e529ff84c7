package simulator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	exportv1beta1 "kubevirt.io/api/export/v1beta1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The simulator's VirtualMachineExport follows KubeVirt v1.7's export
// controller (pkg/storage/export/export): the names, paths and reasons
// below are the ones it uses.
const (
	// exportPrefix starts the export's service name.
	exportPrefix = "virt-export"
	// exportTokenPrefix starts the name of the token Secret KubeVirt
	// creates when the export names none.
	exportTokenPrefix = "export-token"
	// ExportTokenKey is the Secret key holding the export's token.
	ExportTokenKey = "token"
	// exportExternalPath is where the export proxy serves an export:
	// /api/export.kubevirt.io/v1beta1/namespaces/<ns>/virtualmachineexports/<name>.
	exportExternalPath = "/api/" + exportGroupVersion + "/namespaces/%s/virtualmachineexports/%s"
	exportGroupVersion = "export.kubevirt.io/v1beta1"

	// Ready condition reasons of an export.
	ReasonExportInitializing = "Initializing"
	ReasonExportInUse        = "InUse"
	ReasonExportPodPending   = "PodPending"
	ReasonExportPodReady     = "PodReady"
	// ReasonExportUnknown is KubeVirt's reason when the exporter pod is
	// neither pending nor ready: the simulator's failing exporter.
	ReasonExportUnknown  = "Unknown"
	ReasonExportNoVolume = "VMNoVolumes"
	// PVCReady condition reasons of an export of a claim.
	ReasonExportPVCBound    = "PVCBound"
	ReasonExportPVCPending  = "PVCPending"
	ReasonExportPVCNotFound = "PVCNotFound"
)

// exportReconciler plays KubeVirt's export controller.
type exportReconciler struct{ *Simulator }

// exportInputs is what one pass over an export reads from the cluster.
type exportInputs struct {
	export *exportv1beta1.VirtualMachineExport
	now    time.Time
	// kind is the export's source: "VirtualMachine", "PersistentVolumeClaim"
	// or "" for a source the simulator does not export.
	kind string
	// claims are the source's claims, in the order the VM names them.
	claims []exportClaim
	// populated: every claim (and the claim of every DataVolume the VM
	// names) exists and is populated.
	populated bool
	// inUse is the message saying the source is in use ("" when not): a
	// VM with an instance that has not ended, a claim a running instance
	// mounts.
	inUse string
	// fails: the exporter pod fails (Faults.ExportFails).
	fails bool
	// proxyHost is the export proxy's host, "" without one.
	proxyHost string
}

type exportClaim struct {
	name  string
	bound bool
}

// exportStatus decides the export's status, as KubeVirt v1.7 writes it:
// Pending with Ready=False (InUse, and the reason why) while the source is
// not available; once it is, the exporter pod starts (Pending, PodPending)
// and, a step later, is ready: Ready=True (PodReady) with links to every
// claim. A VM without volumes (or not found) is Skipped.
func exportStatus(in exportInputs) exportv1beta1.VirtualMachineExportStatus {
	ex := in.export
	prev := exportv1beta1.VirtualMachineExportStatus{}
	if ex.Status != nil {
		prev = *ex.Status.DeepCopy()
	}
	st := *prev.DeepCopy()
	if st.Phase == "" {
		st.Phase = exportv1beta1.Pending
		setExportCondition(&st, exportv1beta1.ConditionReady, corev1.ConditionFalse, ReasonExportInitializing, "", in.now)
	}
	ttl := exportv1beta1.DefaultDurationTTL
	if ex.Spec.TTLDuration != nil {
		ttl = ex.Spec.TTLDuration.Duration
	}
	expires := metav1.NewTime(ex.CreationTimestamp.Add(ttl))
	st.TTLExpirationTime = &expires
	if in.kind == "" {
		return st
	}
	st.ServiceName = exportServiceName(ex.Name)
	if ex.Spec.TokenSecretRef != nil {
		st.TokenSecretRef = ex.Spec.TokenSecretRef
	}
	if in.kind == "PersistentVolumeClaim" {
		switch {
		case len(in.claims) == 0:
			setExportCondition(&st, exportv1beta1.ConditionPVC, corev1.ConditionFalse, ReasonExportPVCNotFound,
				fmt.Sprintf("pvc %s/%s not found", ex.Namespace, ex.Spec.Source.Name), in.now)
		case in.claims[0].bound:
			setExportCondition(&st, exportv1beta1.ConditionPVC, corev1.ConditionTrue, ReasonExportPVCBound, "", in.now)
		default:
			setExportCondition(&st, exportv1beta1.ConditionPVC, corev1.ConditionFalse, ReasonExportPVCPending, "", in.now)
		}
	} else {
		st.VirtualMachineName = &ex.Spec.Source.Name
	}

	available := in.populated && in.inUse == "" && len(in.claims) > 0
	st.Links = &exportv1beta1.VirtualMachineExportLinks{}
	ready := findExportCondition(prev.Conditions, exportv1beta1.ConditionReady)
	podUp := ready != nil && (ready.Reason == ReasonExportPodPending || ready.Reason == ReasonExportPodReady || ready.Reason == ReasonExportUnknown)
	switch {
	case !available:
		// No exporter pod, or KubeVirt deletes it (ExportPaused).
		msg := in.inUse
		if in.kind == "PersistentVolumeClaim" && len(in.claims) == 0 {
			msg = fmt.Sprintf("pvc %s/%s not found", ex.Namespace, ex.Spec.Source.Name)
		}
		if !in.populated && len(in.claims) > 0 {
			msg = fmt.Sprintf("Not all volumes in the Virtual Machine %s/%s are populated", ex.Namespace, ex.Spec.Source.Name)
			if in.kind == "PersistentVolumeClaim" {
				msg = fmt.Sprintf("pvc %s/%s is not populated", ex.Namespace, ex.Spec.Source.Name)
			}
		}
		st.Phase = exportv1beta1.Pending
		setExportCondition(&st, exportv1beta1.ConditionReady, corev1.ConditionFalse, ReasonExportInUse, msg, in.now)
	case !podUp:
		st.Phase = exportv1beta1.Pending
		setExportCondition(&st, exportv1beta1.ConditionReady, corev1.ConditionFalse, ReasonExportPodPending, "", in.now)
	case in.fails:
		st.Phase = exportv1beta1.Pending
		setExportCondition(&st, exportv1beta1.ConditionReady, corev1.ConditionFalse, ReasonExportUnknown, "", in.now)
	default:
		st.Phase = exportv1beta1.Ready
		setExportCondition(&st, exportv1beta1.ConditionReady, corev1.ConditionTrue, ReasonExportPodReady, "", in.now)
		if ex.Spec.TokenSecretRef == nil {
			name := exportTokenName(ex.Name)
			st.TokenSecretRef = &name
		}
		st.Links.Internal = exportLink(in, "https://"+exportInternalHost(ex), "internal")
		if in.proxyHost != "" {
			st.Links.External = exportLink(in, "https://"+in.proxyHost+fmt.Sprintf(exportExternalPath, ex.Namespace, ex.Name), "external")
		}
	}
	if in.kind == "VirtualMachine" && len(in.claims) == 0 {
		st.Phase = exportv1beta1.Skipped
		setExportCondition(&st, exportv1beta1.ConditionReady, corev1.ConditionFalse, ReasonExportNoVolume, in.inUse, in.now)
	}
	return st
}

// exportLink lists the export's manifests (VM sources) and, for every
// claim, its raw and gzip images under base, as the exporter serves claims
// of KubeVirt content (CDI's imports are).
func exportLink(in exportInputs, base, kind string) *exportv1beta1.VirtualMachineExportLink {
	link := &exportv1beta1.VirtualMachineExportLink{}
	if in.kind == "VirtualMachine" {
		link.Manifests = []exportv1beta1.VirtualMachineExportManifest{
			{Type: exportv1beta1.AllManifests, Url: base + "/" + kind + "/manifests/all"},
			{Type: exportv1beta1.AuthHeader, Url: base + "/" + kind + "/manifests/secret"},
		}
	}
	for _, c := range in.claims {
		link.Volumes = append(link.Volumes, exportv1beta1.VirtualMachineExportVolume{
			Name: c.name,
			Formats: []exportv1beta1.VirtualMachineExportVolumeFormat{
				{Format: exportv1beta1.KubeVirtRaw, Url: base + "/volumes/" + c.name + "/disk.img"},
				{Format: exportv1beta1.KubeVirtGz, Url: base + "/volumes/" + c.name + "/disk.img.gz"},
			},
		})
	}
	return link
}

// exportServiceName is the name of the export's service: virt-export-<name>,
// dots replaced, cut to a DNS label with a hash when too long.
func exportServiceName(name string) string {
	return dnsLabel(exportPrefix + "-" + strings.ReplaceAll(name, ".", "-"))
}

func exportTokenName(name string) string {
	return dnsLabel(exportTokenPrefix + "-" + name)
}

func dnsLabel(s string) string {
	const maxLen = 63
	if len(s) <= maxLen {
		return s
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	suffix := fmt.Sprintf("%08x", h.Sum32())
	return strings.TrimRight(s[:maxLen-len(suffix)-1], "-") + "-" + suffix
}

// exportInternalHost is the export's in-cluster host: its service.
func exportInternalHost(ex *exportv1beta1.VirtualMachineExport) string {
	return exportServiceName(ex.Name) + "." + ex.Namespace + ".svc"
}

func setExportCondition(st *exportv1beta1.VirtualMachineExportStatus, t exportv1beta1.ConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) {
	if c := findExportCondition(st.Conditions, t); c != nil {
		if c.Status != status || c.Reason != reason || c.Message != message {
			*c = exportv1beta1.Condition{Type: t, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(now)}
		}
		return
	}
	st.Conditions = append(st.Conditions, exportv1beta1.Condition{Type: t, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(now)})
}

func findExportCondition(conds []exportv1beta1.Condition, t exportv1beta1.ConditionType) *exportv1beta1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// Reconcile moves one export a step: it reads the source, decides the
// status with exportStatus, creates the token Secret when the export gets
// Ready, and deletes the export once its TTL (spec.ttlDuration, 2h by
// default) has passed, as KubeVirt does.
func (r exportReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ex := &exportv1beta1.VirtualMachineExport{}
	if err := r.client.Get(ctx, req.NamespacedName, ex); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ex.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	res, err := r.reconcile(ctx, ex)
	if apierrors.IsConflict(err) || errors.Is(err, errStale) {
		return ctrl.Result{Requeue: true}, nil
	}
	return res, err
}

func (r exportReconciler) reconcile(ctx context.Context, ex *exportv1beta1.VirtualMachineExport) (ctrl.Result, error) {
	in, err := r.exportInputs(ctx, ex)
	if err != nil {
		return ctrl.Result{}, err
	}
	st := exportStatus(in)
	ttlLeft := st.TTLExpirationTime.Sub(in.now)
	if ttlLeft <= 0 {
		if err := r.client.Delete(ctx, ex, client.Preconditions{UID: &ex.UID}); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("delete expired VirtualMachineExport %s: %w", klog.KObj(ex), err)
		}
		r.forget(ex.UID)
		return ctrl.Result{}, nil
	}
	if ex.Status != nil && apiequality.Semantic.DeepEqual(&st, ex.Status) {
		return ctrl.Result{RequeueAfter: ttlLeft}, nil
	}
	// A step of the exporter pod (Pending to ready) waits the step delay.
	if ex.Status != nil && st.Phase != ex.Status.Phase {
		if ok, wait := r.due(ex.UID); !ok {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	if st.TokenSecretRef != nil && ex.Spec.TokenSecretRef == nil {
		if err := r.ensureExportToken(ctx, ex, *st.TokenSecretRef); err != nil {
			return ctrl.Result{}, err
		}
	}
	ex = ex.DeepCopy()
	ex.Status = &st
	if err := r.writeStatus(ctx, ex, "virtualmachineexports"); err != nil {
		return ctrl.Result{}, err
	}
	r.stepped(ex.UID)
	return ctrl.Result{RequeueAfter: minPositive(r.stepDelay, ttlLeft)}, nil
}

// exportInputs reads the export's source.
func (s *Simulator) exportInputs(ctx context.Context, ex *exportv1beta1.VirtualMachineExport) (exportInputs, error) {
	in := exportInputs{export: ex, now: s.clock.Now(), proxyHost: s.exportProxyHost}
	if f := s.faults.ExportFails; f != nil {
		in.fails = f(client.ObjectKeyFromObject(ex))
	}
	src := ex.Spec.Source
	group := ""
	if src.APIGroup != nil {
		group = *src.APIGroup
	}
	switch {
	case group == kubevirtv1.SchemeGroupVersion.Group && src.Kind == "VirtualMachine":
		in.kind = src.Kind
		return in, s.vmExportSource(ctx, ex, &in)
	case group == "" && src.Kind == "PersistentVolumeClaim":
		in.kind = src.Kind
		return in, s.claimExportSource(ctx, ex, &in)
	}
	return in, nil
}

// vmExportSource: the VM's claims (one per DataVolume or claim volume),
// populated when each exists, is Bound and its DataVolume, if any, has
// Succeeded; in use while the VM has an instance that has not ended.
func (s *Simulator) vmExportSource(ctx context.Context, ex *exportv1beta1.VirtualMachineExport, in *exportInputs) error {
	vm := &kubevirtv1.VirtualMachine{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: ex.Namespace, Name: ex.Spec.Source.Name}, vm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get VirtualMachine of VirtualMachineExport %s: %w", klog.KObj(ex), err)
	}
	in.populated = true
	if vm.Spec.Template != nil {
		for _, v := range vm.Spec.Template.Spec.Volumes {
			name := volumeClaim(v)
			if name == "" {
				continue
			}
			c, populated, found, err := s.exportClaim(ctx, ex.Namespace, name)
			if err != nil {
				return err
			}
			if found {
				in.claims = append(in.claims, c)
			}
			in.populated = in.populated && populated
		}
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := s.client.Get(ctx, client.ObjectKeyFromObject(vm), vmi); err == nil {
		if vmi.Status.Phase != kubevirtv1.Succeeded && vmi.Status.Phase != kubevirtv1.Failed {
			in.inUse = fmt.Sprintf("Virtual Machine %s/%s is running", vmi.Namespace, vmi.Name)
		}
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get VirtualMachineInstance of VirtualMachineExport %s: %w", klog.KObj(ex), err)
	}
	return nil
}

// claimExportSource: the claim, in use while an instance that has not
// ended mounts it (the simulator's launcher pods mount nothing, so the
// instances stand for the pods KubeVirt looks at).
func (s *Simulator) claimExportSource(ctx context.Context, ex *exportv1beta1.VirtualMachineExport, in *exportInputs) error {
	c, populated, found, err := s.exportClaim(ctx, ex.Namespace, ex.Spec.Source.Name)
	if err != nil || !found {
		return err
	}
	in.claims, in.populated = []exportClaim{c}, populated
	var vmis kubevirtv1.VirtualMachineInstanceList
	if err := s.client.List(ctx, &vmis, client.InNamespace(ex.Namespace)); err != nil {
		return fmt.Errorf("list VirtualMachineInstances of VirtualMachineExport %s: %w", klog.KObj(ex), err)
	}
	for _, vmi := range vmis.Items {
		if vmi.Status.Phase == kubevirtv1.Succeeded || vmi.Status.Phase == kubevirtv1.Failed {
			continue
		}
		for _, v := range vmi.Spec.Volumes {
			if volumeClaim(v) == c.name {
				in.inUse = fmt.Sprintf("pvc %s/%s is in use", ex.Namespace, c.name)
			}
		}
	}
	return nil
}

// exportClaim reads a claim: whether it exists, is Bound, and is
// populated (Bound, and its DataVolume, if one of that name exists,
// Succeeded).
func (s *Simulator) exportClaim(ctx context.Context, namespace, name string) (exportClaim, bool, bool, error) {
	key := client.ObjectKey{Namespace: namespace, Name: name}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := s.client.Get(ctx, key, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return exportClaim{}, false, false, nil
		}
		return exportClaim{}, false, false, fmt.Errorf("get PersistentVolumeClaim %s: %w", key, err)
	}
	c := exportClaim{name: name, bound: pvc.Status.Phase == corev1.ClaimBound}
	dv := &cdiv1beta1.DataVolume{}
	if err := s.client.Get(ctx, key, dv); err == nil {
		return c, c.bound && dv.Status.Phase == cdiv1beta1.Succeeded, true, nil
	} else if !apierrors.IsNotFound(err) {
		return exportClaim{}, false, false, fmt.Errorf("get DataVolume %s: %w", key, err)
	}
	return c, c.bound, true, nil
}

// ensureExportToken creates the export's token Secret, owned by the
// export, unless it exists. The token is derived from the export's UID:
// a stand-in, never checked by the simulated importer.
func (s *Simulator) ensureExportToken(ctx context.Context, ex *exportv1beta1.VirtualMachineExport, name string) error {
	sum := sha256.Sum256([]byte("export-token/" + ex.UID))
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ex.Namespace, Name: name,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ex, exportv1beta1.SchemeGroupVersion.WithKind("VirtualMachineExport"))},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{ExportTokenKey: []byte(hex.EncodeToString(sum[:16]))},
	}
	if err := s.client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create token Secret of VirtualMachineExport %s: %w", klog.KObj(ex), err)
	}
	return nil
}

// exportsIn maps any object to the exports of its namespace (an export's
// source is in its namespace).
func (s *Simulator) exportsIn(ctx context.Context, o client.Object) []reconcile.Request {
	var list exportv1beta1.VirtualMachineExportList
	if err := s.client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list VirtualMachineExports")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// exportRef is what an export volume URL names.
type exportRef struct {
	// external: a URL through the export proxy (links.external), else
	// the export's service (links.internal).
	external  bool
	host      string
	namespace string
	// name is the export's name (external URLs), service its service's
	// name (internal URLs).
	name, service string
}

// parseExportURL tells whether raw has the shape of a volume URL an export
// issues, and what it names: https://<service>.<namespace>.svc/volumes/...
// or https://<proxy>/api/export.kubevirt.io/v1beta1/namespaces/<namespace>/virtualmachineexports/<name>/volumes/...
func parseExportURL(raw string) (exportRef, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return exportRef{}, false
	}
	host := u.Hostname()
	if rest, ok := strings.CutPrefix(u.Path, "/api/"+exportGroupVersion+"/namespaces/"); ok {
		parts := strings.Split(rest, "/")
		if len(parts) >= 4 && parts[1] == "virtualmachineexports" && parts[3] == "volumes" {
			return exportRef{external: true, host: host, namespace: parts[0], name: parts[2]}, true
		}
		return exportRef{}, false
	}
	labels := strings.Split(host, ".")
	if len(labels) == 3 && labels[2] == "svc" && strings.HasPrefix(labels[0], exportPrefix+"-") && strings.HasPrefix(u.Path, "/volumes/") {
		return exportRef{host: host, namespace: labels[1], service: labels[0]}, true
	}
	return exportRef{}, false
}

// ServesExport tells whether rawURL is a volume URL that a Ready export on
// this simulator's cluster issued: an internal link of the export whose
// service the host names, or an external link through this cluster's
// export proxy (Options.ExportProxyHost).
func (s *Simulator) ServesExport(ctx context.Context, rawURL string) (bool, error) {
	_, served, err := s.exportedClaim(ctx, rawURL)
	return served, err
}

// ExportedData is what the volume URL serves when a Ready export of this
// cluster issued it (served): the DataAnnotation of the claim it exports.
// The test fleet wires it into the other spokes' Options.Exports.
func (s *Simulator) ExportedData(ctx context.Context, rawURL string) (string, bool, error) {
	key, served, err := s.exportedClaim(ctx, rawURL)
	if err != nil || !served {
		return "", served, err
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := s.client.Get(ctx, key, pvc); err != nil {
		return "", false, client.IgnoreNotFound(err)
	}
	return pvc.Annotations[DataAnnotation], true, nil
}

// exportedClaim is the claim a Ready export of this cluster serves at
// rawURL, if one does.
func (s *Simulator) exportedClaim(ctx context.Context, rawURL string) (client.ObjectKey, bool, error) {
	ref, ok := parseExportURL(rawURL)
	if !ok || (ref.external && (s.exportProxyHost == "" || ref.host != s.exportProxyHost)) {
		return client.ObjectKey{}, false, nil
	}
	var candidates []exportv1beta1.VirtualMachineExport
	if ref.external {
		ex := &exportv1beta1.VirtualMachineExport{}
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: ref.namespace, Name: ref.name}, ex); err != nil {
			return client.ObjectKey{}, false, client.IgnoreNotFound(err)
		}
		candidates = append(candidates, *ex)
	} else {
		var list exportv1beta1.VirtualMachineExportList
		if err := s.client.List(ctx, &list, client.InNamespace(ref.namespace)); err != nil {
			return client.ObjectKey{}, false, fmt.Errorf("list VirtualMachineExports in %s: %w", ref.namespace, err)
		}
		for _, ex := range list.Items {
			if exportServiceName(ex.Name) == ref.service {
				candidates = append(candidates, ex)
			}
		}
	}
	for _, ex := range candidates {
		if ex.Status == nil || ex.Status.Phase != exportv1beta1.Ready || ex.Status.Links == nil || !ex.DeletionTimestamp.IsZero() {
			continue
		}
		for _, link := range []*exportv1beta1.VirtualMachineExportLink{ex.Status.Links.Internal, ex.Status.Links.External} {
			if link == nil {
				continue
			}
			for _, v := range link.Volumes {
				for _, f := range v.Formats {
					if f.Url == rawURL {
						return client.ObjectKey{Namespace: ex.Namespace, Name: v.Name}, true, nil
					}
				}
			}
		}
	}
	return client.ObjectKey{}, false, nil
}

// importedData is the DataAnnotation an import's claim gets: the exported
// claim's for an import from an export's volume URL (this cluster's, or
// another's through Options.Exports), "" for any other source.
func (s *Simulator) importedData(ctx context.Context, dv *cdiv1beta1.DataVolume) (string, error) {
	if dv.Spec.Source == nil || dv.Spec.Source.HTTP == nil {
		return "", nil
	}
	raw := dv.Spec.Source.HTTP.URL
	data, served, err := s.ExportedData(ctx, raw)
	if err != nil || served || s.exports == nil {
		return data, err
	}
	data, _, err = s.exports(ctx, raw)
	return data, err
}

// exportImportFailure tells why an import from an export URL fails, or ""
// when the URL is no export's or a Ready export serves it: an internal
// link is looked up on this cluster, an external one through this
// cluster's proxy or Options.Exports (the stand-in for the network to the
// other clusters' export proxies).
func (s *Simulator) exportImportFailure(ctx context.Context, dv *cdiv1beta1.DataVolume) (string, error) {
	if dv.Spec.Source == nil || dv.Spec.Source.HTTP == nil {
		return "", nil
	}
	raw := dv.Spec.Source.HTTP.URL
	ref, ok := parseExportURL(raw)
	if !ok {
		return "", nil
	}
	served, err := s.ServesExport(ctx, raw)
	if err != nil {
		return "", err
	}
	if !served && ref.external && ref.host != s.exportProxyHost {
		if s.exports == nil {
			return fmt.Sprintf("Unable to connect to http data source: dial tcp: lookup %s: no such host", ref.host), nil
		}
		if _, served, err = s.exports(ctx, raw); err != nil {
			return "", err
		}
	}
	if served {
		return "", nil
	}
	return "Unable to connect to http data source: expected status code 200, got 404. Status: 404 Not Found", nil
}
