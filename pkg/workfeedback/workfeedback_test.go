package workfeedback

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"
)

// reported is a work as the work agent reports it back: its Applied
// condition (none when applied is "") and each manifest's feedback.
func reported(applied metav1.ConditionStatus, manifests ...workv1.ManifestCondition) *workv1.ManifestWork {
	w := &workv1.ManifestWork{}
	if applied != "" {
		w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: applied, Message: "no matches for kind"}}
	}
	w.Status.ResourceStatus.Manifests = manifests
	return w
}

// manifest is a manifest's condition with its feedback values.
func manifest(resource string, values ...workv1.FeedbackValue) workv1.ManifestCondition {
	return workv1.ManifestCondition{
		ResourceMeta:    workv1.ManifestResourceMeta{Resource: resource},
		StatusFeedbacks: workv1.StatusFeedbackResult{Values: values},
	}
}

func str(name, value string) workv1.FeedbackValue {
	return workv1.FeedbackValue{Name: name, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(value)}}
}

// exports is the resource each case reads.
const exports = "virtualmachineexports"

func TestRead(t *testing.T) {
	cases := map[string]struct {
		work *workv1.ManifestWork
		want Feedback
	}{
		"nil work": {
			want: Feedback{Values: map[string]string{}},
		},
		"nothing reported yet": {
			work: reported(""),
			want: Feedback{Values: map[string]string{}},
		},
		"values found": {
			work: reported(metav1.ConditionTrue, manifest(exports, str("phase", "Ready"), str("cert", "-----BEGIN CERTIFICATE-----"))),
			want: Feedback{Values: map[string]string{"phase": "Ready", "cert": "-----BEGIN CERTIFICATE-----"}},
		},
		"other resources ignored": {
			work: reported(metav1.ConditionTrue,
				manifest("secrets", str("phase", "Secret's")),
				manifest(exports, str("phase", "Ready")),
				manifest("configmaps", str("cert", "ConfigMap's"))),
			want: Feedback{Values: map[string]string{"phase": "Ready"}},
		},
		"non-string values ignored": {
			work: reported(metav1.ConditionTrue, manifest(exports,
				str("phase", "Ready"),
				workv1.FeedbackValue{Name: "replicas", Value: workv1.FieldValue{Type: workv1.Integer, Integer: ptr.To[int64](1)}},
				workv1.FeedbackValue{Name: "ready", Value: workv1.FieldValue{Type: workv1.Boolean, Boolean: ptr.To(true)}},
				workv1.FeedbackValue{Name: "unset", Value: workv1.FieldValue{Type: workv1.String}})),
			want: Feedback{Values: map[string]string{"phase": "Ready"}},
		},
		"Applied False reported": {
			work: reported(metav1.ConditionFalse),
			want: Feedback{Values: map[string]string{}, NotApplied: true, NotAppliedMessage: "no matches for kind"},
		},
		"Applied False with what was reported before": {
			work: reported(metav1.ConditionFalse, manifest(exports, str("phase", "Pending"))),
			want: Feedback{Values: map[string]string{"phase": "Pending"}, NotApplied: true, NotAppliedMessage: "no matches for kind"},
		},
		"Applied Unknown is no refusal": {
			work: reported(metav1.ConditionUnknown),
			want: Feedback{Values: map[string]string{}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Read(tc.work, exports)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Read (-want,+got):\n%s", diff)
			}
		})
	}
}
