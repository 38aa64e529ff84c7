package tenancy

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// TestConfinedFollowsArgoCDSettings: every FleetVirtualMachine says
// whether Argo CD syncs as the team: Unknown without argocd-cm, False
// (ImpersonationOff, with what a git repository can then still do) when
// argocd-cm lacks application.sync.impersonation.enabled, True once it is
// "true".
func TestConfinedFollowsArgoCDSettings(t *testing.T) {
	ctx := t.Context()
	fvm := utiltesting.MakeFleetVM("team-a", "confined").Obj()
	if err := alice.Create(ctx, fvm); err != nil {
		t.Fatal(err)
	}
	remove(t, fvm)
	key := client.ObjectKeyFromObject(fvm)
	confined := func(status metav1.ConditionStatus, reason string) func(*fleetv1alpha1.FleetVirtualMachine) bool {
		return func(f *fleetv1alpha1.FleetVirtualMachine) bool {
			c := meta.FindStatusCondition(f.Status.Conditions, fleetv1alpha1.ConditionConfined)
			return c != nil && c.Status == status && c.Reason == reason
		}
	}
	waitFVM(t, key, "Confined Unknown without argocd-cm", confined(metav1.ConditionUnknown, fleetv1alpha1.ReasonArgoCDSettingsUnknown))

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: argoNS, Name: "argocd-cm"},
		Data:       map[string]string{"timeout.reconciliation": "30s"},
	}
	if err := fleet.Hub.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(t.Context(), cm) })
	got := waitFVM(t, key, "Confined False without the impersonation key", confined(metav1.ConditionFalse, fleetv1alpha1.ReasonImpersonationOff))
	msg := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionConfined).Message
	for _, want := range []string{"application.sync.impersonation.enabled", "AppProject fleetvm-team-a", "clone another namespace's disk"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Confined message does not say %q: %q", want, msg)
		}
	}

	cm.Data["application.sync.impersonation.enabled"] = "true"
	if err := fleet.Hub.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	got = waitFVM(t, key, "Confined True with impersonation on", confined(metav1.ConditionTrue, fleetv1alpha1.ReasonImpersonated))
	if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionConfined); !strings.Contains(c.Message, "team-a/fleetvm-tenant") {
		t.Errorf("Confined message does not name the ServiceAccount: %q", c.Message)
	}
	// Back off: the condition follows.
	cm.Data["application.sync.impersonation.enabled"] = "false"
	if err := fleet.Hub.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	waitFVM(t, key, "Confined False again", confined(metav1.ConditionFalse, fleetv1alpha1.ReasonImpersonationOff))
}

