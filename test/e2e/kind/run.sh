#!/usr/bin/env bash
# FleetVM end to end on kind: a hub and two managed clusters with real Open
# Cluster Management (clusteradm), Argo CD with the GitOpsCluster controller
# on the hub, KubeVirt (software emulation, no nested virtualization needed)
# and CDI on the managed clusters, FleetVM installed from its chart; then the
# lifecycle spec of test/e2e (apply, Ready on every cluster, stop, delete).
#
# Needs Docker, kubectl, git, Go and about 12 GB of memory. kind, clusteradm
# and helm are built from the Go module proxy into bin/ when missing.
#
#   test/e2e/kind/run.sh            # create, test, delete the clusters
#   KEEP_CLUSTERS=1 test/e2e/kind/run.sh   # leave them for a look
#   SKIP_SETUP=1 test/e2e/kind/run.sh      # test clusters kept earlier
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "${here}/../../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "${here}/lib.sh"

# Versions, pinned to what FleetVM builds against; override from the
# environment.
KIND_VERSION=${KIND_VERSION:-v0.30.0}
KIND_NODE_IMAGE=${KIND_NODE_IMAGE:-kindest/node:v1.34.0}
CLUSTERADM_VERSION=${CLUSTERADM_VERSION:-v1.2.0}
HELM_VERSION=${HELM_VERSION:-v3.19.5}
ARGOCD_VERSION=${ARGOCD_VERSION:-v3.2.12}
KUBEVIRT_VERSION=${KUBEVIRT_VERSION:-v1.7.0}
CDI_VERSION=${CDI_VERSION:-v1.63.1}
# The GitOpsCluster controller has no release manifests: its repository's
# deploy/ folder at this ref.
MCI_REF=${MCI_REF:-main}

HUB=${HUB:-fleetvm-hub}
SPOKES=(fleetvm-spoke1 fleetvm-spoke2)
ARGOCD_NAMESPACE=argocd
FLEETVM_NAMESPACE=fleetvm-system
IMG=${IMG:-fleetvm:e2e}

bin="${root}/bin"
export PATH="${bin}:${PATH}"
work=$(mktemp -d)
cleanup() {
  rm -rf "${work}"
  # Clusters this run created go, unless asked to keep them.
  if [[ -z "${SKIP_SETUP:-}" && -z "${KEEP_CLUSTERS:-}" ]]; then
    log "deleting the kind clusters (KEEP_CLUSTERS=1 keeps them)"
    kind delete clusters "${HUB}" "${SPOKES[@]}" || true
  fi
}
trap cleanup EXIT

tools() {
  need docker kubectl git go
  docker info >/dev/null 2>&1 || die "Docker is not running"
  if ! command -v kind >/dev/null; then
    log "building kind ${KIND_VERSION}"
    GOBIN="${bin}" go install "sigs.k8s.io/kind@${KIND_VERSION}"
  fi
  if ! command -v clusteradm >/dev/null; then
    log "building clusteradm ${CLUSTERADM_VERSION}"
    GOBIN="${bin}" go install "open-cluster-management.io/clusteradm/cmd/clusteradm@${CLUSTERADM_VERSION}"
  fi
  HELM=${HELM:-}
  if [[ -z "${HELM}" ]]; then
    HELM="${bin}/helm-${HELM_VERSION}"
    if [[ ! -x "${HELM}" ]]; then
      log "building helm ${HELM_VERSION}"
      GOBIN="${work}" go install "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
      mv "${work}/helm" "${HELM}"
    fi
  fi
}

clusters() {
  local c
  for c in "${HUB}" "${SPOKES[@]}"; do
    if kind get clusters 2>/dev/null | grep -qx "${c}"; then
      log "kind cluster ${c} exists"
      continue
    fi
    log "creating kind cluster ${c}"
    kind create cluster --name "${c}" --image "${KIND_NODE_IMAGE}" --wait 5m
  done
}

