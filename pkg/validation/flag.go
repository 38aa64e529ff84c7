package validation

import (
	"flag"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// NamespacesFlag is a flag of comma-separated namespaces written into
// list; an empty value is no namespace.
func NamespacesFlag(list *[]string) flag.Value { return namespacesFlag{list} }

type namespacesFlag struct{ list *[]string }

func (f namespacesFlag) String() string {
	if f.list == nil {
		return ""
	}
	return strings.Join(*f.list, ",")
}

func (f namespacesFlag) Set(v string) error {
	out := []string{}
	for _, ns := range strings.Split(v, ",") {
		if ns = strings.TrimSpace(ns); ns == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
		}
		out = append(out, ns)
	}
	*f.list = out
	return nil
}
