# syntax=docker/dockerfile:1
# One image carries both binaries: fleetvm-hub (hub Deployment) and
# fleetvm-agent (deployed to spokes by the addon). They share almost all
# dependencies except Argo CD's API types, so one image is ~15% larger than
# the agent alone but halves what a hub must mirror, sign and scan.
ARG GO_VERSION=1.25

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY apis/ apis/
COPY cmd/ cmd/
COPY pkg/ pkg/
COPY manifests/ manifests/
COPY deploy/ deploy/
ARG TARGETOS=linux TARGETARCH=amd64
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/fleetvm-hub ./cmd/fleetvm-agent

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/fleetvm-hub /out/fleetvm-agent /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/fleetvm-hub"]
