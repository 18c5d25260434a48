#!/usr/bin/env python3
"""regroup's image as one archive file, made from a built static binary with
no container daemon and no registry (Python 3 standard library only).

    dist/image-archive.py target/x86_64-unknown-linux-gnu/dist/regroup

writes target/regroup-image-VERSION-ARCH.tar, the image the Dockerfile
builds (one static binary FROM scratch, and /etc/passwd and /etc/group
naming its user 65532), tagged regroup:VERSION: the name
the chart's and `regroup inject`'s defaults use. `dist/build-image.sh`
builds the binary as the Dockerfile does and runs this. The archive is two
formats in one tar, so every loader takes it:

  - an OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/...`:
    manifest, config, one gzip layer): `ctr images import` (what `kind load
    image-archive` runs on each node), `skopeo ... oci-archive:FILE`,
    Docker 25 and later;
  - a `manifest.json` naming the same config and layer blobs, as `docker
    save` writes it: `docker load` of any version, `skopeo ...
    docker-archive:FILE`, and kind, which reads the tags from it.

`index.json` names the image twice: `io.containerd.image.name` (the full
reference, `docker.io/library/regroup:VERSION`, which containerd names the
imported image by; the kubelet looks `regroup:VERSION` up under that name)
and `org.opencontainers.image.ref.name` (the tag alone, as the OCI spec and
`docker save` have it).

Reproducible: entries sorted, every timestamp `--created` (default
$SOURCE_DATE_EPOCH, else 0), owners 0:0 without names, gzip without a name
or time: the same binary and arguments give the same bytes, so the same
image digest (with the same zlib: another zlib may compress differently;
the layer's uncompressed digest, the config's diff_id, stays).
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import platform
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The Dockerfile's image: `USER 65532:65532`, `ENTRYPOINT ["/regroup"]`, `CMD ["serve", "--help"]`.
USER = "65532:65532"
ENTRYPOINT = ["/regroup"]
CMD = ["serve", "--help"]
# uname -m -> the OCI (Go) architecture name.
ARCHES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"


def crate_version():
    """regroup's version: proxy/Cargo.toml's (what `regroup --version` and
    the chart's appVersion say)."""
    section = None
    for line in (REPO / "proxy" / "Cargo.toml").read_text().splitlines():
        if line.startswith("["):
            section = line.strip()
        m = re.fullmatch(r'version\s*=\s*"([^"]+)"\s*', line)
        if section == "[package]" and m:
            return m.group(1)
    sys.exit("image-archive: no version in proxy/Cargo.toml's [package]")


def git_commit():
    """The commit, as proxy/build.rs finds it: $REGROUP_COMMIT, else git, else unknown."""
    if os.environ.get("REGROUP_COMMIT", "").strip():
        return os.environ["REGROUP_COMMIT"].strip()
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=30)
    except OSError:
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def full_reference(tag):
    """`regroup:0.1.0` -> `docker.io/library/regroup:0.1.0`, as Docker and
    containerd normalize a short name; a name with a registry stays."""
    name, sep, version = tag.rpartition(":")
    if not sep or "/" in version or not name:
        sys.exit(f"image-archive: --tag {tag!r} is not NAME:TAG")
    first = name.split("/")[0]
    if "/" not in name:
        name = "docker.io/library/" + name
    elif "." not in first and ":" not in first and first != "localhost":
        name = "docker.io/" + name
    return f"{name}:{version}"


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def blob_path(data):
    return "blobs/sha256/" + hashlib.sha256(data).hexdigest()


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def add(tar, name, data=None, mode=0o644, mtime=0):
    """One entry, owned by 0:0 with no user or group names; a directory when data is None."""
    info = tarfile.TarInfo(name)
    info.mtime, info.mode, info.uid, info.gid, info.uname, info.gname = mtime, mode, 0, 0, "", ""
    if data is None:
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def layer(binary, mtime):
    """The one layer, as the Dockerfile's COPYs into scratch give it, all
    owned by 0:0: /regroup (0755) and dist/passwd and dist/group as
    /etc/passwd and /etc/group (0644), which name user and group 65532. The
    kubelet passes a runtime only the uid of the image's user (a pod with
    no runAsGroup), and the runtime takes the group from /etc/passwd: 0
    without one. Returns (uncompressed tar, gzip of it)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        add(tar, "etc/", mode=0o755, mtime=mtime)
        for name in ("group", "passwd"):
            add(tar, f"etc/{name}", (REPO / "dist" / name).read_bytes(), mtime=mtime)
        add(tar, "regroup", binary, mode=0o755, mtime=mtime)
    gz = io.BytesIO()
    with gzip.GzipFile(filename="", fileobj=gz, mode="wb", mtime=0, compresslevel=9) as f:
        f.write(raw.getvalue())
    return raw.getvalue(), gz.getvalue()


def image(binary, tag, version, revision, arch, created):
    """The archive's files: {path: bytes}."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created))
    diff, blob = layer(binary, created)
    config = canonical({
        "created": stamp,
        "architecture": arch,
        "os": "linux",
        "config": {
            "User": USER,
            "Entrypoint": ENTRYPOINT,
            "Cmd": CMD,
            "Labels": {
                "org.opencontainers.image.title": "regroup",
                "org.opencontainers.image.version": version,
                "org.opencontainers.image.revision": revision,
                "org.opencontainers.image.licenses": "Apache-2.0",
            },
        },
        "rootfs": {"type": "layers", "diff_ids": [sha256(diff)]},
        "history": [{"created": stamp, "created_by": "dist/image-archive.py: /regroup, a static binary"}],
    })
    manifest = canonical({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "digest": sha256(config), "size": len(config)},
        "layers": [{"mediaType": LAYER_TYPE, "digest": sha256(blob), "size": len(blob)}],
    })
    index = canonical({
        "schemaVersion": 2,
        "mediaType": INDEX_TYPE,
        "manifests": [{
            "mediaType": MANIFEST_TYPE, "digest": sha256(manifest), "size": len(manifest),
            "platform": {"architecture": arch, "os": "linux"},
            "annotations": {"io.containerd.image.name": full_reference(tag),
                            "org.opencontainers.image.ref.name": tag.rpartition(":")[2]},
        }],
    })
    docker = canonical([{"Config": blob_path(config), "RepoTags": [tag], "Layers": [blob_path(blob)]}])
    files = {blob_path(b): b for b in (config, manifest, blob)}
    files.update({"oci-layout": canonical({"imageLayoutVersion": "1.0.0"}), "index.json": index,
                  "manifest.json": docker})
    return files, sha256(manifest)