// TestTeamServiceAccountOnTheClusters: the namespace's ManifestWork on each
// cluster it delivers to carries the team's ServiceAccount, a Role with
// exactly the tenant kinds in its namespace and clone rights for its own
// disk images only; the team's AppProject names the account; and on the
// spoke that account may do what Argo CD's sync of the team needs and
// nothing beyond: no other namespace, no RBAC, no other team's image, and
// its clone of another namespace's disk is refused.
func TestTeamServiceAccountOnTheClusters(t *testing.T) {
	ctx := t.Context()
	fdi := &fleetv1alpha1.FleetDiskImage{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "own"},
		Spec: fleetv1alpha1.FleetDiskImageSpec{
			Source:  fleetv1alpha1.DiskImageSource{HTTP: &fleetv1alpha1.HTTPSource{URL: "https://images.example/own.qcow2"}},
			Storage: fleetv1alpha1.DiskImageStorage{Size: resource.MustParse("1Gi")},
		},
	}
	if err := alice.Create(ctx, fdi); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(t.Context(), fdi) })
	fvm := utiltesting.MakeFleetVM("team-a", "with-account").Obj()
	if err := alice.Create(ctx, fvm); err != nil {
		t.Fatal(err)
	}
	remove(t, fvm)
	waitFVM(t, client.ObjectKeyFromObject(fvm), "placed on prod-a", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return slices.ContainsFunc(f.Status.Clusters, func(c fleetv1alpha1.ClusterStatus) bool { return c.Cluster == "prod-a" })
	})

	// The AppProject names the account for the namespace, on every cluster.
	p := &argov1alpha1.AppProject{}
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: argoNS, Name: "fleetvm-team-a"}, p); err != nil {
		t.Fatal(err)
	}
	wantDSA := []argov1alpha1.ApplicationDestinationServiceAccount{{Server: "*", Namespace: "team-a", DefaultServiceAccount: "team-a:fleetvm-tenant"}}
	if !slices.Equal(p.Spec.DestinationServiceAccounts, wantDSA) {
		t.Errorf("AppProject destinationServiceAccounts = %+v, want %+v", p.Spec.DestinationServiceAccounts, wantDSA)
	}

	// The ManifestWork.
	work := &workv1.ManifestWork{}
	if err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: "prod-a", Name: "fleetvm-namespace-team-a"}, work)
		return err == nil && len(work.Spec.Workload.Manifests) >= 6, err
	}); err != nil {
		t.Fatalf("namespace ManifestWork of team-a on prod-a with the image Role: %v (%d manifests)", err, len(work.Spec.Workload.Manifests))
	}
	objs := map[string]*unstructured.Unstructured{}
	for _, m := range work.Spec.Workload.Manifests {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(m.Raw, &u.Object); err != nil {
			t.Fatal(err)
		}
		objs[u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName()] = u
	}
	var kinds []string
	for k := range objs {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	wantObjs := []string{
		"Namespace /fleetvm-images", "Namespace /team-a",
		"Role fleetvm-images/fleetvm-tenant-team-a", "Role team-a/fleetvm-tenant",
		"RoleBinding fleetvm-images/fleetvm-tenant-team-a", "RoleBinding team-a/fleetvm-tenant",
		"ServiceAccount team-a/fleetvm-tenant",
	}
	if !slices.Equal(kinds, wantObjs) {
		t.Errorf("ManifestWork holds %v, want %v", kinds, wantObjs)
	}
	rules := func(key string) []rbacv1.PolicyRule {
		role := &rbacv1.Role{}
		if u := objs[key]; u != nil {
			if err := runtimeConvert(u, role); err != nil {
				t.Fatal(err)
			}
		}
		return role.Rules
	}
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	wantTenant := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: verbs},
		{APIGroups: []string{"cdi.kubevirt.io"}, Resources: []string{"datavolumes"}, Verbs: verbs},
		{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines"}, Verbs: verbs},
	}
	if got := rules("Role team-a/fleetvm-tenant"); !equalRules(got, wantTenant) {
		t.Errorf("tenant Role rules = %+v, want %+v", got, wantTenant)
	}
	wantImage := []rbacv1.PolicyRule{{APIGroups: []string{"cdi.kubevirt.io"}, Resources: []string{"datavolumes/source"}, Verbs: []string{"create"}, ResourceNames: []string{"team-a.own"}}}
	if got := rules("Role fleetvm-images/fleetvm-tenant-team-a"); !equalRules(got, wantImage) {
		t.Errorf("image Role rules = %+v, want %+v", got, wantImage)
	}
	if d := work.Spec.DeleteOption; d == nil || d.PropagationPolicy != workv1.DeletePropagationPolicyTypeSelectivelyOrphan ||
		d.SelectivelyOrphan == nil || len(d.SelectivelyOrphan.OrphaningRules) != 2 {
		t.Errorf("deleteOption = %+v, want the namespaces orphaned, the rest removed with the work", d)
	}

	// On the spoke: what the account may do, asked of the spoke's own
	// authorizer once the work agent applied the work.
	spoke := fleet.Spoke("prod-a")
	user := "system:serviceaccount:team-a:fleetvm-tenant"
	may := func(ns, group, resource, sub, name, verb string) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Group: group, Resource: resource, Subresource: sub, Name: name, Verb: verb,
			},
		}}
		if err := spoke.Client.Create(ctx, sar); err != nil {
			return false, err
		}
		return sar.Status.Allowed, nil
	}
	if err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		a, err := may("team-a", "kubevirt.io", "virtualmachines", "", "", "create")
		if err != nil || !a {
			return false, err
		}
		return may("fleetvm-images", "cdi.kubevirt.io", "datavolumes", "source", "team-a.own", "create")
	}); err != nil {
		t.Fatalf("the account never got its rights on prod-a: %v", err)
	}
	for what, q := range map[string][6]string{
		"create VMs in team-b":                      {"team-b", "kubevirt.io", "virtualmachines", "", "", "create"},
		"create RoleBindings in team-a":             {"team-a", "rbac.authorization.k8s.io", "rolebindings", "", "", "create"},
		"create pods in team-a":                     {"team-a", "", "pods", "", "", "create"},
		"clone team-b's image":                      {"fleetvm-images", "cdi.kubevirt.io", "datavolumes", "source", "team-b.golden", "create"},
		"clone a PVC of team-b":                     {"team-b", "cdi.kubevirt.io", "datavolumes", "source", "secret-db-disk", "create"},
		"create DataVolumes in the image namespace": {"fleetvm-images", "cdi.kubevirt.io", "datavolumes", "", "", "create"},
	} {
		if a, err := may(q[0], q[1], q[2], q[3], q[4], q[5]); err != nil || a {
			t.Errorf("the account may %s (allowed=%v, err=%v)", what, a, err)
		}
	}

	// Argo CD, impersonating the account, cannot clone team-b's disk: the
	// spoke's clone authorization refuses it, and nothing is created.
	cfg := rest.CopyConfig(spoke.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	asTeam, err := client.New(cfg, client.Options{Scheme: fleet.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	steal := &cdiv1beta1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "steal"},
		Spec: cdiv1beta1.DataVolumeSpec{
			Source:  &cdiv1beta1.DataVolumeSource{PVC: &cdiv1beta1.DataVolumeSourcePVC{Namespace: "team-b", Name: "secret-db-disk"}},
			Storage: &cdiv1beta1.StorageSpec{},
		},
	}
	if err := asTeam.Create(ctx, steal); err == nil || !strings.Contains(err.Error(), "insufficient permissions in clone source namespace team-b") {
		t.Errorf("the account's clone of team-b's disk: %v, want refused", err)
	}
	if err := spoke.Client.Get(ctx, client.ObjectKeyFromObject(steal), &cdiv1beta1.DataVolume{}); !apierrors.IsNotFound(err) {
		t.Errorf("DataVolume team-a/steal exists on prod-a after the refusal (%v)", err)
	}
	own := steal.DeepCopy()
	own.Name, own.Spec.Source.PVC.Namespace = "own-clone", "team-a"
	if err := asTeam.Create(ctx, own, client.DryRunAll); err != nil {
		t.Errorf("the account's clone within team-a: %v, want allowed", err)
	}
}

func equalRules(a, b []rbacv1.PolicyRule) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func runtimeConvert(u *unstructured.Unstructured, into any) error {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}
