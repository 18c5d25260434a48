# regroup's image: one static binary FROM scratch (the sidecar needs no
# shell, no libc and no CA store: it trusts what its kubeconfig or
# service-account directory names, and without a CA the public web roots
# compiled into it, webpki-roots). e2e/static-selfcheck.sh checks that
# this binary starts and serves in an empty root.
#
#   docker build -t regroup:0.1.0 --build-arg REGROUP_COMMIT=$(git rev-parse HEAD) .
#
# (regroup:VERSION is what the chart, `regroup inject` and `regroup
# publish-manifests` default to.) The same image without a container
# daemon: dist/build-image.sh builds this binary the same way and makes it
# into an image archive (dist/image-archive.py: this user, entrypoint and
# command) to load with `kind load image-archive`, `ctr images import` or
# `docker load` (docs/deploy.md, "Image").
#
# (`.git` is not in the build context: the commit `regroup --version` and
# `regroup_build_info` name comes from REGROUP_COMMIT, else `unknown`.)
#
# Host names resolve as in any container: a static glibc (2.34 and later)
# has its files and dns lookups built in and reads the /etc/hosts and
# /etc/resolv.conf the kubelet mounts (docs/deploy.md, "Image").
#
# The binary is built with `--profile dist` (Cargo.toml: fat LTO, one
# codegen unit): fewer instructions per request and a smaller RSS under
# load than `release` (docs/performance.md, "Build profile"), for a final link that
# is one single-threaded step of several minutes.
FROM rust:1-bookworm AS build
WORKDIR /src
ARG REGROUP_COMMIT=unknown
COPY . .
RUN REGROUP_COMMIT="$REGROUP_COMMIT" RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --profile dist --locked -p regroup --bin regroup \
      --target "$(rustc -vV | sed -n 's/^host: //p')" \
 && cp target/*/dist/regroup /regroup

FROM scratch
# User and group 65532 by name too: the kubelet gives the runtime only the
# uid of USER (a pod without runAsGroup), and the group comes from
# /etc/passwd (0 without one).
COPY dist/passwd dist/group /etc/
COPY --from=build /regroup /regroup
USER 65532:65532
ENTRYPOINT ["/regroup"]
CMD ["serve", "--help"]
