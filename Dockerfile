# syntax=docker/dockerfile:1
# The pipeline binary in a small image: `docker compose up --build` uses it
# for the job (pipeline run) and for the data generator (pipeline datagen).

# Build: a static binary (no cgo), so the runtime image needs no libc.
FROM golang:1.26 AS build
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# What `pipeline version` prints. The build context has no .git, so pass
# it: docker build --build-arg VERSION="$(git describe --always --dirty)" .
ARG VERSION=devel
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/eoflow/pipeline/cmd/pipeline/cli.stampedVersion=${VERSION}" -o /out/pipeline ./cmd/pipeline

# Run: Alpine rather than distroless, for busybox wget, which the compose
# health check calls (/healthz); it also carries the CA roots that
# kafka.tls uses.
FROM alpine:3.22
RUN adduser -D -H -u 10001 pipeline && install -d -o 10001 -g 10001 -m 0700 /savepoints
COPY --from=build /out/pipeline /usr/local/bin/pipeline
# The default job; mount another file over it, or set its ${VARS}.
COPY config.yaml /etc/pipeline/config.yaml
# Numeric, so an orchestrator can verify runAsNonRoot.
USER 10001:10001
# In a container the admin listener must leave loopback to be reachable;
# publishing the port is what decides who sees it, and the endpoints that
# act or cost (savepoints, /debug/pprof) need admin.token. Savepoints taken
# over the API go to /savepoints (admin.savepoint_dir, ./savepoints from
# the working directory /).
ENV ADMIN_LISTEN=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/pipeline"]
CMD ["run", "-c", "/etc/pipeline/config.yaml"]
