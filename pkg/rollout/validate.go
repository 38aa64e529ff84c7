package rollout

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
)

// Validate refuses the strategies OCM's helper would read as something
// other than what they say:
//
//   - a block of another type than type (OCM ignores it);
//   - minSuccessTime or maxFailures with type All (OCM reads neither);
//   - Progressive without maxConcurrency, or with 0 or 0% (OCM rolls to
//     every cluster at once; type All says that);
//   - a maxConcurrency or maxFailures that is neither a count nor a whole
//     percentage up to 100% (OCM maps some to its defaults);
//   - a progressDeadline that is not None or a positive duration in
//     hours, minutes and seconds (OCM waits for ever on some, and fails
//     every cluster at once on 0s);
//   - a negative minSuccessTime, a mandatory decision group named twice.
//
// A count above the FleetVM's clusters is read as all of them (OCM reads
// a maxFailures above them as 0).
func Validate(s *clusterv1alpha1.RolloutStrategy, path *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	typ := s.Type
	if typ == "" {
		typ = clusterv1alpha1.All
	}
	blocks := map[clusterv1alpha1.RolloutType]bool{
		clusterv1alpha1.All:                 s.All != nil,
		clusterv1alpha1.Progressive:         s.Progressive != nil,
		clusterv1alpha1.ProgressivePerGroup: s.ProgressivePerGroup != nil,
	}
	if _, known := blocks[typ]; !known {
		return append(errs, field.NotSupported(path.Child("type"), s.Type, []string{string(clusterv1alpha1.All), string(clusterv1alpha1.Progressive), string(clusterv1alpha1.ProgressivePerGroup)}))
	}
	for other, set := range blocks {
		if set && other != typ {
			name := strings.ToLower(string(other[:1])) + string(other[1:])
			errs = append(errs, field.Forbidden(path.Child(name), fmt.Sprintf("only read with type %s; this rollout is %s", other, typ)))
		}
	}
	switch typ {
	case clusterv1alpha1.All:
		if s.All != nil {
			p := path.Child("all")
			if s.All.MinSuccessTime.Duration != 0 {
				errs = append(errs, field.Forbidden(p.Child("minSuccessTime"), "not read with type All: every cluster takes the change at once; use Progressive to soak"))
			}
			if !isUnset(s.All.MaxFailures) {
				errs = append(errs, field.Forbidden(p.Child("maxFailures"), "not read with type All: nothing is held back to stop; use Progressive to stop on failures"))
			}
			errs = append(errs, validateDeadline(s.All.ProgressDeadline, p.Child("progressDeadline"))...)
		}
	case clusterv1alpha1.Progressive:
		p := path.Child("progressive")
		if s.Progressive == nil || isUnset(s.Progressive.MaxConcurrency) {
			errs = append(errs, field.Required(p.Child("maxConcurrency"), "how many clusters take the change at once, at least 1; unset or 0, OCM gives it to every cluster at once, which type All says"))
		} else {
			errs = append(errs, validateSize(s.Progressive.MaxConcurrency, 1, p.Child("maxConcurrency"))...)
		}
		if s.Progressive != nil {
			errs = append(errs, validateConfig(s.Progressive.RolloutConfig, p)...)
			errs = append(errs, validateGroups(s.Progressive.MandatoryDecisionGroups.MandatoryDecisionGroups, p.Child("mandatoryDecisionGroups"))...)
		}
	case clusterv1alpha1.ProgressivePerGroup:
		if s.ProgressivePerGroup != nil {
			p := path.Child("progressivePerGroup")
			errs = append(errs, validateConfig(s.ProgressivePerGroup.RolloutConfig, p)...)
			errs = append(errs, validateGroups(s.ProgressivePerGroup.MandatoryDecisionGroups.MandatoryDecisionGroups, p.Child("mandatoryDecisionGroups"))...)
		}
	}
	return errs
}

func validateConfig(c clusterv1alpha1.RolloutConfig, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.MinSuccessTime.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("minSuccessTime"), c.MinSuccessTime.Duration.String(), "must not be negative"))
	}
	if !isUnset(c.MaxFailures) {
		errs = append(errs, validateSize(c.MaxFailures, 0, path.Child("maxFailures"))...)
	}
	return append(errs, validateDeadline(c.ProgressDeadline, path.Child("progressDeadline"))...)
}

func validateGroups(groups []clusterv1alpha1.MandatoryDecisionGroup, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, g := range groups {
		key := "index " + strconv.Itoa(int(g.GroupIndex))
		if g.GroupName != "" {
			key = "name " + g.GroupName
		}
		if seen[key] {
			errs = append(errs, field.Duplicate(path.Index(i), key))
		}
		seen[key] = true
		if g.GroupIndex < 0 {
			errs = append(errs, field.Invalid(path.Index(i).Child("groupIndex"), g.GroupIndex, "must not be negative"))
		}
	}
	return errs
}

// durationPattern is a duration in hours, minutes and seconds, as OCM's
// progressDeadline documents it (2h, 90m, 360s, or 1h30m).
var durationPattern = regexp.MustCompile(`^([0-9]+h)?([0-9]+m)?([0-9]+s)?$`)

func validateDeadline(d string, path *field.Path) field.ErrorList {
	if _, err := parseDeadline(d); err != nil {
		return field.ErrorList{field.Invalid(path, d, err.Error())}
	}
	return nil
}

// parseDeadline reads a progressDeadline: 0 for None (no deadline).
func parseDeadline(d string) (time.Duration, error) {
	if d == "" || d == "None" {
		return 0, nil
	}
	if !durationPattern.MatchString(d) {
		return 0, fmt.Errorf("must be None or a duration in hours, minutes and seconds, such as 2h, 90m or 360s")
	}
	v, err := time.ParseDuration(d)
	if err != nil {
		return 0, err
	}
	if v <= 0 {
		return 0, fmt.Errorf("must be longer than 0s: every cluster would time out as it is given the change; None waits for ever")
	}
	return v, nil
}

// percentPattern is a whole percentage, as OCM's schema has it.
var percentPattern = regexp.MustCompile(`^(100|[0-9]{1,2})%$`)

func validateSize(v intstr.IntOrString, least int, path *field.Path) field.ErrorList {
	switch v.Type {
	case intstr.Int:
		if int(v.IntVal) < least {
			return field.ErrorList{field.Invalid(path, v.IntVal, fmt.Sprintf("must be at least %d", least))}
		}
	case intstr.String:
		if !percentPattern.MatchString(v.StrVal) {
			return field.ErrorList{field.Invalid(path, v.StrVal, "must be a count or a whole percentage up to 100%")}
		}
		if n, _ := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%")); n < least {
			return field.ErrorList{field.Invalid(path, v.StrVal, fmt.Sprintf("must be at least %d%%", least))}
		}
	}
	return nil
}

// isUnset: the zero IntOrString, as an omitted field decodes.
func isUnset(v intstr.IntOrString) bool {
	return v.Type == intstr.Int && v.IntVal == 0 || v.Type == intstr.String && v.StrVal == ""
}

// size reads a count or percentage of a number of clusters, as OCM does
// (a percentage rounded up), capped at the clusters there are; dflt when
// unset.
func size(v intstr.IntOrString, dflt func(of int) int) func(of int) int {
	return func(of int) int {
		if isUnset(v) {
			return dflt(of)
		}
		n := int(v.IntVal)
		if v.Type == intstr.String {
			p, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
			if err != nil {
				return dflt(of)
			}
			n = int(math.Ceil(float64(p) / 100 * float64(of)))
		}
		return min(n, of)
	}
}
