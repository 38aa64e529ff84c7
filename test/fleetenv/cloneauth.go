package fleetenv

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CloneAuthorizationPolicy names the spokes' stand-in for CDI's and
// KubeVirt's clone authorization.
const CloneAuthorizationPolicy = "test-stand-in-clone-authorization"

// The test clusters run neither CDI nor KubeVirt, whose admission webhooks
// authorize a clone as the user who asks for it: CDI's for a DataVolume
// whose source is a PVC or a VolumeSnapshot (spec.source.pvc,
// spec.source.snapshot, or spec.sourceRef to a DataSource), KubeVirt's for
// a VirtualMachine's spec.dataVolumeTemplates. Both ask, with a
// SubjectAccessReview for the requesting user, whether the user may
// create datavolumes/source (group cdi.kubevirt.io) on the source in its
// namespace, or else create pods there
// (containerized-data-importer-api, v1beta1.CanUserClonePVC). A clone
// from the object's own namespace needs no check.
//
// Stand-in: one ValidatingAdmissionPolicy whose CEL asks the same
// question through the API server's authorizer. Where it differs from
// CDI: CDI resolves a sourceRef's DataSource to the PVC it names; CEL
// cannot read other objects, so the stand-in asks about the DataSource's
// own namespace and name, which is the PVC's for the DataSources FleetVM
// makes (package diskimage) and the local fleet's golden images. A
// snapshot source is checked like CDI's explicit rule (datavolumes/source)
// only.
//
// cloneSource turns one DataVolume spec (d) into its clone source, {ns,
// name}, or an empty one when it clones nothing; the same text serves a
// DataVolume (d = object.spec) and each dataVolumeTemplate. "namespace" is
// a reserved word in CEL, hence the index syntax.
const cloneSource = `has(d.source) && has(d.source.pvc) ? {'ns': 'namespace' in d.source.pvc ? d.source.pvc['namespace'] : '', 'name': d.source.pvc.name} :
  has(d.source) && has(d.source.snapshot) ? {'ns': 'namespace' in d.source.snapshot ? d.source.snapshot['namespace'] : '', 'name': d.source.snapshot.name} :
  has(d.sourceRef) && (!has(d.sourceRef.kind) || d.sourceRef.kind == 'DataSource') ? {'ns': 'namespace' in d.sourceRef ? d.sourceRef['namespace'] : '', 'name': d.sourceRef.name} :
  {'ns': '', 'name': ''}`

func cloneAuthorizationPolicy() *admissionregistrationv1.ValidatingAdmissionPolicy {
	fail := admissionregistrationv1.Fail
	rule := func(group, resource string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.NamedRuleWithOperations {
		return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: ops,
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
		}}
	}
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: CloneAuthorizationPolicy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
				// CDI checks a DataVolume when it is created; KubeVirt a
				// VM's templates when it is created or changed.
				rule("cdi.kubevirt.io", "datavolumes", admissionregistrationv1.Create),
				rule("kubevirt.io", "virtualmachines", admissionregistrationv1.Create, admissionregistrationv1.Update),
			}},
			Variables: []admissionregistrationv1.Variable{
				{Name: "specs", Expression: `request.resource.resource == 'datavolumes' ? [object.spec] :
  has(object.spec.dataVolumeTemplates) ? object.spec.dataVolumeTemplates.map(t, t.spec) : []`},
				{Name: "sources", Expression: "variables.specs.map(d, " + cloneSource + ")"},
				{Name: "denied", Expression: `variables.sources.filter(s, s.ns != '' && s.ns != request.namespace &&
  !authorizer.group('cdi.kubevirt.io').resource('datavolumes').subresource('source').namespace(s.ns).name(s.name).check('create').allowed() &&
  !authorizer.group('').resource('pods').namespace(s.ns).name(s.name).check('create').allowed())`},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "size(variables.denied) == 0",
				// A message expression cannot reach the authorizer (nor a
				// variable that does): it names every cross-namespace source.
				MessageExpression: `'User ' + request.userInfo.username + ' has insufficient permissions in clone source namespace ' +
  variables.sources.filter(s, s.ns != '' && s.ns != request.namespace).map(s, string(s.ns)).join(', ') +
  ' (may not create datavolumes/source there; test clusters: stand-in for CDI and KubeVirt clone authorization)'`,
				Reason: ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
}

// InstallCloneAuthorization installs the stand-in on a spoke. The API
// server compiles a policy a moment after it is created: a test that
// needs a refusal waits for it.
func InstallCloneAuthorization(ctx context.Context, c client.Client) error {
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: CloneAuthorizationPolicy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        CloneAuthorizationPolicy,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, o := range []client.Object{cloneAuthorizationPolicy(), binding} {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}
