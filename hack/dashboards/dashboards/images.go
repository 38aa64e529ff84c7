package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// diskImages follows FleetDiskImages: where they are imported and in
// which phase, which VMs use them, and how long unused copies have left
// before they are pruned.
func diskImages() board {
	imageSel := `namespace=~"$namespace", image=~"$image"`
	onCluster := imageSel + `, cluster=~"$cluster"`
	return board{
		name:  "disk-images",
		uid:   "fleetvm-disk-images",
		title: "FleetVM / Disk images",
		description: "FleetDiskImages: their copies on the clusters by phase, the VMs that use them, " +
			"unused copies against their retention, and the agents' image inventories pruning relies on.",
		variables: []cog.Builder[dashboard.VariableModel]{
			datasourceVariable(),
			labelVariable("namespace", "Namespace", "fleetvm_diskimage_retention_seconds", "namespace"),
			labelVariable("image", "FleetDiskImage", `fleetvm_diskimage_retention_seconds{namespace=~"$namespace"}`, "image"),
			labelVariable("cluster", "Cluster", "fleetvm_agent_inventory_timestamp_seconds", "cluster"),
		},
		rows: []row{{
			title: "Images",
			panels: []cog.Builder[dashboard.Panel]{
				single(look{title: "FleetDiskImages", w: 6, h: 4,
					description: "FleetDiskImages in the selected namespaces."},
					q(`count(`+hub("fleetvm_diskimage_retention_seconds", imageSel)+`)`, "")),
				single(look{title: "Ready on clusters", w: 6, h: 4,
					description: "Image copies imported and ready, summed over the clusters."},
					q(`sum(`+hub("fleetvm_diskimage_clusters", imageSel+`, phase="Ready"`)+`)`, "")),
				single(look{title: "Importing", w: 6, h: 4,
					description: "Image copies pending or importing."},
					q(`sum(`+hub("fleetvm_diskimage_clusters", imageSel+`, phase=~"Pending|Importing"`)+`)`, "")),
				single(look{title: "Failed", w: 6, h: 4,
					description: "Image copies whose import failed; VMs that need them do not boot there."},
					q(`sum(`+hub("fleetvm_diskimage_clusters", imageSel+`, phase="Failed"`)+`)`, "")),
				stacked(look{title: "Image copies by phase", w: 12, h: 8,
					description: "Copies of the selected images on the clusters, by phase (Pending, Importing, Ready, Failed, Pruning)."},
					q(`sum by (phase) (`+hub("fleetvm_diskimage_clusters", imageSel)+`)`, "{{phase}}")),
				list(look{title: "Images not ready everywhere", w: 12, h: 8,
					description: "For each image, its copies in a phase other than Ready."},
					q(hub("fleetvm_diskimage_clusters", imageSel+`, phase!="Ready"`)+` > 0`, "")),
			},
		}, {
			title: "Use",
			panels: []cog.Builder[dashboard.Panel]{
				timeSeries(look{title: "VMs using each image", w: 12, h: 8,
					description: "VMs on the clusters, fleet-managed or not, that use each image."},
					q(`sum by (namespace, image) (`+hub("fleetvm_diskimage_references", onCluster)+`)`, "{{namespace}}/{{image}}")),
				bars(look{title: "VMs using an image, per cluster", w: 12, h: 8,
					description: "VMs that use one of the selected images, on each cluster."},
					q(`sort_desc(sum by (cluster) (`+hub("fleetvm_diskimage_references", onCluster)+`))`, "{{cluster}}")),
			},
		}, {
			title: "Retention and pruning",
			panels: []cog.Builder[dashboard.Panel]{
				list(look{title: "Unused copies: time left before pruning", unit: "s", w: 12, h: 8,
					description: "For each copy no VM uses: when it was last used plus the image's retention, minus now. " +
						"Below zero it may be pruned; it is not while its cluster's agent inventory is stale."},
					q(hub("fleetvm_diskimage_unused_since_timestamp_seconds", onCluster)+`
+ on (namespace, image) group_left ()
`+hub("fleetvm_diskimage_retention_seconds", imageSel)+`
- time()`, "")),
				timeSeries(look{title: "Unused for", unit: "s", w: 12, h: 8,
					description: "How long each unused copy has gone without a VM that uses it."},
					q(`time() - `+hub("fleetvm_diskimage_unused_since_timestamp_seconds", onCluster), "{{namespace}}/{{image}} on {{cluster}}")),
				timeSeries(look{title: "Age of each agent's image inventory", unit: "s", w: 24, h: 8,
					description: "Time since each cluster's agent last confirmed its image inventory (it does every few minutes). " +
						"Older than the hub's --image-inventory-max-age, no image is pruned there on its word."},
					q(`time() - `+hub("fleetvm_agent_inventory_timestamp_seconds", `cluster=~"$cluster"`), "{{cluster}}")),
			},
		}},
	}
}
