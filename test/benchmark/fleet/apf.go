package fleet

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// Counting the hub's requests with the API server's own metrics.
//
// apiserver_request_total has no client or user label (Kubernetes dropped
// it for cardinality), so the harness classifies fleetvm-hub's requests
// with API Priority and Fairness instead: FlowSchemas that match the hub's
// own user (fleetvm-hub runs with a kubeconfig of its own), one per kind
// of write, ahead of the built-in schemas. The API server then counts
// every request it dispatches per schema in
// apiserver_flowcontrol_dispatched_requests_total. The schemas use the
// built-in exempt priority level: counting never queues or throttles the
// hub.

// hubUser is the user fleetvm-hub authenticates as.
const hubUser = "fleetvm-hub"

// writeVerbs are the mutating verbs but deletions; deleteVerbs those,
// counted apart in each class (a deletion costs the API server more than
// a patch, and the hub's deletions follow its own deliberate steps).
var (
	writeVerbs  = []string{"create", "update", "patch"}
	deleteVerbs = []string{"delete", "deletecollection"}
)

// writeClass is one kind of write the report breaks down.
type writeClass struct {
	Name      string
	Groups    []string
	Resources []string
}

// writeClasses are matched in order; "other" catches the rest.
var writeClasses = []writeClass{
	{Name: "fleetvirtualmachines/status", Groups: []string{"fleetvm.io"}, Resources: []string{"fleetvirtualmachines/status"}},
	{Name: "fleetvirtualmachines", Groups: []string{"fleetvm.io"}, Resources: []string{"fleetvirtualmachines"}},
	{Name: "placements", Groups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"placements"}},
	{Name: "applicationsets", Groups: []string{"argoproj.io"}, Resources: []string{"applicationsets"}},
	{Name: "applications", Groups: []string{"argoproj.io"}, Resources: []string{"applications"}},
	{Name: "configmaps", Groups: []string{""}, Resources: []string{"configmaps"}},
	{Name: "events", Groups: []string{"", "events.k8s.io"}, Resources: []string{"events"}},
	// Reviews are creates that store nothing: the webhook's
	// SubjectAccessReviews at admission, its SelfSubjectReview (who the
	// hub is) when it starts.
	{Name: "reviews", Groups: []string{"authentication.k8s.io", "authorization.k8s.io"}, Resources: []string{"*"}},
	{Name: "other", Groups: []string{"*"}, Resources: []string{"*"}},
}

const readsClass = "reads"

func flowSchemaName(class string) string {
	if class == readsClass {
		return "fleetvm-bench-hub-reads"
	}
	return "fleetvm-bench-hub-writes-" + slug(class)
}

func deleteSchemaName(class string) string { return "fleetvm-bench-hub-deletes-" + slug(class) }

func slug(s string) string {
	out := []byte(s)
	for i, c := range out {
		if c == '/' {
			out[i] = '-'
		}
	}
	return string(out)
}

// installFlowSchemas creates the counting FlowSchemas, then proves the API
// server applies them: requests made as the hub's user must show up in the
// schemas' counters.
func installFlowSchemas(ctx context.Context, admin client.Client, kube kubernetes.Interface, hubClient client.Client) error {
	subject := []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: hubUser}}}
	schema := func(class string, precedence int32, rules flowcontrolv1.PolicyRulesWithSubjects) *flowcontrolv1.FlowSchema {
		rules.Subjects = subject
		return &flowcontrolv1.FlowSchema{
			ObjectMeta: metav1.ObjectMeta{Name: flowSchemaName(class), Labels: map[string]string{"fleetvm.io/benchmark": "true"}},
			Spec: flowcontrolv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: flowcontrolv1.PriorityLevelConfigurationNameExempt},
				MatchingPrecedence:         precedence,
				Rules:                      []flowcontrolv1.PolicyRulesWithSubjects{rules},
			},
		}
	}
	var schemas []*flowcontrolv1.FlowSchema
	for i, c := range writeClasses {
		rules := func(verbs []string) flowcontrolv1.PolicyRulesWithSubjects {
			return flowcontrolv1.PolicyRulesWithSubjects{ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
				Verbs: verbs, APIGroups: c.Groups, Resources: c.Resources,
				ClusterScope: true, Namespaces: []string{flowcontrolv1.NamespaceEvery},
			}}}
		}
		deletes := schema(c.Name, int32(10+2*i), rules(deleteVerbs))
		deletes.Name = deleteSchemaName(c.Name)
		schemas = append(schemas, deletes, schema(c.Name, int32(11+2*i), rules(writeVerbs)))
	}
	// Reads match every request, so they come after every write class.
	schemas = append(schemas, schema(readsClass, 9000, flowcontrolv1.PolicyRulesWithSubjects{
		ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
			Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
			ClusterScope: true, Namespaces: []string{flowcontrolv1.NamespaceEvery},
		}},
		NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
	}))
	for _, s := range schemas {
		if err := admin.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create FlowSchema %s: %w", s.Name, err)
		}
	}

	// Probe as the hub: a read and a dry-run write (nothing is stored).
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "fleetvm-bench-probe"}}
	return fleetenv.Eventually(ctx, time.Minute, func() (bool, error) {
		_ = hubClient.Get(ctx, client.ObjectKey{Name: "default"}, &corev1.Namespace{})
		_ = hubClient.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		c, err := readHubCounts(ctx, kube)
		if err != nil {
			return false, err
		}
		if c.Reads == 0 || c.Writes["configmaps"] == 0 {
			return false, fmt.Errorf("the API server does not count the hub's requests yet (reads %v, configmap writes %v)", c.Reads, c.Writes["configmaps"])
		}
		return true, nil
	})
}

