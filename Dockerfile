# syntax=docker/dockerfile:1
# The semops image as users' CI builds it (hack/image builds the same image without a registry:
# the same binary on the same kind of root filesystem, uid 65532, /semops).
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1) \
#     --build-arg REVISION=$(git rev-parse HEAD) \
#     --build-arg SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) -t semops .

# Pinned builder: the Rust release this project is tested with, on Debian 12 (bookworm), the
# same glibc as the runtime below. Pin by digest too where your registry policy asks for it.
ARG RUST_VERSION=1.95.0
FROM docker.io/library/rust:${RUST_VERSION}-slim-bookworm AS build
ARG REVISION=unknown
ARG SOURCE_DATE_EPOCH=0
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    SEMOPS_GIT_COMMIT=${REVISION} SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH} \
    cargo build --release --locked --bin semops \
 && install -m 0755 target/release/semops /semops \
 && strip --strip-unneeded /semops

# Minimal runtime: glibc, libgcc, CA certificates, a nonroot user; no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
ARG VERSION=0.0.0
ARG REVISION=unknown
LABEL org.opencontainers.image.source="https://github.com/semops/semops" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.title="semops"
COPY --from=build /semops /semops
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/semops"]
CMD ["run"]
