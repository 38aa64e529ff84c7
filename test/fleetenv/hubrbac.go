package fleetenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// HubRBAC is fleetvm-hub's RBAC as controller-gen generates it from the
// code's markers (deploy/rbac/role.yaml): a ClusterRole, and a Role for
// the objects it keeps in Argo CD's namespace.
type HubRBAC struct {
	ClusterRole *rbacv1.ClusterRole
	ArgoRole    *rbacv1.Role
}

var documentSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// ReadHubRBAC reads deploy/rbac/role.yaml, or the file at path when given.
func ReadHubRBAC(path string) (*HubRBAC, error) {
	if path == "" {
		root, err := RepoRoot()
		if err != nil {
			return nil, err
		}
		path = filepath.Join(root, "deploy", "rbac", "role.yaml")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := &HubRBAC{}
	for _, doc := range documentSeparator.Split(string(raw), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		switch meta.Kind {
		case "ClusterRole":
			out.ClusterRole = &rbacv1.ClusterRole{}
			err = yaml.UnmarshalStrict([]byte(doc), out.ClusterRole)
		case "Role":
			out.ArgoRole = &rbacv1.Role{}
			err = yaml.UnmarshalStrict([]byte(doc), out.ArgoRole)
		default:
			err = fmt.Errorf("unexpected kind %q", meta.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if out.ClusterRole == nil || out.ArgoRole == nil {
		return nil, fmt.Errorf("%s: want a ClusterRole and a Role, run make manifests", path)
	}
	return out, nil
}

// GrantHubRBAC binds user to fleetvm-hub's generated rights, under name:
// the ClusterRole fleet-wide and the Role in argoNamespace, so a test runs
// the hub (or acts as it) with exactly the permissions it ships with.
func GrantHubRBAC(ctx context.Context, c client.Client, name, user, argoNamespace string) error {
	rbac, err := ReadHubRBAC("")
	if err != nil {
		return err
	}
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rbac.ClusterRole.Rules}
	argoRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: argoNamespace}, Rules: rbac.ArgoRole.Rules}
	for _, o := range []client.Object{
		role,
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   subjects,
		},
		argoRole,
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: argoNamespace},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   subjects,
		},
	} {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %T %s: %w", o, name, err)
		}
	}
	return nil
}