ocm() {
  log "Open Cluster Management: hub"
  clusteradm init --wait --context "kind-${HUB}"
  # The join command of the hub, with its token; the spokes reach the hub
  # on the kind network (--force-internal-endpoint-lookup).
  local join token apiserver c
  join=$(clusteradm get token --context "kind-${HUB}" | grep -- '--hub-token')
  token=$(sed -n 's/.*--hub-token \([^ ]*\).*/\1/p' <<<"${join}")
  apiserver=$(sed -n 's/.*--hub-apiserver \([^ ]*\).*/\1/p' <<<"${join}")
  [[ -n "${token}" && -n "${apiserver}" ]] || die "cannot read the join command of clusteradm get token"
  for c in "${SPOKES[@]}"; do
    log "Open Cluster Management: joining ${c}"
    clusteradm join --hub-token "${token}" --hub-apiserver "${apiserver}" --cluster-name "${c}" \
      --force-internal-endpoint-lookup --wait --context "kind-${c}"
  done
  clusteradm accept --clusters "$(IFS=,; echo "${SPOKES[*]}")" --wait --context "kind-${HUB}"
  for c in "${SPOKES[@]}"; do
    kube "${HUB}" wait "managedcluster/${c}" --for condition=ManagedClusterConditionAvailable --timeout 5m
    # FleetVM places by this label; both clusters are "prod".
    kube "${HUB}" label managedcluster "${c}" env=prod --overwrite
  done
}

argocd() {
  log "Argo CD ${ARGOCD_VERSION} on the hub"
  kube "${HUB}" create namespace "${ARGOCD_NAMESPACE}" --dry-run=client -o yaml | kube "${HUB}" apply -f -
  kube "${HUB}" apply -n "${ARGOCD_NAMESPACE}" --server-side --force-conflicts \
    -f "https://raw.githubusercontent.com/argoproj/argo-cd/${ARGOCD_VERSION}/manifests/install.yaml"
  kube "${HUB}" -n "${ARGOCD_NAMESPACE}" rollout status deployment/argocd-applicationset-controller --timeout 10m
  kube "${HUB}" -n "${ARGOCD_NAMESPACE}" rollout status deployment/argocd-repo-server --timeout 10m
  kube "${HUB}" -n "${ARGOCD_NAMESPACE}" rollout status statefulset/argocd-application-controller --timeout 10m
  # Sync as each team's ServiceAccount (FleetVM names it in the team's
  # AppProject); argocd-manager on the spokes is cluster-admin, so it may
  # impersonate.
  kube "${HUB}" -n "${ARGOCD_NAMESPACE}" patch configmap argocd-cm --type merge \
    -p '{"data":{"application.sync.impersonation.enabled":"true"}}'

  log "GitOpsCluster controller (multicloud-integrations ${MCI_REF}) on the hub"
  git clone --quiet --depth 1 --branch "${MCI_REF}" \
    https://github.com/open-cluster-management-io/multicloud-integrations.git "${work}/mci"
  kube "${HUB}" apply --server-side -f "${work}/mci/deploy/crds/"
  kube "${HUB}" apply --server-side -f "${work}/mci/deploy/controller/"

  # GitOpsCluster copies each cluster's Argo CD credentials from the Secret
  # <cluster>-cluster-secret in the cluster's namespace on the hub. ACM's
  # application manager writes it; plain OCM has none, so write it here: a
  # token of a ServiceAccount on the cluster for Argo CD, and the cluster's
  # API server on the kind network.
  local c token ca server
  for c in "${SPOKES[@]}"; do
    kube "${c}" -n kube-system create serviceaccount argocd-manager --dry-run=client -o yaml | kube "${c}" apply -f -
    kube "${c}" create clusterrolebinding argocd-manager --clusterrole cluster-admin \
      --serviceaccount kube-system:argocd-manager --dry-run=client -o yaml | kube "${c}" apply -f -
    kube "${c}" -n kube-system apply -f - <<YAML
apiVersion: v1
kind: Secret
metadata:
  name: argocd-manager-token
  annotations:
    kubernetes.io/service-account.name: argocd-manager
type: kubernetes.io/service-account-token
YAML
    retry 120 "token of argocd-manager on ${c}" has_token "${c}"
    token=$(kube "${c}" -n kube-system get secret argocd-manager-token -o jsonpath='{.data.token}' | base64 -d)
    ca=$(kube "${c}" -n kube-system get secret argocd-manager-token -o jsonpath='{.data.ca\.crt}')
    server="https://${c}-control-plane:6443"
    kube "${HUB}" -n "${c}" apply -f - <<YAML
apiVersion: v1
kind: Secret
metadata:
  name: ${c}-cluster-secret
  labels:
    apps.open-cluster-management.io/cluster-name: ${c}
    apps.open-cluster-management.io/cluster-server: ${c}-control-plane
type: Opaque
stringData:
  name: ${c}
  server: ${server}
  config: '{"bearerToken":"${token}","tlsClientConfig":{"insecure":false,"caData":"${ca}"}}'
YAML
  done
}