def write(out, files, mtime):
    """The outer tar: the directories, then every file, sorted by path."""
    tmp = out.with_name(out.name + ".part")
    with tarfile.open(tmp, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for d in ("blobs/", "blobs/sha256/"):
            add(tar, d, mode=0o755, mtime=mtime)
        for name in sorted(files):
            add(tar, name, files[name], mtime=mtime)
    os.replace(tmp, out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("binary", type=Path, help="the static regroup binary (dist/build-image.sh builds it)")
    p.add_argument("-o", "--output", type=Path,
                   help="the archive (default: $CARGO_TARGET_DIR or target/, regroup-image-VERSION-ARCH.tar)")
    p.add_argument("--version", help="the image's version label and default tag (default: proxy/Cargo.toml's)")
    p.add_argument("--revision", help="the commit label (default: $REGROUP_COMMIT, else git rev-parse HEAD)")
    p.add_argument("--tag", help="NAME:TAG (default: regroup:VERSION, the chart's and inject's default image)")
    p.add_argument("--arch", help="amd64, arm64, ... (default: this machine's)")
    p.add_argument("--created", type=int, help="UNIX time of every timestamp (default: $SOURCE_DATE_EPOCH, else 0)")
    a = p.parse_args(argv)
    binary = a.binary.read_bytes()
    if binary[:4] != b"\x7fELF":
        sys.exit(f"image-archive: {a.binary} is not an ELF executable")
    version = a.version or crate_version()
    arch = a.arch or ARCHES.get(platform.machine())
    if not arch:
        sys.exit(f"image-archive: no OCI architecture known for {platform.machine()}: pass --arch")
    created = a.created if a.created is not None else int(os.environ.get("SOURCE_DATE_EPOCH") or 0)
    tag = a.tag or f"regroup:{version}"
    out = a.output or Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target") / f"regroup-image-{version}-{arch}.tar"
    out.parent.mkdir(parents=True, exist_ok=True)
    files, digest = image(binary, tag, version, a.revision or git_commit(), arch, created)
    write(out, files, created)
    print(f"image-archive: {out}: {tag} ({arch}), manifest {digest}")


if __name__ == "__main__":
    main()
