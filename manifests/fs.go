// Package manifests embeds the templates of what the fleetvm addon installs
// on every managed cluster. The addon framework renders them per cluster
// (see pkg/addon) with these values:
//
//   - .ClusterName, .AddonInstallNamespace: built in, set by the framework.
//   - .HubKubeConfigSecret: the Secret the framework's registration agent
//     writes the agent's hub kubeconfig into ("<addon>-hub-kubeconfig").
//   - .Image, .ImagePullPolicy: the agent image, a hub setting.
package manifests

import "embed"

// FS holds the agent templates under "agent/".
//
//go:embed agent
var FS embed.FS

// AgentDir is the folder of FS that holds the agent templates.
const AgentDir = "agent"
