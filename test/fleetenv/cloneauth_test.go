package fleetenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestCloneAuthorization: the spokes refuse a clone from another
// namespace unless the requesting user may create datavolumes/source on
// that source there, for DataVolumes (pvc, snapshot, sourceRef) and VMs'
// dataVolumeTemplates, as CDI and KubeVirt do; refused objects do not
// exist.
func TestCloneAuthorization(t *testing.T) {
	ctx := t.Context()
	f, err := Start(ctx, Options{Spokes: []string{"spoke"}, NoPlacementController: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})
	spoke := f.Spoke("spoke")
	for _, ns := range []string{"team-a", "team-b"} {
		if err := spoke.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// alice may manage DataVolumes and VMs in team-a, nothing in team-b.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "tenant"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"cdi.kubevirt.io"}, Resources: []string{"datavolumes"}, Verbs: []string{"*"}},
			{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines"}, Verbs: []string{"*"}},
		},
	}
	if err := spoke.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := bind(ctx, spoke.Client, "team-a", "tenant", "alice"); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(spoke.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "alice", Groups: []string{"system:authenticated"}}
	alice, err := client.New(cfg, client.Options{Scheme: f.Scheme})
	if err != nil {
		t.Fatal(err)
	}

	dv := func(name string, spec cdiv1beta1.DataVolumeSpec) *cdiv1beta1.DataVolume {
		spec.Storage = &cdiv1beta1.StorageSpec{}
		return &cdiv1beta1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}, Spec: spec}
	}
	pvc := func(ns, name string) cdiv1beta1.DataVolumeSpec {
		return cdiv1beta1.DataVolumeSpec{Source: &cdiv1beta1.DataVolumeSource{PVC: &cdiv1beta1.DataVolumeSourcePVC{Namespace: ns, Name: name}}}
	}
	snapshot := cdiv1beta1.DataVolumeSpec{Source: &cdiv1beta1.DataVolumeSource{Snapshot: &cdiv1beta1.DataVolumeSourceSnapshot{Namespace: "team-b", Name: "snap"}}}
	sourceRef := cdiv1beta1.DataVolumeSpec{SourceRef: &cdiv1beta1.DataVolumeSourceRef{Kind: cdiv1beta1.DataVolumeDataSource, Namespace: ptr.To("team-b"), Name: "golden"}}
	vm := func(name string, spec cdiv1beta1.DataVolumeSpec) *kubevirtv1.VirtualMachine {
		spec.Storage = &cdiv1beta1.StorageSpec{}
		return &kubevirtv1.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
			Spec: kubevirtv1.VirtualMachineSpec{
				RunStrategy:         ptr.To(kubevirtv1.RunStrategyHalted),
				Template:            &kubevirtv1.VirtualMachineInstanceTemplateSpec{},
				DataVolumeTemplates: []kubevirtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: name + "-root"}, Spec: spec}},
			},
		}
	}
	refusal := "User alice has insufficient permissions in clone source namespace team-b"
	// The API server compiles the policy a moment after it is created.
	if err := Eventually(ctx, 30*time.Second, func() (bool, error) {
		err := alice.Create(ctx, dv("probe", pvc("team-b", "secret-db-disk")), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), refusal), nil
	}); err != nil {
		t.Fatalf("the clone authorization policy never refused a clone from team-b: %v", err)
	}

	refused := map[string]client.Object{
		"DataVolume cloning team-b's PVC":                  dv("steal-pvc", pvc("team-b", "secret-db-disk")),
		"DataVolume cloning team-b's snapshot":             dv("steal-snapshot", snapshot),
		"DataVolume cloning a DataSource of team-b":        dv("steal-datasource", sourceRef),
		"VM whose dataVolumeTemplate clones team-b's PVC":  vm("steal-vm-pvc", pvc("team-b", "secret-db-disk")),
		"VM whose dataVolumeTemplate names a team-b image": vm("steal-vm-ref", sourceRef),
	}
	for what, obj := range refused {
		err := alice.Create(ctx, obj)
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || err == nil || !strings.Contains(err.Error(), refusal) {
			t.Errorf("%s: got %v, want refused with %q", what, err, refusal)
		}
		if err := spoke.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%s: the object exists after the refusal (%v)", what, err)
		}
	}
	allowed := map[string]client.Object{
		"DataVolume cloning its own namespace's PVC":     dv("own-pvc", pvc("team-a", "disk")),
		"DataVolume cloning a PVC without a namespace":   dv("own-pvc-implicit", pvc("", "disk")),
		"DataVolume importing (no clone)":                dv("import", cdiv1beta1.DataVolumeSpec{Source: &cdiv1beta1.DataVolumeSource{Blank: &cdiv1beta1.DataVolumeBlankImage{}}}),
		"VM whose dataVolumeTemplate clones its own PVC": vm("own-vm", pvc("team-a", "disk")),
	}
	for what, obj := range allowed {
		if err := alice.Create(ctx, obj, client.DryRunAll); err != nil {
			t.Errorf("%s: %v, want allowed", what, err)
		}
	}
	// The cluster admin may clone anything.
	if err := spoke.Client.Create(ctx, dv("admin-clone", pvc("team-b", "secret-db-disk")), client.DryRunAll); err != nil {
		t.Errorf("admin clone from team-b: %v, want allowed", err)
	}

	// With datavolumes/source on one PVC of team-b (by name, as FleetVM
	// grants a team its own images), alice clones that one, not another.
	grant := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "clone-golden"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"cdi.kubevirt.io"}, Resources: []string{"datavolumes/source"}, Verbs: []string{"create"},
			ResourceNames: []string{"golden"},
		}},
	}
	if err := spoke.Client.Create(ctx, grant); err != nil {
		t.Fatal(err)
	}
	if err := bind(ctx, spoke.Client, "team-b", "clone-golden", "alice"); err != nil {
		t.Fatal(err)
	}
	if err := Eventually(ctx, 30*time.Second, func() (bool, error) {
		return alice.Create(ctx, vm("granted", sourceRef), client.DryRunAll) == nil, nil
	}); err != nil {
		t.Errorf("a VM cloning team-b's golden after the grant is still refused: %v", err)
	}
	if err := alice.Create(ctx, dv("not-granted", pvc("team-b", "secret-db-disk")), client.DryRunAll); err == nil || !strings.Contains(err.Error(), refusal) {
		t.Errorf("clone of team-b's secret-db-disk with rights on golden only: %v, want refused", err)
	}
}

func bind(ctx context.Context, c client.Client, ns, role, user string) error {
	b := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%s", role, user)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	return c.Create(ctx, b)
}
