package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// hubHealth is fleetvm-hub's own health: its replicas, reconciles, work
// queues, admission webhooks, calls to the Kubernetes API, memory and
// CPU, and the heartbeats of its agents.
func hubHealth() board {
	const job = `job="$job"`
	const ctrl = job + `, controller=~"$controller"`
	const queue = job + `, name=~"$controller"`
	// FleetVM's webhooks are named <name>.fleetvm.io.
	const fleetWebhooks = `name=~".+[.]fleetvm[.]io"`
	return board{
		name:  "hub-health",
		uid:   "fleetvm-hub-health",
		title: "FleetVM / Hub health",
		description: "fleetvm-hub's replicas, reconcile rate, errors and latency, work queues, admission webhooks, " +
			"Kubernetes API calls, memory and CPU, and its agents' heartbeats.",
		variables: []cog.Builder[dashboard.VariableModel]{
			datasourceVariable(),
			// The scrape job of fleetvm-hub: the one whose controllers
			// include FleetVM's.
			oneOf("job", "Job", `controller_runtime_reconcile_total{controller="fleetvirtualmachine"}`, "job"),
			labelVariable("controller", "Controller", `controller_runtime_reconcile_total{job="$job"}`, "controller"),
		},
		rows: []row{{
			title: "Overview",
			panels: []cog.Builder[dashboard.Panel]{
				single(look{title: "Replicas up", w: 6, h: 4,
					description: "fleetvm-hub replicas Prometheus scrapes successfully; one is the elected leader."},
					q(`sum(up{`+job+`})`, "")),
				single(look{title: "Reconcile errors, last hour", w: 6, h: 4,
					description: "Reconciles that returned an error in the last hour, every controller."},
					q(`sum(increase(controller_runtime_reconcile_errors_total{`+job+`}[1h]))`, "")),
				single(look{title: "Webhook errors, last hour", w: 6, h: 4,
					description: "Admission requests fleetvm-hub answered with a 5xx code in the last hour."},
					q(`sum(increase(controller_runtime_webhook_requests_total{`+job+`, code=~"5.."}[1h]))`, "")),
				single(look{title: "Memory, largest replica", unit: "bytes", w: 6, h: 4,
					description: "Resident memory of the largest replica; fleetvm-hub gives Go 80 % of its container's memory limit as a soft limit."},
					q(`max(process_resident_memory_bytes{`+job+`})`, "")),
			},
		}, {
			title: "Reconciles",
			panels: []cog.Builder[dashboard.Panel]{
				stacked(look{title: "Reconciles by controller and result", unit: "ops", w: 12, h: 8,
					description: "Reconciles per second, by controller and result (success, error, requeue, requeue_after)."},
					q(`sum by (controller, result) (rate(controller_runtime_reconcile_total{`+ctrl+`}[$__rate_interval]))`, "{{controller}} {{result}}")),
				timeSeries(look{title: "Reconcile errors", unit: "ops", w: 12, h: 8,
					description: "Reconciles per second that returned an error, by controller."},
					q(`sum by (controller) (rate(controller_runtime_reconcile_errors_total{`+ctrl+`}[$__rate_interval]))`, "{{controller}}")),
				timeSeries(look{title: "Reconcile duration", unit: "s", w: 12, h: 8,
					description: "How long a reconcile takes, by controller: the median and the 99th percentile."},
					q(`histogram_quantile(0.99, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{`+ctrl+`}[$__rate_interval])))`, "{{controller}} p99"),
					q(`histogram_quantile(0.5, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{`+ctrl+`}[$__rate_interval])))`, "{{controller}} p50")),
				timeSeries(look{title: "Busy workers", w: 12, h: 8,
					description: "Workers reconciling now, by controller (the leader's; --workers bounds FleetVirtualMachine's)."},
					q(`sum by (controller) (controller_runtime_active_workers{`+ctrl+`})`, "{{controller}}")),
			},
		}, {
			title: "Work queues",
			panels: []cog.Builder[dashboard.Panel]{
				timeSeries(look{title: "Queue depth", w: 8, h: 8,
					description: "Objects waiting in each controller's queue."},
					q(`sum by (name) (workqueue_depth{`+queue+`})`, "{{name}}")),
				timeSeries(look{title: "Queue adds and retries", unit: "ops", w: 8, h: 8,
					description: "Objects added to each queue per second, and those added again after an error (retries)."},
					q(`sum by (name) (rate(workqueue_adds_total{`+queue+`}[$__rate_interval]))`, "{{name}} adds"),
					q(`sum by (name) (rate(workqueue_retries_total{`+queue+`}[$__rate_interval]))`, "{{name}} retries")),
				timeSeries(look{title: "Time in queue", unit: "s", w: 8, h: 8,
					description: "How long an object waits in the queue before a worker takes it (99th percentile)."},
					q(`histogram_quantile(0.99, sum by (name, le) (rate(workqueue_queue_duration_seconds_bucket{`+queue+`}[$__rate_interval])))`, "{{name}} p99")),
			},
		}, {
			title: "Admission webhooks",
			panels: []cog.Builder[dashboard.Panel]{
				timeSeries(look{title: "Webhook requests by code", unit: "reqps", w: 8, h: 8,
					description: "Admission requests fleetvm-hub serves per second, by webhook path and HTTP code."},
					q(`sum by (webhook, code) (rate(controller_runtime_webhook_requests_total{`+job+`}[$__rate_interval]))`, "{{webhook}} {{code}}")),
				timeSeries(look{title: "Webhook latency", unit: "s", w: 8, h: 8,
					description: "How long fleetvm-hub takes to answer an admission request (99th percentile), by webhook path."},
					q(`histogram_quantile(0.99, sum by (webhook, le) (rate(controller_runtime_webhook_latency_seconds_bucket{`+job+`}[$__rate_interval])))`, "{{webhook}} p99")),
				timeSeries(look{title: "FleetVM's webhooks, as the API server sees them", unit: "reqps", w: 8, h: 8,
					description: "The API server's calls to FleetVM's webhooks by code, and its rejections by error type " +
						"(calling_webhook_error: unreachable or timed out; with failurePolicy Fail, the request is refused)."},
					q(`sum by (name, code) (rate(apiserver_admission_webhook_request_total{`+fleetWebhooks+`}[$__rate_interval]))`, "{{name}} {{code}}"),
					q(`sum by (name, error_type) (rate(apiserver_admission_webhook_rejection_count{`+fleetWebhooks+`}[$__rate_interval]))`, "{{name}} rejected: {{error_type}}")),
			},
		}, {
			title: "Kubernetes API and process",
			panels: []cog.Builder[dashboard.Panel]{
				timeSeries(look{title: "Kubernetes API requests", unit: "reqps", w: 6, h: 8,
					description: "Requests fleetvm-hub's clients send to the API server per second, by method and code (--kube-api-qps bounds them)."},
					q(`sum by (method, code) (rate(rest_client_requests_total{`+job+`}[$__rate_interval]))`, "{{method}} {{code}}")),
				timeSeries(look{title: "Memory", unit: "bytes", w: 6, h: 8,
					description: "Each replica's resident memory and Go heap in use."},
					q(`process_resident_memory_bytes{`+job+`}`, "{{instance}} resident"),
					q(`go_memstats_heap_inuse_bytes{`+job+`}`, "{{instance}} heap in use")),
				timeSeries(look{title: "CPU", unit: "short", w: 6, h: 8,
					description: "CPU cores each replica uses."},
					q(`rate(process_cpu_seconds_total{`+job+`}[$__rate_interval])`, "{{instance}}")),
				timeSeries(look{title: "Goroutines", w: 6, h: 8,
					description: "Goroutines of each replica."},
					q(`go_goroutines{`+job+`}`, "{{instance}}")),
			},
		}, {
			title: "Agents and metrics",
			panels: []cog.Builder[dashboard.Panel]{
				timeSeries(look{title: "Agent heartbeats", unit: "s", w: 12, h: 8,
					description: "Time since each managed cluster's agent last confirmed its image inventory; it does every few minutes, " +
						"so a line that keeps rising is an agent that stopped reporting."},
					q(`time() - `+hub("fleetvm_agent_inventory_timestamp_seconds", ""), "{{cluster}}")),
				timeSeries(look{title: "Metrics read errors", unit: "ops", w: 12, h: 8,
					description: "Scrapes in which fleetvm-hub could not read a kind from its cache, per second, by kind; that kind's fleetvm_ series were left out."},
					q(`sum by (kind) (rate(fleetvm_metrics_list_errors_total{`+job+`}[$__rate_interval]))`, "{{kind}}")),
			},
		}},
	}
}
