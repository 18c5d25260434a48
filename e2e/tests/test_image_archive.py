"""dist/image-archive.py with a tiny fake binary (no build, no daemon, no
cluster): the archive is an OCI layout and a `docker save`-style archive
naming the same blobs, every digest matches its blob, the config is the
Dockerfile's (user, entrypoint, command, files), the layer holds /regroup
and the /etc/passwd and /etc/group naming user 65532,
and the same binary and arguments give the same bytes. With skopeo on PATH
(CI installs it), skopeo reads it both ways too. e2e/static-selfcheck.sh
does the same with the real static binary and runs it from the unpacked
layer."""
import gzip
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

from e2e_support import REPO
from image_archive_check import Bad, verify

MAKER = REPO / "dist" / "image-archive.py"
FAKE = b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 8  # what it holds is never run


def make(tmp_path, name="image.tar", binary=FAKE, *args):
    path = tmp_path / "regroup"
    path.write_bytes(binary)
    out = tmp_path / name
    p = subprocess.run([sys.executable, str(MAKER), str(path), "-o", str(out), "--revision", "0123abc", *args],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return out, p.stdout


def dockerfile_instruction(word):
    (line,) = [line for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith(word + " ")]
    return line[len(word) + 1:].strip()


def crate_version():
    return re.search(r'^version = "([^"]+)"', (REPO / "proxy" / "Cargo.toml").read_text(), re.M).group(1)


def test_archive_is_the_dockerfiles_image(tmp_path):
    out, printed = make(tmp_path)
    image = verify(out)
    version = crate_version()
    # The name: regroup:VERSION, what the chart and inject default to (test_chart.py checks them).
    assert image["tag"] == f"regroup:{version}"
    assert image["name"] == f"docker.io/library/regroup:{version}" and image["ref"] == version
    assert image["manifest_digest"] in printed
    config = image["config"]
    assert config["os"] == "linux" and config["architecture"] in {"amd64", "arm64"}
    c = config["config"]
    assert c["User"] == dockerfile_instruction("USER") == "65532:65532"
    assert c["Entrypoint"] == json.loads(dockerfile_instruction("ENTRYPOINT")) == ["/regroup"]
    assert c["Cmd"] == json.loads(dockerfile_instruction("CMD")) == ["serve", "--help"]
    assert c["Labels"]["org.opencontainers.image.version"] == version
    assert c["Labels"]["org.opencontainers.image.revision"] == "0123abc"
    # /regroup, the binary itself, 0755, and /etc/passwd and /etc/group, all root's, at the epoch: the
    # files the Dockerfile COPYs into scratch.
    assert image["layer_entries"] == [("etc", tarfile.DIRTYPE, 0o755, 0, 0, 0),
                                      ("etc/group", tarfile.REGTYPE, 0o644, 0, 0, 0),
                                      ("etc/passwd", tarfile.REGTYPE, 0o644, 0, 0, 0),
                                      ("regroup", tarfile.REGTYPE, 0o755, 0, 0, 0)]
    assert "COPY dist/passwd dist/group /etc/" in (REPO / "Dockerfile").read_text().splitlines()
    with tarfile.open(fileobj=io.BytesIO(image["layer"])) as tar:
        assert tar.extractfile("regroup").read() == FAKE
        passwd = tar.extractfile("etc/passwd").read().decode()
        group = tar.extractfile("etc/group").read().decode()
    # The user the kubelet names by uid alone gets group 65532 from here, not 0.
    assert [line for line in passwd.splitlines() if ":65532:" in line] == [
        "nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin"]
    assert "nonroot:x:65532:" in group.splitlines()


def test_same_binary_same_bytes(tmp_path):
    first, _ = make(tmp_path, "first.tar")
    second, _ = make(tmp_path, "second.tar")
    assert first.read_bytes() == second.read_bytes()
    other, _ = make(tmp_path, "other.tar", FAKE + b"\0")
    assert verify(other)["manifest_digest"] != verify(first)["manifest_digest"]
    # SOURCE_DATE_EPOCH / --created: every timestamp, and only that changes.
    dated, _ = make(tmp_path, "dated.tar", FAKE, "--created", "1700000000")
    image = verify(dated)
    assert image["config"]["created"] == "2023-11-14T22:13:20Z"
    assert {e[5] for e in image["layer_entries"]} == {1700000000}
    with tarfile.open(dated) as tar:
        assert {m.mtime for m in tar.getmembers()} == {1700000000}
    assert image["manifest_digest"] != verify(first)["manifest_digest"]


def test_other_tag_and_arch(tmp_path):
    out, _ = make(tmp_path, "image.tar", FAKE, "--tag", "registry.example.com:5000/team/regroup:1.2.3",
                  "--version", "1.2.3", "--arch", "arm64")
    image = verify(out)
    assert image["tag"] == "registry.example.com:5000/team/regroup:1.2.3"
    assert image["name"] == "registry.example.com:5000/team/regroup:1.2.3" and image["ref"] == "1.2.3"
    assert image["config"]["architecture"] == "arm64"
    assert image["config"]["config"]["Labels"]["org.opencontainers.image.version"] == "1.2.3"


def test_refuses_what_is_not_a_binary(tmp_path):
    path = tmp_path / "regroup"
    path.write_text("#!/bin/sh\necho hi\n")
    p = subprocess.run([sys.executable, str(MAKER), str(path), "-o", str(tmp_path / "x.tar")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "not an ELF executable" in p.stderr
    assert not (tmp_path / "x.tar").exists()


def rewrite(src, dst, change):
    """A copy of the archive with change(name, data) -> data applied to each file."""
    with tarfile.open(src) as tin, tarfile.open(dst, "w", format=tarfile.USTAR_FORMAT) as tout:
        for m in tin.getmembers():
            if m.isfile():
                data = change(m.name, tin.extractfile(m).read())
                m.size = len(data)
                tout.addfile(m, io.BytesIO(data))
            else:
                tout.addfile(m)


def test_checker_catches_a_broken_archive(tmp_path):
    """The checker is not a rubber stamp: a layer altered after the fact, or
    a manifest.json naming another config, is refused."""
    good, _ = make(tmp_path)
    manifest = json.loads(tar_files(good)["blobs/sha256/" + verify(good)["manifest_digest"][7:]])
    layer_path = "blobs/sha256/" + manifest["layers"][0]["digest"][7:]

    def flip_layer(name, data):
        return gzip.compress(b"another layer", mtime=0) if name == layer_path else data
    rewrite(good, tmp_path / "bad-layer.tar", flip_layer)
    with pytest.raises(Bad, match="hashes to"):
        verify(tmp_path / "bad-layer.tar")

    def other_config(name, data):
        if name != "manifest.json":
            return data
        doc = json.loads(data)
        doc[0]["Config"] = layer_path
        return json.dumps(doc).encode()
    rewrite(good, tmp_path / "bad-docker.tar", other_config)
    with pytest.raises(Bad, match="is not the OCI manifest's config"):
        verify(tmp_path / "bad-docker.tar")


def tar_files(path):
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_defaults_name_the_archive():
    """The archive's default tag is regroup:VERSION; the chart's default
    image is regroup:appVersion and inject's regroup:CARGO_PKG_VERSION
    (proxy/src/lib.rs): one version for all three."""
    chart = yaml.safe_load((REPO / "charts" / "regroup" / "Chart.yaml").read_text())
    values = yaml.safe_load((REPO / "charts" / "regroup" / "values.yaml").read_text())
    assert chart["appVersion"] == crate_version()
    assert values["regroup"]["image"] == {"repository": "regroup", "tag": "", "pullPolicy": "IfNotPresent"}
    lib = (REPO / "proxy" / "src" / "lib.rs").read_text()
    assert 'pub const IMAGE: &str = concat!("regroup:", env!("CARGO_PKG_VERSION"));' in lib


@pytest.mark.skipif(not shutil.which("skopeo"), reason="skopeo is not installed (CI installs it: .ci/run)")
def test_skopeo_reads_both_formats(tmp_path):
    out, _ = make(tmp_path)
    image = verify(out)
    for transport in ("oci-archive", "docker-archive"):
        p = subprocess.run(["skopeo", "inspect", "--config", f"{transport}:{out}"], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, f"skopeo inspect --config {transport}: {p.stderr}"
        config = json.loads(p.stdout)
        assert config["config"]["User"] == "65532:65532", transport
        assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(image["layer"]).hexdigest()]
    # By name, as a user picks it: the OCI ref.name, the Docker tag.
    for ref in (f"oci-archive:{out}:{image['ref']}", f"docker-archive:{out}:{image['tag']}"):
        p = subprocess.run(["skopeo", "inspect", ref], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, f"skopeo inspect {ref}: {p.stderr}"
        assert json.loads(p.stdout)["Labels"]["org.opencontainers.image.revision"] == "0123abc"
