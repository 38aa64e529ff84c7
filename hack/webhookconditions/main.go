// Command webhookconditions writes the FleetVirtualMachine webhook's
// matchConditions (pkg/webhook) into the webhook configuration
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
	found := false
	for _, doc := range documents.Split(string(data), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var config map[string]any
		if err := yaml.Unmarshal([]byte(doc), &config); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if setConditions(config) {
			found = true
		}
		b, err := yaml.Marshal(config)
		if err != nil {
			return err
		}
		out = append(append(out, "---\n"...), b...)
	}
	if !found {
		return fmt.Errorf("%s has no webhook %s", path, fleetwebhook.FleetVirtualMachineWebhookName)
	}
	return os.WriteFile(path, out, 0o644)
}

// documents separates the documents of a YAML stream.
var documents = regexp.MustCompile(`(?m)^---[ \t]*$`)

// setConditions writes the FleetVirtualMachine webhook's matchConditions
// into config, if config holds that webhook.
func setConditions(config map[string]any) bool {
	webhooks, _ := config["webhooks"].([]any)
	found := false
	for _, w := range webhooks {
		hook, ok := w.(map[string]any)
		if !ok || hook["name"] != fleetwebhook.FleetVirtualMachineWebhookName {
			continue
		}
		conditions := make([]any, 0, len(fleetwebhook.FleetVirtualMachineMatchConditions))
		for _, c := range fleetwebhook.FleetVirtualMachineMatchConditions {
			conditions = append(conditions, map[string]any{"name": c.Name, "expression": c.Expression})
		}
		hook["matchConditions"] = conditions
		found = true
	}
	return found
}
