# syntax=docker/dockerfile:1
# One image carries both binaries: fleetvm-hub (the hub Deployment, its
# entrypoint) and fleetvm-agent (deployed to managed clusters by the addon,
# which runs it with command /usr/local/bin/fleetvm-agent). They share almost
# all dependencies except Argo CD's API types, so one image is ~15% larger
# than the agent alone but halves what a hub must mirror, sign and scan, and
# the hub and its agents can never run different builds.
#
# Needs BuildKit (Docker 23+ or docker buildx). Cross-builds run the Go
# compiler natively: `docker buildx build --platform linux/arm64 .`.
# .dockerignore sends only what the COPY lines below need.
ARG GO_VERSION=1.25

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
# Static binaries, and the Go of the image: go.mod asks for go 1.25.5, so an
# older image fails here rather than downloading another toolchain.
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY apis/ apis/
COPY cmd/ cmd/
COPY pkg/ pkg/
COPY manifests/ manifests/
ARG TARGETOS TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/fleetvm-hub ./cmd/fleetvm-agent

# Distroless static, non-root (uid 65532): no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/fleetvm-hub /out/fleetvm-agent /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/fleetvm-hub"]
