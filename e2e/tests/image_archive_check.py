"""Reads an image archive (dist/image-archive.py's) and checks it the way a
loader would, written apart from the maker: every blob's digest and size
against what names it, the OCI layout (oci-layout, index.json -> manifest ->
config and layer) and the Docker `manifest.json` naming the same blobs, the
config's diff_id against the layer uncompressed. Used by
test_image_archive.py, and by e2e/static-selfcheck.sh when skopeo is
missing:

    python3 e2e/tests/image_archive_check.py ARCHIVE [--extract-layer DIR]
"""
import argparse
import gzip
import hashlib
import io
import json
import sys
import tarfile

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"


class Bad(Exception):
    """The archive is not what a loader takes."""


def expect(ok, message):
    if not ok:
        raise Bad(message)


def digest_of(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def blob(files, descriptor, what):
    """The bytes a descriptor names, checked against its digest and size."""
    d = descriptor.get("digest", "")
    expect(d.startswith("sha256:") and len(d) == 71, f"{what}: digest {d!r} is not sha256:<64 hex>")
    path = "blobs/sha256/" + d[7:]
    expect(path in files, f"{what}: {path} is not in the archive")
    data = files[path]
    expect(digest_of(data) == d, f"{what}: {path} hashes to {digest_of(data)}")
    expect(descriptor.get("size") == len(data), f"{what}: size {descriptor.get('size')} but {path} has {len(data)} bytes")
    return data


def verify(path):
    """Checks the archive; returns what it holds: tag, full name, digests,
    the config, the layer's uncompressed tar and its entries."""
    files, order = {}, []
    with tarfile.open(path, mode="r:") as tar:
        for m in tar.getmembers():
            expect(m.name not in files, f"{m.name} is in the archive twice")
            order.append(m.name)
            if m.isfile():
                files[m.name] = tar.extractfile(m).read()
            else:
                expect(m.isdir(), f"{m.name}: not a file or a directory")
    expect(order == sorted(order), f"entries not sorted: {order}")

    expect(json.loads(files.get("oci-layout", b"{}")).get("imageLayoutVersion") == "1.0.0",
           "oci-layout missing or not imageLayoutVersion 1.0.0")
    expect("index.json" in files, "no index.json")
    index = json.loads(files["index.json"])
    expect(index.get("schemaVersion") == 2 and index.get("mediaType") == INDEX_TYPE, f"index.json: {index}")
    expect(len(index.get("manifests", [])) == 1, f"index.json: not one manifest: {index.get('manifests')}")
    entry = index["manifests"][0]
    expect(entry.get("mediaType") == MANIFEST_TYPE, f"index.json: manifest media type {entry.get('mediaType')}")
    annotations = entry.get("annotations", {})
    full = annotations.get("io.containerd.image.name", "")
    ref = annotations.get("org.opencontainers.image.ref.name", "")
    expect(full and ref and full.endswith(":" + ref),
           f"index.json: io.containerd.image.name {full!r} does not end in ref.name {ref!r}")

    manifest = json.loads(blob(files, entry, "index.json's manifest"))
    expect(manifest.get("schemaVersion") == 2 and manifest.get("mediaType") == MANIFEST_TYPE,
           f"manifest: {manifest}")
    expect(manifest["config"].get("mediaType") == CONFIG_TYPE, f"config media type {manifest['config']}")
    config_bytes = blob(files, manifest["config"], "the manifest's config")
    config = json.loads(config_bytes)
    expect(len(manifest.get("layers", [])) == 1, f"not one layer: {manifest.get('layers')}")
    expect(manifest["layers"][0].get("mediaType") == LAYER_TYPE, f"layer media type {manifest['layers'][0]}")
    compressed = blob(files, manifest["layers"][0], "the manifest's layer")
    expect(compressed[:2] == b"\x1f\x8b", "the layer is not gzip")
    layer = gzip.decompress(compressed)
    expect(config.get("rootfs") == {"type": "layers", "diff_ids": [digest_of(layer)]},
           f"config rootfs {config.get('rootfs')} but the layer uncompressed is {digest_of(layer)}")
    platform = entry.get("platform", {})
    expect((platform.get("architecture"), platform.get("os")) == (config.get("architecture"), config.get("os")),
           f"index.json platform {platform} but config {config.get('architecture')}/{config.get('os')}")

    expect("manifest.json" in files, "no manifest.json (docker load needs it)")
    docker = json.loads(files["manifest.json"])
    expect(isinstance(docker, list) and len(docker) == 1, f"manifest.json: not one image: {docker}")
    docker = docker[0]
    expect(docker.get("Config") == "blobs/sha256/" + manifest["config"]["digest"][7:],
           f"manifest.json Config {docker.get('Config')} is not the OCI manifest's config")
    expect(docker.get("Layers") == ["blobs/sha256/" + manifest["layers"][0]["digest"][7:]],
           f"manifest.json Layers {docker.get('Layers')} are not the OCI manifest's layers")
    tags = docker.get("RepoTags") or []
    expect(len(tags) == 1 and tags[0].rpartition(":")[2] == ref and full.endswith("/" + tags[0].split("/")[-1]),
           f"manifest.json RepoTags {tags} do not name {full}")

    referenced = {"blobs/sha256/" + d[7:] for d in (entry["digest"], manifest["config"]["digest"],
                                                     manifest["layers"][0]["digest"])}
    extra = set(files) - referenced - {"oci-layout", "index.json", "manifest.json"}
    expect(not extra, f"files nothing references: {sorted(extra)}")

    with tarfile.open(fileobj=io.BytesIO(layer), mode="r:") as tar:
        entries = [(m.name, m.type, m.mode, m.uid, m.gid, m.mtime) for m in tar.getmembers()]
    return {"tag": tags[0], "name": full, "ref": ref, "manifest_digest": entry["digest"],
            "config_digest": manifest["config"]["digest"], "config": config, "layer": layer,
            "layer_entries": entries}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("archive")
    p.add_argument("--extract-layer", metavar="DIR", help="unpack the layer into DIR (owners and modes kept)")
    a = p.parse_args()
    try:
        image = verify(a.archive)
    except Bad as e:
        sys.exit(f"image_archive_check: {a.archive}: {e}")
    c = image["config"]["config"]
    print(f"image_archive_check: {a.archive}: {image['tag']} ({image['name']}), manifest {image['manifest_digest']}, "
          f"config {image['config_digest']}: User {c.get('User')}, Entrypoint {c.get('Entrypoint')}, "
          f"Cmd {c.get('Cmd')}; layer: {[e[0] for e in image['layer_entries']]}")
    print(json.dumps(image["config"]))
    if a.extract_layer:
        with tarfile.open(fileobj=io.BytesIO(image["layer"]), mode="r:") as tar:
            # "tar": owners, modes and the sticky bit as written (Python >= 3.12 would filter them)
            safe = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
            tar.extractall(a.extract_layer, numeric_owner=True, **safe)


if __name__ == "__main__":
    main()
