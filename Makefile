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
# The local fleet runs its garbage collector (hack/tools/controllermanager).
KUBE_CONTROLLER_MANAGER := $(BIN)/kube-controller-manager
# Argo CD for the local fleet, built in hack/tools/argocd: one binary for
# its controllers and repo server, the helm and kustomize the repo server
# runs, and miniredis (Redis in Go).
ARGOCD_TOOLS   := $(BIN)/argocd $(BIN)/helm $(BIN)/kustomize $(BIN)/miniredis

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
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./apis/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs (deploy/crds), RBAC and webhook manifests from markers.
	$(CONTROLLER_GEN) crd paths=./apis/... output:crd:artifacts:config=deploy/crds
	$(CONTROLLER_GEN) rbac:roleName=fleetvm-hub paths=./pkg/controller/... paths=./pkg/webhook/... paths=./pkg/addon/... paths=./pkg/metrics/... \
		output:rbac:artifacts:config=deploy/rbac
	$(CONTROLLER_GEN) webhook paths=./pkg/webhook/... output:webhook:artifacts:config=deploy/webhook

.PHONY: fmt
fmt: ## Format the Go code.
	$(GO) fmt ./...

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint.
	$(GOLANGCI_LINT) run ./...

.PHONY: verify
verify: generate manifests ## Fail when generated files (deepcopy, CRDs, RBAC, webhooks) are stale or code is unformatted.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed on:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@git diff --exit-code -- apis deploy || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- apis deploy)" || { echo "untracked generated files:"; git status --porcelain -- apis deploy; exit 1; }

##@ Test

.PHONY: test
test: test-binaries ## Run all tests: unit, integration on real API servers, and the real OCM scheduler.
	$(GO) vet ./...
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) $(PKGS)

.PHONY: bench-aggregation
bench-aggregation: test-binaries ## Benchmark what one changed agent report costs the hub, at 10, 100 and 1000 clusters.
	$(GO) test -run '^$$' -bench BenchmarkAggregation -benchmem -benchtime $${BENCHTIME:-200x} -timeout 60m ./test/benchmark/aggregation/

.PHONY: test-binaries
test-binaries: $(KUBE_APISERVER) $(ETCD) $(KUBE_CONTROLLER_MANAGER) $(ARGOCD_TOOLS) ## Build kube-apiserver, etcd, kube-controller-manager, Argo CD with helm, kustomize and Redis (reused when present).

##@ Run

RUN_FLAGS ?=

.PHONY: run
run: test-binaries ## Run the local fleet (hub + 3 spokes, real OCM scheduler and Argo CD) with examples/ until Ctrl-C.
	@echo ">> building fleetvm-localfleet"
	$(GO) build -o $(BIN)/fleetvm-localfleet ./hack/localfleet
	@$(BIN)/fleetvm-localfleet $(RUN_FLAGS)

##@ Build

.PHONY: build
build: ## Build fleetvm-hub and fleetvm-agent into bin/.
	$(GO) build -o $(BIN)/ ./cmd/...

##@ Tools (built from the Go module proxy into bin/)

$(CONTROLLER_GEN):
	@echo ">> building controller-gen $(CONTROLLER_TOOLS_VERSION)"
	GOBIN=$(BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)

$(GOLANGCI_LINT):
	@echo ">> building golangci-lint $(GOLANGCI_LINT_VERSION)"
	GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

$(KUBE_APISERVER): hack/tools/apiserver/go.mod
	@echo ">> building kube-apiserver (first time: a few minutes)"
	cd hack/tools/apiserver && $(GO) build -o $@ k8s.io/kubernetes/cmd/kube-apiserver

$(ETCD): hack/tools/etcd/go.mod
	@echo ">> building etcd"
	cd hack/tools/etcd && $(GO) build -o $@ go.etcd.io/etcd/server/v3

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