// hubCounts are the API server's counts of the hub's requests: writes per
// class, deletions included, and of those the deletions.
type hubCounts struct {
	Writes  map[string]float64
	Deletes map[string]float64
	Reads   float64
}

func (c hubCounts) totalWrites() float64 {
	var t float64
	for _, v := range c.Writes {
		t += v
	}
	return t
}

// writesExceptEvents are the hub's writes of objects: events are counted
// apart, they record what happened and change nothing.
func (c hubCounts) writesExceptEvents() float64 { return c.totalWrites() - c.Writes["events"] }

// sub returns c - before.
func (c hubCounts) sub(before hubCounts) hubCounts {
	out := hubCounts{Writes: map[string]float64{}, Deletes: map[string]float64{}, Reads: c.Reads - before.Reads}
	for k, v := range c.Writes {
		out.Writes[k] = v - before.Writes[k]
	}
	for k, v := range c.Deletes {
		out.Deletes[k] = v - before.Deletes[k]
	}
	return out
}

// classes lists the write classes with a non-zero count and those in
// always, in report order.
func (c hubCounts) classes(always ...string) []string {
	var out []string
	for _, wc := range writeClasses {
		if c.Writes[wc.Name] != 0 || slices.Contains(always, wc.Name) {
			out = append(out, wc.Name)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.Writes)) {
		if c.Writes[k] != 0 && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

func readHubCounts(ctx context.Context, kube kubernetes.Interface) (hubCounts, error) {
	ss, err := scrapeAPIServer(ctx, kube)
	if err != nil {
		return hubCounts{}, err
	}
	const metric = "apiserver_flowcontrol_dispatched_requests_total"
	c := hubCounts{Writes: map[string]float64{}, Deletes: map[string]float64{}}
	for _, wc := range writeClasses {
		c.Deletes[wc.Name] = ss.sum(metric, map[string]string{"flow_schema": deleteSchemaName(wc.Name)})
		c.Writes[wc.Name] = ss.sum(metric, map[string]string{"flow_schema": flowSchemaName(wc.Name)}) + c.Deletes[wc.Name]
	}
	c.Reads = ss.sum(metric, map[string]string{"flow_schema": flowSchemaName(readsClass)})
	return c, nil
}

// conflicts are 409 answers of the API server to writes of two status
// subresources, each written by one client only: FleetVirtualMachine
// status by fleetvm-hub, Placement status by the OCM scheduler.
type conflicts struct {
	fvmStatus, placementStatus float64
}

func (c conflicts) sub(before conflicts) conflicts {
	return conflicts{fvmStatus: c.fvmStatus - before.fvmStatus, placementStatus: c.placementStatus - before.placementStatus}
}

func readConflicts(ctx context.Context, kube kubernetes.Interface) (conflicts, error) {
	ss, err := scrapeAPIServer(ctx, kube)
	if err != nil {
		return conflicts{}, err
	}
	const metric = "apiserver_request_total"
	return conflicts{
		fvmStatus:       ss.sum(metric, map[string]string{"resource": "fleetvirtualmachines", "subresource": "status", "code": "409"}),
		placementStatus: ss.sum(metric, map[string]string{"resource": "placements", "subresource": "status", "code": "409"}),
	}, nil
}
