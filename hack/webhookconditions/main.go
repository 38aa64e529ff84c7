// Command webhookconditions writes the matchConditions of FleetVM's
// webhooks (pkg/webhook: the FleetVirtualMachine and the
// FleetVirtualMachineMove validators) into the webhook configuration
// controller-gen generated: its webhook marker has no field for them.
// `make manifests` runs it on deploy/webhook/manifests.yaml, the one file
// the chart and the test environment install.
//
//	go run ./hack/webhookconditions deploy/webhook/manifests.yaml
package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	fleetwebhook "github.com/fleetvm/fleetvm/pkg/webhook"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: webhookconditions <webhook manifests.yaml>")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "webhookconditions:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	// controller-gen writes one document per configuration (mutating,
	// validating), each opened by a "---" line.
	var out []byte
	found := map[string]bool{}
	for _, doc := range documents.Split(string(data), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var config map[string]any
		if err := yaml.Unmarshal([]byte(doc), &config); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		setConditions(config, found)
		b, err := yaml.Marshal(config)
		if err != nil {
			return err
		}
		out = append(append(out, "---\n"...), b...)
	}
	for name := range conditions {
		if !found[name] {
			return fmt.Errorf("%s has no webhook %s", path, name)
		}
	}
	return os.WriteFile(path, out, 0o644)
}

// documents separates the documents of a YAML stream.
var documents = regexp.MustCompile(`(?m)^---[ \t]*$`)

// conditions are the matchConditions of each webhook that has them, by
// the webhook's name.
var conditions = map[string][]admissionregistrationv1.MatchCondition{
	fleetwebhook.FleetVirtualMachineWebhookName: fleetwebhook.FleetVirtualMachineMatchConditions,
	fleetwebhook.MoveWebhookName:                fleetwebhook.MoveMatchConditions,
}

// setConditions writes the matchConditions of the webhooks config holds
// into them, and notes their names in found.
func setConditions(config map[string]any, found map[string]bool) {
	webhooks, _ := config["webhooks"].([]any)
	for _, w := range webhooks {
		hook, ok := w.(map[string]any)
		if !ok {
			continue
		}
		name, _ := hook["name"].(string)
		want, ok := conditions[name]
		if !ok {
			continue
		}
		list := make([]any, 0, len(want))
		for _, c := range want {
			list = append(list, map[string]any{"name": c.Name, "expression": c.Expression})
		}
		hook["matchConditions"] = list
		found[name] = true
	}
}
