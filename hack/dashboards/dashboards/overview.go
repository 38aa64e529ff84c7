package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// The variables of the fleet's FleetVirtualMachines.
func namespaceVariable() cog.Builder[dashboard.VariableModel] {
	return labelVariable("namespace", "Namespace", "fleetvm_fleetvirtualmachines", "namespace")
}

func fleetVMVariable() cog.Builder[dashboard.VariableModel] {
	return labelVariable("fleetvirtualmachine", "FleetVirtualMachine",
		`fleetvm_fleetvirtualmachine_clusters_desired{namespace=~"$namespace"}`, "name")
}

func clusterVariable() cog.Builder[dashboard.VariableModel] {
	return labelVariable("cluster", "Cluster", "fleetvm_cluster_copies", "cluster")
}

// overview is the fleet at a glance: FleetVirtualMachines by condition,
// their copies by phase, cluster and environment, why clusters are left
// out, and each copy's CPU, memory and network on its cluster.
func overview() board {
	fvms := func(matchers string) string {
		return hub("fleetvm_fleetvirtualmachines", `namespace=~"$namespace", `+matchers)
	}
	fvmSel := `namespace=~"$namespace", name=~"$fleetvirtualmachine"`
	const onCluster = `cluster=~"$cluster"`
	return board{
		name:  "overview",
		uid:   "fleetvm-overview",
		title: "FleetVM / Fleet overview",
		description: "FleetVirtualMachines by condition, their copies by phase, cluster and environment, " +
			"the clusters placement leaves out, and each copy's numbers on its cluster (KubeVirt).",
		variables: []cog.Builder[dashboard.VariableModel]{
			datasourceVariable(), namespaceVariable(), fleetVMVariable(), clusterVariable(),
		},
		rows: []row{{
			title: "FleetVirtualMachines",
			panels: []cog.Builder[dashboard.Panel]{
				single(look{title: "FleetVirtualMachines", w: 4, h: 4,
					description: "FleetVirtualMachines in the selected namespaces."},
					q(`sum(`+fvms(`condition="Ready"`)+`)`, "")),
				single(look{title: "Ready", w: 4, h: 4,
					description: "FleetVirtualMachines whose Ready condition is True."},
					q(`sum(`+fvms(`condition="Ready", status="True"`)+`)`, "")),
				single(look{title: "Not ready", w: 4, h: 4,
					description: "FleetVirtualMachines whose Ready condition is False or Unknown."},
					q(`sum(`+fvms(`condition="Ready", status!="True"`)+`)`, "")),
				single(look{title: "Degraded", w: 4, h: 4,
					description: "FleetVirtualMachines whose Degraded condition is True: a copy failed or is missing."},
					q(`sum(`+fvms(`condition="Degraded", status="True"`)+`)`, "")),
				single(look{title: "Copies not ready", w: 4, h: 4,
					description: "Desired copies that are not running and ready, summed over the FleetVirtualMachines (status.summary desired - ready)."},
					q(`sum(
  `+hub("fleetvm_fleetvirtualmachine_clusters_desired", `namespace=~"$namespace"`)+`
  - `+hub("fleetvm_fleetvirtualmachine_clusters_ready", `namespace=~"$namespace"`)+`
)`, "")),
				single(look{title: "Clusters left out", w: 4, h: 4,
					description: "Clusters placement keeps off the FleetVirtualMachines, summed over them (status.placement.excluded)."},
					q(`sum(`+hub("fleetvm_placement_exclusions", `namespace=~"$namespace"`)+`)`, "")),
				stacked(look{title: "FleetVirtualMachines by condition", w: 12, h: 8,
					description: "FleetVirtualMachines whose condition is True, for each condition."},
					q(`sum by (condition) (`+fvms(`status="True"`)+`)`, "{{condition}}")),
				timeSeries(look{title: "Not ready, by namespace", w: 12, h: 8,
					description: "FleetVirtualMachines whose Ready condition is not True, per namespace."},
					q(`sum by (namespace) (`+fvms(`condition="Ready", status!="True"`)+`)`, "{{namespace}}")),
			},
		}, {
			title: "Copies",
			panels: []cog.Builder[dashboard.Panel]{
				stacked(look{title: "Copies by phase", w: 12, h: 8,
					description: "The copies of the selected FleetVirtualMachines by the VM's phase on its cluster."},
					q(`sum by (phase) (`+hub("fleetvm_fleetvirtualmachine_clusters", fvmSel)+`)`, "{{phase}}")),
				list(look{title: "FleetVirtualMachines with copies not ready", w: 12, h: 8,
					description: "Desired copies minus ready ones, for each FleetVirtualMachine that lacks some."},
					q(hub("fleetvm_fleetvirtualmachine_clusters_desired", fvmSel)+`
- `+hub("fleetvm_fleetvirtualmachine_clusters_ready", fvmSel)+`
> 0`, "")),
				bars(look{title: "Copies per cluster", w: 8, h: 8,
					description: "FleetVirtualMachine copies on each managed cluster, every phase."},
					q(`sort_desc(sum by (cluster) (`+hub("fleetvm_cluster_copies", `cluster=~"$cluster"`)+`))`, "{{cluster}}")),
				bars(look{title: "Copies per environment", w: 8, h: 8,
					description: "FleetVirtualMachine copies on the clusters of each environment (the environment label of the ManagedCluster)."},
					q(`sort_desc(sum by (environment) (`+hub("fleetvm_cluster_copies", `cluster=~"$cluster"`)+`))`, "{{environment}}")),
				timeSeries(look{title: "Copies not running, by cluster and phase", w: 8, h: 8,
					description: "Copies in any phase but Running, per cluster and phase."},
					q(`sum by (cluster, phase) (`+hub("fleetvm_cluster_copies", `cluster=~"$cluster", phase!="Running"`)+`)`, "{{cluster}} {{phase}}")),
			},
		}, {
			title: "Placement",
			panels: []cog.Builder[dashboard.Panel]{
				stacked(look{title: "Clusters left out, by reason", w: 12, h: 8,
					description: "Clusters placement keeps off the FleetVirtualMachines, summed over them, by the first reason " +
						"(Environment, Selector, Taint, AgentNotReporting, MissingNetwork, NoRoom, NotNeeded)."},
					q(`sum by (reason) (`+hub("fleetvm_placement_exclusions", `namespace=~"$namespace"`)+`)`, "{{reason}}")),
				list(look{title: "Clusters left out, by namespace and reason", w: 12, h: 8,
					description: "The same, for each namespace."},
					q(hub("fleetvm_placement_exclusions", `namespace=~"$namespace"`)+` > 0`, "")),
			},
		}, {
			title: "Copies on their clusters (KubeVirt)",
			panels: []cog.Builder[dashboard.Panel]{
				timeSeries(look{title: "CPU of each copy", unit: "short", w: 12, h: 8,
					description: "CPU cores each copy's VM uses on its cluster (vCPUs and hypervisor): KubeVirt's " +
						"kubevirt_vmi_cpu_usage_seconds_total, joined to the FleetVirtualMachine through kubevirt_vm_labels."},
					q(perCopy("sum", `rate(kubevirt_vmi_cpu_usage_seconds_total{`+onCluster+`}[$__rate_interval])`, onCluster), copyLegend)),
				timeSeries(look{title: "Guest memory used by each copy", unit: "bytes", w: 12, h: 8,
					description: "Memory the guest of each copy uses: available minus usable, as KubeVirt's " +
						"kubevirt_vmi_memory_used_bytes recording rule computes it (the raw series, so the rule need not be collected). " +
						"Needs the guest's memory balloon statistics."},
					q(perCopy("max", `kubevirt_vmi_memory_available_bytes{`+onCluster+`} - kubevirt_vmi_memory_usable_bytes{`+onCluster+`}`, onCluster), copyLegend)),
				timeSeries(look{title: "Network of each copy", unit: "Bps", w: 12, h: 8,
					description: "Bytes each copy's VM receives and sends per second, all its interfaces."},
					q(perCopy("sum", `rate(kubevirt_vmi_network_receive_bytes_total{`+onCluster+`}[$__rate_interval])`, onCluster), copyLegend+" received"),
					q(perCopy("sum", `rate(kubevirt_vmi_network_transmit_bytes_total{`+onCluster+`}[$__rate_interval])`, onCluster), copyLegend+" sent")),
				timeSeries(look{title: "VMs on the clusters against desired copies", w: 12, h: 8,
					description: "VirtualMachines KubeVirt reports on the clusters for each FleetVirtualMachine (the clusters' truth), " +
						"against the copies the hub wants (status.summary.desired)."},
					q(`count by (label_fleetvm_io_namespace, label_fleetvm_io_name) (
  `+vmLabels(onCluster)+`
)`, "{{label_fleetvm_io_namespace}}/{{label_fleetvm_io_name}} on the clusters"),
					q(hub("fleetvm_fleetvirtualmachine_clusters_desired", fvmSel), "{{namespace}}/{{name}} desired")),
			},
		}},
	}
}
