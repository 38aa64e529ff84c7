# FleetVM — build, generate, test.
#
# Everything this Makefile needs is built from the Go module proxy into bin/
# (git-ignored) and reused when present: only Go is required.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

export GOTOOLCHAIN ?= local

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
BIN  := $(ROOT)/bin
GO   ?= go

# Pinned tool versions. kube-apiserver and etcd versions live in the go.mod
# files of hack/tools/apiserver and hack/tools/etcd.
CONTROLLER_TOOLS_VERSION ?= v0.19.0
GOLANGCI_LINT_VERSION    ?= v2.6.2

CONTROLLER_GEN := $(BIN)/controller-gen
GOLANGCI_LINT  := $(BIN)/golangci-lint
KUBE_APISERVER := $(BIN)/kube-apiserver
ETCD           := $(BIN)/etcd
# promtool (Prometheus's rule checker and unit tester, version in
# hack/tools/promtool/go.mod) tests the chart's alerting rules;
# promqlcheck reads their PromQL, and the dashboards', with Prometheus's
# parser against what fleetvm-hub serves.
PROMTOOL       := $(BIN)/promtool
PROMQLCHECK    := $(BIN)/promqlcheck

# Install and lint tools. helm and shellcheck: see their rules under Tools.
HELM_VERSION    ?= v3.19.5
HELM            := $(BIN)/helm-$(HELM_VERSION)
DOCKERFILECHECK := $(BIN)/dockerfilecheck
SHELLCHECK      ?= $(or $(shell command -v shellcheck 2>/dev/null),$(BIN)/shellcheck)
SHELL_SCRIPTS    = $(shell git ls-files --cached --others --exclude-standard '*.sh')

# The image with fleetvm-hub and fleetvm-agent, and where make deploy puts it.
IMAGE_REPO       ?= ghcr.io/fleetvm/fleetvm
IMAGE_TAG        ?= v0.1.0
IMG              ?= $(IMAGE_REPO):$(IMAGE_TAG)
HUB_CHART        := deploy/charts/fleetvm-hub
DEPLOY_RELEASE   ?= fleetvm-hub
DEPLOY_NAMESPACE ?= fleetvm-system
DEPLOY_FLAGS     ?=
# The local fleet runs its garbage collector (hack/tools/controllermanager).
KUBE_CONTROLLER_MANAGER := $(BIN)/kube-controller-manager
# Argo CD for the local fleet, built in hack/tools/argocd: one binary for
# its controllers and repo server, the helm and kustomize the repo server
# runs, and miniredis (Redis in Go).
ARGOCD_TOOLS   := $(BIN)/argocd $(BIN)/helm $(BIN)/kustomize $(BIN)/miniredis
# What the integration suites and the benchmarks start (test/fleetenv): they
# build fleetvm-hub themselves and run the chart through Helm's Go packages.
# kube-controller-manager and Argo CD take most of a first build and only the
# local fleet (make run, the e2e) starts them. promtool runs the alerting
# rules' unit tests (test/integration/monitoring), promqlcheck the check of
# every query against a hub's /metrics (test/integration/fleet); the
# benchmarks need neither.
BENCH_BINARIES       := $(KUBE_APISERVER) $(ETCD)
INTEGRATION_BINARIES := $(BENCH_BINARIES) $(PROMTOOL) $(PROMQLCHECK)

# Test timeouts are generous bounds for a 2-core machine, not targets.
TEST_TIMEOUT ?= 30m
TEST_FLAGS   ?=
PKGS         ?= ./...

##@ General