# has_token CLUSTER: the token controller filled argocd-manager-token.
has_token() {
  [[ -n "$(kube "$1" -n kube-system get secret argocd-manager-token -o jsonpath='{.data.token}')" ]]
}

kubevirt() {
  local c
  for c in "${SPOKES[@]}"; do
    log "KubeVirt ${KUBEVIRT_VERSION} (emulation) and CDI ${CDI_VERSION} on ${c}"
    kube "${c}" apply -f "https://github.com/kubevirt/kubevirt/releases/download/${KUBEVIRT_VERSION}/kubevirt-operator.yaml"
    kube "${c}" apply -f - <<'YAML'
apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata:
  name: kubevirt
  namespace: kubevirt
spec:
  configuration:
    developerConfiguration:
      # kind nodes have no /dev/kvm: QEMU emulates the CPU.
      useEmulation: true
YAML
    kube "${c}" apply -f "https://github.com/kubevirt/containerized-data-importer/releases/download/${CDI_VERSION}/cdi-operator.yaml"
    kube "${c}" apply -f "https://github.com/kubevirt/containerized-data-importer/releases/download/${CDI_VERSION}/cdi-cr.yaml"
  done
  for c in "${SPOKES[@]}"; do
    kube "${c}" -n kubevirt wait kubevirt/kubevirt --for condition=Available --timeout 15m
    kube "${c}" wait cdi/cdi --for condition=Available --timeout 15m
  done
}

fleetvm() {
  log "FleetVM image ${IMG}"
  docker build -t "${IMG}" "${root}"
  local c
  for c in "${HUB}" "${SPOKES[@]}"; do
    kind load docker-image "${IMG}" --name "${c}"
  done

  log "FleetVM hub chart"
  # CRDs first and server-side, as make deploy does, so a re-run upgrades them.
  kube "${HUB}" apply --server-side -f "${root}/deploy/charts/fleetvm-hub/crds/"
  "${HELM}" upgrade --install fleetvm-hub "${root}/deploy/charts/fleetvm-hub" \
    --kube-context "kind-${HUB}" --namespace "${FLEETVM_NAMESPACE}" --create-namespace \
    --set image.repository="${IMG%:*}" --set image.tag="${IMG##*:}" --set image.pullPolicy=Never \
    --set argocd.namespace="${ARGOCD_NAMESPACE}" \
    --set vmChart.repoURL="${VM_CHART_REPO_URL:-https://github.com/fleetvm/fleetvm.git}" \
    --set vmChart.revision="${VM_CHART_REVISION:-main}" \
    --wait --timeout 10m

  log "fleetvm-agent on every cluster"
  for c in "${SPOKES[@]}"; do
    retry 300 "ManagedClusterAddOn fleetvm on ${c}" kube "${HUB}" -n "${c}" get managedclusteraddon fleetvm
    kube "${HUB}" -n "${c}" wait managedclusteraddon/fleetvm --for condition=Available --timeout 10m
  done
}

spec() {
  log "lifecycle spec"
  local spokes="" c
  for c in "${SPOKES[@]}"; do
    kind get kubeconfig --name "${c}" >"${work}/${c}.kubeconfig"
    spokes+="${spokes:+,}${c}=${work}/${c}.kubeconfig"
  done
  kind get kubeconfig --name "${HUB}" >"${work}/hub.kubeconfig"
  (cd "${root}" && FLEETVM_E2E_KIND_HUB="${work}/hub.kubeconfig" FLEETVM_E2E_KIND_SPOKES="${spokes}" \
    FLEETVM_E2E_KIND_ARGOCD_NAMESPACE="${ARGOCD_NAMESPACE}" \
    go test -count=1 -v -timeout 60m ./test/e2e/kind/)
}

tools
if [[ -z "${SKIP_SETUP:-}" ]]; then
  clusters
  ocm
  argocd
  kubevirt
  fleetvm
fi
spec
