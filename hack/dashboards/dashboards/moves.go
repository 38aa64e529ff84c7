package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// moves follows FleetVirtualMachineMoves (their phases, methods and
// deadlines, a live move's migration on KubeVirt) and the drains of
// clusters that carry the drain taint.
func moves() board {
	move := func(matchers string) string {
		return hub("fleetvm_move_phase", `namespace=~"$namespace", fleetvirtualmachine=~"$fleetvirtualmachine"`+matchers)
	}
	const notEnded = `, phase!~"Succeeded|Failed"`
	// deadline is each move's deadline, for the selected moves.
	deadline := hub("fleetvm_move_deadline_timestamp_seconds", `namespace=~"$namespace"`)
	drainSel := `cluster=~"$drained"`
	return board{
		name:  "moves-drains",
		uid:   "fleetvm-moves-drains",
		title: "FleetVM / Moves and drains",
		description: "FleetVirtualMachineMoves by phase and method, their deadlines, live migrations on KubeVirt, " +
			"and the drains of clusters that carry the fleetvm.io/drain taint.",
		variables: []cog.Builder[dashboard.VariableModel]{
			datasourceVariable(), namespaceVariable(), fleetVMVariable(),
			labelVariable("drained", "Draining cluster", "fleetvm_drain_copies", "cluster"),
		},
		rows: []row{{
			title: "Moves",
			panels: []cog.Builder[dashboard.Panel]{
				single(look{title: "Moves in progress", w: 6, h: 4,
					description: "FleetVirtualMachineMoves that have not ended (neither Succeeded nor Failed)."},
					q(`count(`+move(notEnded)+`)`, "")),
				single(look{title: "Moves past their deadline", w: 6, h: 4,
					description: "Moves not ended whose timeout has passed. Such a move rolls back; one that stays here is stuck."},
					q(`count(
  (`+deadline+` < time())
  and on (namespace, name) `+move(notEnded)+`
)`, "")),
				single(look{title: "Failed moves", w: 6, h: 4,
					description: "Moves that ended Failed and are still kept (until their TTL)."},
					q(`count(`+move(`, phase="Failed"`)+`)`, "")),
				single(look{title: "Succeeded moves", w: 6, h: 4,
					description: "Moves that ended Succeeded and are still kept (until their TTL)."},
					q(`count(`+move(`, phase="Succeeded"`)+`)`, "")),
				stacked(look{title: "Moves by phase", w: 12, h: 8,
					description: "FleetVirtualMachineMoves by their current phase."},
					q(`sum by (phase) (`+move("")+`)`, "{{phase}}")),
				stacked(look{title: "Moves in progress, by method", w: 12, h: 8,
					description: "Moves not ended, by the method they run (Restart, Cold, Live)."},
					q(`sum by (method) (`+move(notEnded)+`)`, "{{method}}")),
				list(look{title: "Moves in progress: time to their deadline", unit: "s", w: 12, h: 8,
					description: "Each move not ended, its phase and method, and the time left before its timeout; below zero, past it."},
					q(`(`+deadline+` - time())
* on (namespace, name) group_left (fleetvirtualmachine, method, phase)
`+move(notEnded), "")),
				list(look{title: "Failed moves", w: 12, h: 8,
					description: "Moves that ended Failed; kubectl describe the move for why."},
					q(move(`, phase="Failed"`), "")),
				timeSeries(look{title: "Live moves: memory left to migrate (KubeVirt)", unit: "bytes", w: 24, h: 8,
					description: "For a copy KubeVirt is live-migrating (a Live move), the guest memory still to send: " +
						"kubevirt_vmi_migration_data_remaining_bytes on the clusters, joined to the FleetVirtualMachine through kubevirt_vm_labels."},
					q(perCopy("max", "kubevirt_vmi_migration_data_remaining_bytes", ""), copyLegend)),
			},
		}, {
			title: "Drains",
			panels: []cog.Builder[dashboard.Panel]{
				single(look{title: "Clusters draining", w: 6, h: 4,
					description: "Clusters that carry the drain taint (fleetvm.io/drain)."},
					q(`count(`+hub("fleetvm_drain_copies", drainSel)+`)`, "")),
				single(look{title: "Copies left on draining clusters", w: 6, h: 4,
					description: "FleetVirtualMachine copies still on the draining clusters."},
					q(`sum(`+hub("fleetvm_drain_copies", drainSel)+`)`, "")),
				single(look{title: "Longest since a drain moved on", unit: "s", w: 12, h: 4,
					description: "The longest time any drain has gone without progress: since its taint was added or one of its moves last started or ended."},
					q(`max(time() - `+hub("fleetvm_drain_last_progress_timestamp_seconds", drainSel)+`)`, "")),
				timeSeries(look{title: "Copies left per draining cluster", w: 12, h: 8,
					description: "FleetVirtualMachine copies still on each draining cluster; a drain ends at zero."},
					q(hub("fleetvm_drain_copies", drainSel), "{{cluster}}")),
				timeSeries(look{title: "Time since each drain moved on", unit: "s", w: 12, h: 8,
					description: "For each draining cluster, the time since its taint was added or one of its moves last started or ended."},
					q(`time() - `+hub("fleetvm_drain_last_progress_timestamp_seconds", drainSel), "{{cluster}}")),
			},
		}},
	}
}