.PHONY: help
help: ## List every target with a one-line description.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
		/^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for the API types and the hub's view of Argo CD Applications.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./apis/... paths=./pkg/argoapp/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs (deploy/crds), RBAC and webhook manifests from markers, and copy them into the hub chart; write the Grafana dashboards.
	$(CONTROLLER_GEN) crd paths=./apis/... output:crd:artifacts:config=deploy/crds
	$(CONTROLLER_GEN) rbac:roleName=fleetvm-hub paths=./pkg/controller/... paths=./pkg/webhook/... paths=./pkg/addon/... paths=./pkg/metrics/... \
		output:rbac:artifacts:config=deploy/rbac
	$(CONTROLLER_GEN) webhook paths=./pkg/webhook/... output:webhook:artifacts:config=deploy/webhook
	@# The marker has no matchConditions: they come from pkg/webhook.
	$(GO) run ./hack/webhookconditions deploy/webhook/manifests.yaml
	@# Helm reads only files inside the chart: it carries copies, which verify diffs like the rest of deploy/.
	rm -rf $(HUB_CHART)/crds && mkdir -p $(HUB_CHART)/crds $(HUB_CHART)/files
	cp deploy/crds/*.yaml $(HUB_CHART)/crds/
	cp deploy/rbac/role.yaml $(HUB_CHART)/files/role.yaml
	cp deploy/webhook/manifests.yaml $(HUB_CHART)/files/webhook.yaml
	@# The Grafana dashboards (hack/dashboards/dashboards): their JSON into the chart, their pictures into the operator guide.
	$(GO) run ./hack/dashboards

.PHONY: fmt
fmt: ## Format the Go code.
	$(GO) fmt ./...

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) lint-shell lint-dockerfile ## Run golangci-lint, shellcheck and the Dockerfile linter.
	$(GOLANGCI_LINT) run ./...

.PHONY: lint-shell
lint-shell: $(SHELLCHECK) ## Check the shell scripts with shellcheck.
	$(SHELLCHECK) -x $(SHELL_SCRIPTS)

.PHONY: lint-dockerfile
lint-dockerfile: $(DOCKERFILECHECK) ## Check the Dockerfile with BuildKit's linter (the rules of docker build --check), no Docker needed.
	$(DOCKERFILECHECK) Dockerfile

.PHONY: verify
verify: generate manifests ## Fail when generated files (deepcopy, CRDs, RBAC, webhooks, dashboards) are stale, code is unformatted, or a Markdown link is broken.
	$(GO) run ./hack/doclinks .
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed on:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@git diff --exit-code -- apis pkg/argoapp deploy docs/operator-guide/dashboards.md || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- apis pkg/argoapp deploy docs/operator-guide/dashboards.md)" || { echo "untracked generated files:"; git status --porcelain -- apis pkg/argoapp deploy docs/operator-guide/dashboards.md; exit 1; }

##@ Test

# Unit tests start no API server: everything outside test/ and hack/.
# Integration tests (test/..., the benchmark smoke included) run real API
# servers and the real OCM scheduler; e2e runs the local fleet with real
# Argo CD.
UNIT_PKGS        = $(shell $(GO) list ./... | grep -v -e /test/ -e /hack/)
INTEGRATION_PKGS = $(shell $(GO) list ./test/... ./hack/... | grep -v /test/e2e)
E2E_PKGS         = ./test/e2e/...
UNIT_FLAGS      ?= -race

.PHONY: test
test: test-binaries ## Run all tests: vet, unit (-race), integration on real API servers and the real OCM scheduler, e2e on the local fleet.
	$(GO) vet ./...
ifeq ($(PKGS),./...)
	$(GO) test -count=1 $(UNIT_FLAGS) $(TEST_FLAGS) $(UNIT_PKGS)
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) $(INTEGRATION_PKGS) $(E2E_PKGS)
else
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) $(PKGS)
endif

.PHONY: test-unit
test-unit: ## Unit tests only: no API server, with the race detector (well under a minute once built).
	$(GO) test -count=1 $(UNIT_FLAGS) $(TEST_FLAGS) $(UNIT_PKGS)

.PHONY: test-integration
test-integration: $(INTEGRATION_BINARIES) ## Integration tests: real kube-apiservers and etcd, the real OCM scheduler and work agents, the chart and its alerting rules (promtool), the benchmark smoke.
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) $(INTEGRATION_PKGS)

.PHONY: test-e2e
test-e2e: test-binaries ## End-to-end tests on the local fleet with real Argo CD.
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) $(E2E_PKGS)

.PHONY: bench-aggregation
bench-aggregation: $(BENCH_BINARIES) ## Benchmark what one changed agent report costs the hub, at 10, 100 and 1000 clusters.
	$(GO) test -run '^$$' -bench BenchmarkAggregation -benchmem -benchtime $${BENCHTIME:-200x} -timeout 60m ./test/benchmark/aggregation/

BENCH_FLAGS ?=

.PHONY: bench
bench: $(BENCH_BINARIES) ## Fleet benchmark (1000 clusters, real OCM scheduler, fleetvm-hub as its own process): table, and JSON in _output/bench/. BENCH_SCALE=0.1 for a quick run.
	@# As the image builds it (Dockerfile): a cgo build of the same code
	@# exports every symbol and maps about 30 MiB more of its binary.
	CGO_ENABLED=0 $(GO) build -o $(BIN)/fleetvm-hub ./cmd/fleetvm-hub
	$(GO) build -o $(BIN)/fleetvm-bench ./hack/bench
	$(BIN)/fleetvm-bench --hub $(BIN)/fleetvm-hub --out $(ROOT)/_output/bench $(BENCH_FLAGS)

# The bundle: make bench's binaries and what the fleet reads from the
# repository, for a Linux machine without Go (test/fleetenv/bundle.go). Its
# binaries, kube-apiserver and etcd too, are built static (no cgo: they run
# whatever the C library there) and without this machine's paths, as the
# image builds fleetvm-hub.
BUNDLE_VERSION ?= $(shell git describe --tags --always --dirty)
BUNDLE_NAME     = fleetvm-bench-$(BUNDLE_VERSION)-linux-$(shell $(GO) env GOARCH)
BUNDLE_DIR      = $(ROOT)/_output/$(BUNDLE_NAME)
BUNDLE_BUILD    = CGO_ENABLED=0 $(GO) build -trimpath -ldflags="-s -w"

.PHONY: bench-bundle
bench-bundle: ## Pack the fleet benchmark into _output/fleetvm-bench-<version>-linux-<arch>.tar.gz, to run on a Linux machine without Go.
	@test "$$($(GO) env GOOS)" = linux || { echo "make bench-bundle runs on Linux: the bundle is for this machine's architecture"; exit 1; }
	rm -rf $(BUNDLE_DIR) $(BUNDLE_DIR).tar.gz && mkdir -p $(BUNDLE_DIR)/bin
	$(BUNDLE_BUILD) -o $(BUNDLE_DIR)/bin/fleetvm-hub ./cmd/fleetvm-hub
	$(BUNDLE_BUILD) -o $(BUNDLE_DIR)/bin/pdeathsig-shim ./hack/pdeathsig
	$(BUNDLE_BUILD) -o $(BUNDLE_DIR)/fleetvm-bench ./hack/bench
	cd hack/tools/apiserver && $(BUNDLE_BUILD) -o $(BUNDLE_DIR)/bin/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
	cd hack/tools/etcd && $(BUNDLE_BUILD) -o $(BUNDLE_DIR)/bin/etcd go.etcd.io/etcd/server/v3
	$(GO) run ./hack/benchbundle --version $(BUNDLE_VERSION) $(BUNDLE_DIR)
	tar -C $(ROOT)/_output -czf $(BUNDLE_DIR).tar.gz $(BUNDLE_NAME)
	@echo ">> $(BUNDLE_DIR).tar.gz ($$(du -h $(BUNDLE_DIR).tar.gz | cut -f1))"

.PHONY: test-binaries
test-binaries: $(INTEGRATION_BINARIES) $(KUBE_CONTROLLER_MANAGER) $(ARGOCD_TOOLS) ## Build kube-apiserver, etcd, promtool, kube-controller-manager, Argo CD with helm, kustomize and Redis (reused when present).

.PHONY: test-e2e-kind
test-e2e-kind: $(HELM) ## Run the e2e spec on kind: hub + 2 clusters, OCM, Argo CD, KubeVirt (emulation), CDI, FleetVM's chart. Needs Docker.
	HELM=$(HELM) test/e2e/kind/run.sh

##@ Run

RUN_FLAGS ?=

.PHONY: run
run: test-binaries ## Run the local fleet (hub + 3 spokes, real OCM scheduler and Argo CD) with examples/ until Ctrl-C.
	@echo ">> building fleetvm-localfleet"
	$(GO) build -o $(BIN)/fleetvm-localfleet ./hack/localfleet
	@$(BIN)/fleetvm-localfleet $(RUN_FLAGS)

.PHONY: deploy
deploy: $(HELM) ## Install or upgrade FleetVM on the hub of the current kube context: CRDs, then the chart with the image IMAGE_REPO:IMAGE_TAG.
	@# Helm installs crds/ only on first install: apply them so upgrades get CRD changes too.
	kubectl apply --server-side --force-conflicts -f $(HUB_CHART)/crds/
	$(HELM) upgrade --install $(DEPLOY_RELEASE) $(HUB_CHART) --namespace $(DEPLOY_NAMESPACE) --create-namespace \
		--set image.repository=$(IMAGE_REPO) --set image.tag=$(IMAGE_TAG) --wait $(DEPLOY_FLAGS)

.PHONY: undeploy
undeploy: $(HELM) ## Uninstall the chart; CRDs, FleetVirtualMachines and their VMs stay (see docs/operator-guide/install.md).
	$(HELM) uninstall $(DEPLOY_RELEASE) --namespace $(DEPLOY_NAMESPACE) --wait

##@ Build

.PHONY: build
build: ## Build fleetvm-hub, fleetvm-agent and the kubectl-fleetvm plugin into bin/.
	$(GO) build -o $(BIN)/ ./cmd/...

.PHONY: docker-build
docker-build: ## Build the image with fleetvm-hub and fleetvm-agent, tagged IMG (Docker with BuildKit).
	docker build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the image IMG.
	docker push $(IMG)

##@ Tools (built from the Go module proxy into bin/)

$(CONTROLLER_GEN):
	@echo ">> building controller-gen $(CONTROLLER_TOOLS_VERSION)"
	GOBIN=$(BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)

$(GOLANGCI_LINT):
	@echo ">> building golangci-lint $(GOLANGCI_LINT_VERSION)"
	GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

# With envtest's binaries already at hand (KUBEBUILDER_ASSETS, the envtest
# convention), kube-apiserver and etcd are linked from there instead of built.
$(KUBE_APISERVER): hack/tools/apiserver/go.mod
	@if [ -x "$(KUBEBUILDER_ASSETS)/kube-apiserver" ]; then \
		echo ">> using $(KUBEBUILDER_ASSETS)/kube-apiserver (KUBEBUILDER_ASSETS)"; mkdir -p $(BIN); ln -sf "$(KUBEBUILDER_ASSETS)/kube-apiserver" $@; \
	else \
		echo ">> building kube-apiserver (first time: a few minutes)"; \
		cd hack/tools/apiserver && $(GO) build -o $@ k8s.io/kubernetes/cmd/kube-apiserver; \
	fi

$(ETCD): hack/tools/etcd/go.mod
	@if [ -x "$(KUBEBUILDER_ASSETS)/etcd" ]; then \
		echo ">> using $(KUBEBUILDER_ASSETS)/etcd (KUBEBUILDER_ASSETS)"; mkdir -p $(BIN); ln -sf "$(KUBEBUILDER_ASSETS)/etcd" $@; \
	else \
		echo ">> building etcd"; \
		cd hack/tools/etcd && $(GO) build -o $@ go.etcd.io/etcd/server/v3; \
	fi

# Built without Prometheus's service discoveries (the remove_all_sd tag):
# promtool checks and tests rules, and needs none of the cloud SDKs. One
# build for both, so Prometheus's packages compile once.
$(PROMTOOL) $(PROMQLCHECK) &: hack/tools/promtool/go.mod hack/tools/promtool/go.sum hack/tools/promtool/promqlcheck/main.go
	@echo ">> building promtool and promqlcheck"
	cd hack/tools/promtool && $(GO) build -tags remove_all_sd -o $(BIN)/ github.com/prometheus/prometheus/cmd/promtool ./promqlcheck
	@touch $(PROMTOOL) $(PROMQLCHECK)

$(HELM):
	@echo ">> building helm $(HELM_VERSION)"
	tmp=$$(mktemp -d) && GOBIN=$$tmp $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) && mv $$tmp/helm $@ && rmdir $$tmp

$(DOCKERFILECHECK): hack/tools/dockerfilecheck/go.mod hack/tools/dockerfilecheck/main.go
	@echo ">> building dockerfilecheck (BuildKit's Dockerfile linter)"
	cd hack/tools/dockerfilecheck && $(GO) build -o $@ .

# shellcheck is Haskell, not Go: when it is not on PATH, Debian's and
# Ubuntu's package is unpacked into bin/ (apt-get download needs no root).
# Elsewhere, install it from your package manager.
$(BIN)/shellcheck:
	@command -v apt-get >/dev/null || { echo "shellcheck missing: install it (brew install shellcheck, dnf install ShellCheck, ...)"; exit 1; }
	@echo ">> fetching Debian's shellcheck package into bin/"
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && cd $$tmp && \
		{ apt-get download shellcheck || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get download shellcheck; } || \
			{ echo "apt-get download failed: run 'sudo apt-get update' or install shellcheck"; exit 1; }; } && \
		dpkg-deb -x shellcheck_*.deb x && install -m 0755 x/usr/bin/shellcheck $@

$(KUBE_CONTROLLER_MANAGER): hack/tools/controllermanager/go.mod
	@echo ">> building kube-controller-manager (after kube-apiserver: a few minutes)"
	cd hack/tools/controllermanager && $(GO) build -o $@ k8s.io/kubernetes/cmd/kube-controller-manager

# One build for the four, so their shared packages compile once. go build -v
# names each package it compiles: shown as a running count, errors as they are.
$(ARGOCD_TOOLS) &: hack/tools/argocd/go.mod hack/tools/argocd/go.sum $(wildcard hack/tools/argocd/*/*.go)
	@echo ">> building Argo CD (application controller, ApplicationSet controller, repo server), helm, kustomize, miniredis"
	@echo "   first time: 10-20 minutes on 2 cores; reused afterwards"
	cd hack/tools/argocd && $(GO) build -v -o $(BIN)/ ./argocd ./miniredis helm.sh/helm/v3/cmd/helm sigs.k8s.io/kustomize/kustomize/v5 2>&1 | \
		awk '/^[[:alnum:]._~\/-]+$$/ { n++; if (n % 100 == 0) { printf "   %d packages compiled\n", n; fflush() } next } { print; fflush() }'
	@touch $(ARGOCD_TOOLS)
