"""charts/regroup, offline: `helm lint --strict` and `helm template` over a
matrix of values; every rendered object validated against the Kubernetes
JSON schemas of kubernetes-validate (strict: unknown fields are errors); the
pod spec asserted (env override, service-account volumes, probes,
securityContext, regroup's args and config); the chart's RBAC renaming
checked against `regroup render`; regroup's rendered config checked by
`regroup check`; with `webhooks.enabled`, the webhook listener's Service,
certificate, config and mounts; the rendered config started with `regroup
serve`; with `publish.enabled`, regroup alone as publish mode's front (its
pod, config, APIServices and RBAC). Needs helm (e2e/install.sh) and no
cluster."""
import base64
import copy
import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from cryptography.hazmat.primitives import serialization

from e2e_support import E2E, REPO, free_port, stop, wait_port
from test_webhooks import names_prefix
from pki import issue, new_ca

HELM = Path(os.environ.get("REGROUP_E2E_HELM") or E2E / ".bin" / "helm")
CHART = REPO / "charts" / "regroup"
SA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"

RULES = [{"from": "samplecontroller.k8s.io", "to": "samplecontroller.team-b.example.com"},
         {"fromSuffix": "pinniped.dev", "toSuffix": "pinniped.team-b.example.com"}]
APP = {"containers": [{"name": "controller", "image": "registry.k8s.io/sample-controller:v0.31.0",
                       "args": ["-v=2"],
                       "env": [{"name": "FOO", "value": "bar"},
                               {"name": "KUBERNETES_SERVICE_HOST", "value": "ignored"}],
                       "volumeMounts": [{"name": "scratch", "mountPath": "/tmp"}]}],
       "volumes": [{"name": "scratch", "emptyDir": {}}]}
RBAC = {"rules": [{"apiGroups": ["samplecontroller.k8s.io", "login.concierge.pinniped.dev", "pinniped.dev", ""],
                   "resources": ["foos", "events"], "verbs": ["get", "list", "watch"]},
                  {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}]}

# A fronted webhook, as docs/front.md configures one.
HOOK = {"name": "validate-foo", "backend": "https://127.0.0.1:9443/validate-foo",
        "registration": {"service": {"namespace": "team-b", "name": "foo-webhook", "path": "/validate-foo"}}}

# name -> (values, kube version)
MATRIX = {
    "incluster": ({"mode": "inCluster"}, "1.31.0"),
    "kubeconfig": ({"mode": "kubeconfig"}, "1.31.0"),
    "incluster-no-metrics": ({"mode": "inCluster", "regroup": {"metrics": {"enabled": False}}}, "1.31.0"),
    "incluster-old-cluster": ({"mode": "inCluster"}, "1.27.0"),
    "front": ({"mode": "kubeconfig",
               "front": {"enabled": True, "insecureBackend": True,
                         "apiServices": [{"group": "login.concierge.pinniped.dev", "version": "v1alpha1"}]}},
              "1.31.0"),
    "front-own-secret": ({"mode": "inCluster", "regroup": {"tlsSecret": "my-loopback"},
                          "front": {"enabled": True, "insecureBackend": True, "tlsSecret": "my-front",
                                    "caBundle": base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode(),
                                    "apiServices": [{"group": "login.concierge.pinniped.dev", "version": "v1alpha1"}]}},
                         "1.33.0"),
    "front-incluster-namespaced-rbac": ({"mode": "inCluster", "rbac": {"clusterScoped": False},
                                         "front": {"enabled": True, "backendCaSecret": "app-ca",
                                                   "backend": "https://127.0.0.1:10250"}}, "1.29.0"),
    "names": ({"mode": "inCluster",
               "names": {"prefix": "team-b-", "kinds": ["ClusterRole", "ValidatingWebhookConfiguration"]}},
              "1.31.0"),
    "webhooks": ({"mode": "inCluster",
                  "webhooks": {"enabled": True, "insecureBackend": True, "hooks": [HOOK]}}, "1.31.0"),
    # No backendCaSecret: the system roots (#29; formerly a crash-loop at start).
    "webhooks-system-roots": ({"mode": "inCluster",
                               "webhooks": {"enabled": True, "hooks": [HOOK]}}, "1.31.0"),
    "webhooks-own-secrets-and-front": ({"mode": "kubeconfig",
                                        "front": {"enabled": True, "insecureBackend": True},
                                        "webhooks": {"enabled": True, "port": 9555, "service": {"port": 8443},
                                                     "tlsSecret": "my-webhooks", "clientCaSecret": "apiserver-client",
                                                     "backendCaSecret": "app-webhook-ca", "hooks": [HOOK]}},
                                       "1.29.0"),
}


def merge(a, b):
    out = dict(a)
    for k, v in b.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


# An image set in values (the default, regroup:appVersion, is checked by
# test_default_image_is_the_archives).
IMAGE = {"regroup": {"image": {"repository": "regroup", "tag": "dev"}}}


def values_for(extra):
    return merge({"rules": RULES, "app": APP, "rbac": RBAC, **IMAGE}, extra)


def helm(*args, values=None, tmp=None, check=True):
    cmd = [str(HELM), *map(str, args)]
    if values is not None:
        path = tmp / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        cmd += ["-f", str(path)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if check and p.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def template(values, tmp, kube="1.31.0", *extra):
    out = helm("template", "team-b", CHART, "--namespace", "team-b", "--kube-version", kube, *extra,
               values=values, tmp=tmp).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def by_kind(objs, kind):
    return [o for o in objs if o["kind"] == kind]


def one(objs, kind):
    found = by_kind(objs, kind)
    assert len(found) == 1, f"expected one {kind}, found {[o['metadata']['name'] for o in found]}"
    return found[0]


@pytest.fixture(scope="module", autouse=True)
def need_helm():
    if not HELM.exists():
        pytest.fail(f"helm not found at {HELM}: run e2e/install.sh")


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_lint_template_validate(case, tmp_path):
    extra, kube = MATRIX[case]
    values = values_for(extra)
    lint = helm("lint", "--strict", CHART, "--kube-version", kube, values=values, tmp=tmp_path)
    assert "0 chart(s) failed" in lint.stdout
    objs = template(values, tmp_path, kube)
    assert objs, "nothing rendered"
    for o in objs:
        try:
            kubernetes_validate.validate(o, kube, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{o['kind']} {o['metadata']['name']} invalid for Kubernetes {kube}: {e.message}")
    pod_spec_assertions(values, objs, kube)


@pytest.mark.parametrize("example", ["kubeconfig", "incluster", "front"])
def test_documented_examples(example, tmp_path):
    """charts/regroup/examples/*.yaml (docs/deploy.md's worked examples) lint,
    render and validate."""
    path = CHART / "examples" / f"{example}.yaml"
    lint = subprocess.run([str(HELM), "lint", "--strict", str(CHART), "-f", str(path)], capture_output=True,
                          text=True, timeout=120)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    out = subprocess.run([str(HELM), "template", "ex", str(CHART), "-f", str(path), "--kube-version", "1.31.0"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    objs = [d for d in yaml.safe_load_all(out) if d]
    for o in objs:
        kubernetes_validate.validate(o, "1.31.0", strict=True)
    assert one(objs, "Deployment")["spec"]["template"]["spec"]["initContainers"][0]["name"] == "regroup"


def pod_spec_assertions(values, objs, kube):
    mode = values["mode"]
    metrics = values.get("regroup", {}).get("metrics", {}).get("enabled", True)
    front = values.get("front", {}).get("enabled", False)
    webhooks = values.get("webhooks", {}).get("enabled", False)
    native = tuple(map(int, kube.split(".")[:2])) >= (1, 29)
    spec = one(objs, "Deployment")["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["serviceAccountName"] == "team-b-regroup"

    # regroup: a native sidecar on >= 1.29, else an ordinary container
    if native:
        (regroup,) = spec["initContainers"]
        assert regroup["restartPolicy"] == "Always"
        assert [c["name"] for c in spec["containers"]] == ["controller"]
    else:
        assert "initContainers" not in spec
        regroup = spec["containers"][-1]
        assert "restartPolicy" not in regroup
    assert regroup["name"] == "regroup"
    assert regroup["args"] == ["serve", "-c", "/etc/regroup/config/config.yaml"]
    sc = regroup["securityContext"]
    assert sc["runAsNonRoot"] and sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["runAsUser"] != 0
    assert regroup["resources"]["requests"]["cpu"] and regroup["resources"]["requests"]["memory"]
    if metrics:
        assert regroup["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "regroup-metrics"}
        assert regroup["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "regroup-metrics"}
        assert regroup["startupProbe"]["httpGet"]["path"] == "/livez"
        assert {"name": "regroup-metrics", "containerPort": 9090, "protocol": "TCP"} in regroup["ports"]
    else:
        assert not any(k in regroup for k in ("livenessProbe", "readinessProbe", "startupProbe"))
    # regroup reads the real service account at the standard path (its own volume)
    rmounts = {m["mountPath"]: m["name"] for m in regroup["volumeMounts"]}
    assert rmounts[SA_PATH] == "regroup-upstream-sa"
    assert not any(e["name"].startswith("KUBERNETES_SERVICE") for e in regroup.get("env", []))
    vols = {v["name"]: v for v in spec["volumes"]}
    real = vols["regroup-upstream-sa"]["projected"]["sources"]
    assert {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}} in real
    assert any(s.get("configMap", {}).get("name") == "kube-root-ca.crt" for s in real)

    app = next(c for c in spec["containers"] if c["name"] == "controller")
    env = [(e["name"], e.get("value")) for e in app["env"]]
    amounts = {m["mountPath"]: m["name"] for m in app["volumeMounts"]}
    assert amounts["/tmp"] == "scratch" and ("FOO", "bar") in env  # the app's own kept
    assert app["args"] == ["-v=2"] and app["image"].startswith("registry.k8s.io/sample-controller")
    config = yaml.safe_load(next(o for o in by_kind(objs, "ConfigMap")
                                 if o["metadata"]["name"] == "team-b-regroup-config")["data"]["config.yaml"])
    assert config["rules"] == RULES and config["upstream"] == {"inCluster": True}
    assert config["credentials"] == {"passThrough": True}
    assert ("metrics" in config["listeners"]) == metrics
    if mode == "inCluster":
        # the env override: the app's in-cluster config reaches regroup's loopback TLS listener
        assert ("KUBERNETES_SERVICE_HOST", "127.0.0.1") in env
        assert ("KUBERNETES_SERVICE_PORT", "6443") in env
        assert ("KUBERNETES_SERVICE_HOST", "ignored") not in env
        assert config["listeners"]["tls"]["listen"] == "127.0.0.1:6443"
        # ... and trusts it: ca.crt = the serving Secret's CA, token = the pod's own
        assert amounts[SA_PATH] == "regroup-app-sa"
        srcs = vols["regroup-app-sa"]["projected"]["sources"]
        assert {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}} in srcs
        serving = values.get("regroup", {}).get("tlsSecret") or "team-b-regroup-serving"
        assert {"secret": {"name": serving, "items": [{"key": "ca.crt", "path": "ca.crt"}]}} in srcs
        assert vols["regroup-serving"]["secret"]["secretName"] == serving
        assert any("downwardAPI" in s for s in srcs)
        generated = [s for s in by_kind(objs, "Secret") if s["metadata"]["name"] == "team-b-regroup-serving"]
        if serving == "team-b-regroup-serving":
            (secret,) = generated
            assert set(secret["data"]) == {"ca.crt", "tls.crt", "tls.key"}
            assert base64.b64decode(secret["data"]["ca.crt"]).startswith(b"-----BEGIN CERTIFICATE-----")
        else:
            assert not generated
    else:
        assert ("KUBECONFIG", "/etc/regroup-app/kubeconfig") in env
        assert not any(n.startswith("KUBERNETES_SERVICE") for n, _ in env)
        assert SA_PATH not in amounts  # the app holds no token at all
        kc = yaml.safe_load(next(o for o in by_kind(objs, "ConfigMap")
                                 if o["metadata"]["name"] == "team-b-regroup-app-kubeconfig")["data"]["kubeconfig"])
        assert kc["clusters"][0]["cluster"] == {"server": "http://127.0.0.1:8001"}
        assert kc["users"][0]["user"] == {}
    if front:
        assert {"name": "regroup-front", "containerPort": 9443, "protocol": "TCP"} in regroup["ports"]
        assert config["front"]["listen"] == "0.0.0.0:9443"
        assert config["front"]["requestHeader"] == {"fromCluster": True}
        svc = next(s for s in by_kind(objs, "Service") if s["metadata"]["name"] == "team-b-regroup-front")
        assert svc["spec"]["ports"][0]["targetPort"] == "regroup-front"
        binding = next(b for b in by_kind(objs, "RoleBinding") if b["metadata"]["namespace"] == "kube-system")
        assert binding["roleRef"]["name"] == "extension-apiserver-authentication-reader"
        own = values["front"].get("tlsSecret")
        assert vols["regroup-front-tls"]["secret"]["secretName"] == (own or "team-b-regroup-front-tls")
        for a in by_kind(objs, "APIService"):
            assert a["metadata"]["name"] == "v1alpha1.login.concierge.pinniped.team-b.example.com"
            assert a["spec"]["service"]["name"] == svc["metadata"]["name"]
            if own:  # the Secret is the user's: the chart writes none, the CA is the one given
                assert a["spec"]["caBundle"] == values["front"]["caBundle"]
                assert not any(s["metadata"]["name"].endswith("front-tls") for s in by_kind(objs, "Secret"))
            else:
                secret = next(s for s in by_kind(objs, "Secret")
                              if s["metadata"]["name"] == "team-b-regroup-front-tls")
                assert a["spec"]["caBundle"] == secret["data"]["ca.crt"]
    else:
        assert not any(s["metadata"]["name"].endswith("-front") for s in by_kind(objs, "Service"))
        assert not by_kind(objs, "APIService")
    if webhooks:
        webhook_assertions(values, objs, regroup, vols, config)
    else:
        assert "webhooks" not in config
        assert not any(s["metadata"]["name"].endswith("-webhooks") for s in by_kind(objs, "Service"))


def webhook_assertions(values, objs, regroup, vols, config):
    """The webhook listener: its port, Service, certificate, and a config
    that points the fronted registrations at that Service."""
    w = values["webhooks"]
    port, svc_port = w.get("port", 9444), w.get("service", {}).get("port", 443)
    assert {"name": "regroup-hooks", "containerPort": port, "protocol": "TCP"} in regroup["ports"]
    svc = next(s for s in by_kind(objs, "Service") if s["metadata"]["name"] == "team-b-regroup-webhooks")
    assert svc["spec"]["ports"] == [{"name": "webhooks", "port": svc_port, "targetPort": "regroup-hooks",
                                     "protocol": "TCP"}]
    assert svc["spec"]["selector"] == one(objs, "Deployment")["spec"]["selector"]["matchLabels"]
    c = config["webhooks"]
    assert c["listen"] == f"0.0.0.0:{port}"
    assert (c["certFile"], c["keyFile"], c["caFile"]) == (
        "/etc/regroup/webhooks/tls.crt", "/etc/regroup/webhooks/tls.key", "/etc/regroup/webhooks/ca.crt")
    assert c["reachAt"] == {"service": {"namespace": "team-b", "name": "team-b-regroup-webhooks", "port": svc_port}}
    assert c["hooks"] == w["hooks"]
    assert c.get("dangerousInsecureBackend", False) == w.get("insecureBackend", False)
    rmounts = {m["mountPath"]: m["name"] for m in regroup["volumeMounts"]}
    assert rmounts["/etc/regroup/webhooks"] == "regroup-webhooks-tls"
    own = w.get("tlsSecret")
    assert vols["regroup-webhooks-tls"]["secret"]["secretName"] == (own or "team-b-regroup-webhooks-tls")
    generated = [s for s in by_kind(objs, "Secret") if s["metadata"]["name"] == "team-b-regroup-webhooks-tls"]
    if own:
        assert not generated
    else:
        (secret,) = generated
        assert set(secret["data"]) == {"ca.crt", "tls.crt", "tls.key"}
        assert base64.b64decode(secret["data"]["ca.crt"]).startswith(b"-----BEGIN CERTIFICATE-----")
    for key, path, name in (("clientCaSecret", "/etc/regroup/webhooks-client-ca", "clientCaFile"),
                            ("backendCaSecret", "/etc/regroup/webhooks-backend", "backendCaFile")):
        if w.get(key):
            vol = rmounts[path]
            assert vols[vol]["secret"] == {"secretName": w[key], "items": [{"key": "ca.crt", "path": "ca.crt"}]}
            assert c[name] == f"{path}/ca.crt"
        else:
            assert path not in rmounts and name not in c


def test_rendered_config_passes_regroup_check(regroup_bin, tmp_path):
    for case in ("incluster", "front", "webhooks", "webhooks-system-roots", "names"):
        objs = template(values_for(MATRIX[case][0]), tmp_path)
        cm = next(o for o in by_kind(objs, "ConfigMap") if o["metadata"]["name"] == "team-b-regroup-config")
        path = tmp_path / f"{case}.yaml"
        path.write_text(cm["data"]["config.yaml"])
        p = subprocess.run([regroup_bin, "check", "-c", str(path)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, f"{case}: {p.stdout}{p.stderr}"
        names = yaml.safe_load(cm["data"]["config.yaml"]).get("names")
        assert names == MATRIX[case][0].get("names"), case
        if names:
            assert "\nNAMES  NAME -> team-b-NAME\n" in p.stdout


def test_rendered_config_starts_regroup_serve(regroup_bin, tmp_path):
    """The rendered config *runs*: `regroup serve` starts on it (the files
    the pod mounts written under tmp_path, listeners on free loopback ports,
    the upstream an address nothing listens on) and answers /livez, while
    /readyz names the unreachable upstream."""
    def pem(cert):
        return cert.public_bytes(serialization.Encoding.PEM)

    for case in ("incluster", "kubeconfig", "webhooks", "webhooks-system-roots"):
        objs = template(values_for(MATRIX[case][0]), tmp_path)
        cm = next(o for o in by_kind(objs, "ConfigMap") if o["metadata"]["name"] == "team-b-regroup-config")
        root = tmp_path / case
        text = cm["data"]["config.yaml"].replace("/etc/regroup/", f"{root}/")
        # What the pod's Secrets would hold: a CA and a serving certificate.
        for d in sorted({Path(m).parent for m in re.findall(re.escape(str(root)) + r"/[^\s\"']+", text)}):
            d.mkdir(parents=True, exist_ok=True)
            ca = new_ca(f"{d.name} CA")
            leaf = issue(ca, "regroup", dns=["localhost"], ips=["127.0.0.1"])
            (d / "ca.crt").write_bytes(pem(ca.cert))
            (d / "tls.crt").write_bytes(pem(leaf.cert))
            (d / "tls.key").write_bytes(leaf.key.private_bytes(serialization.Encoding.PEM,
                                                               serialization.PrivateFormat.PKCS8,
                                                               serialization.NoEncryption()))
        config = yaml.safe_load(text)
        config.pop("upstream", None)
        metrics = free_port()
        listeners = config["listeners"]
        listeners["http"] = f"127.0.0.1:{free_port()}"
        listeners["metrics"] = f"127.0.0.1:{metrics}"
        if "tls" in listeners:
            listeners["tls"]["listen"] = f"127.0.0.1:{free_port()}"
        if "webhooks" in config:
            config["webhooks"]["listen"] = f"127.0.0.1:{free_port()}"
        path = root / "config.yaml"
        root.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config))
        kubeconfig = root / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{free_port()}"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
        log = root / "serve.log"
        proc = subprocess.Popen([regroup_bin, "serve", "-c", str(path), "--kubeconfig", str(kubeconfig)],
                        stdout=open(log, "w"), stderr=subprocess.STDOUT)
        try:
            wait_port(metrics, proc, 20, f"regroup serve ({case})", log)
            assert urllib.request.urlopen(f"http://127.0.0.1:{metrics}/livez", timeout=10).read() == b"ok"
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(f"http://127.0.0.1:{metrics}/readyz", timeout=10)
            assert e.value.code == 503 and "[-]upstream failed" in e.value.read().decode(), case
        finally:
            stop(proc)


def test_rbac_renamed_as_regroup_render_renames_it(regroup_bin, tmp_path):
    """The chart renames only bare group names (RBAC apiGroups); they must be
    exactly what regroup itself makes of the same ClusterRole."""
    objs = template(values_for({}), tmp_path)
    role = one(objs, "ClusterRole")
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(yaml.safe_dump({"rules": RULES}))
    original = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "x"},
                "rules": RBAC["rules"]}
    p = subprocess.run([regroup_bin, "render", "-c", str(rules_file), "-f", "-"], input=json.dumps(original),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rendered = yaml.safe_load(p.stdout)
    assert [r["apiGroups"] for r in role["rules"]] == [r["apiGroups"] for r in rendered["rules"]]
    assert role["rules"][0]["apiGroups"] == ["samplecontroller.team-b.example.com",
                                             "login.concierge.pinniped.team-b.example.com",
                                             "pinniped.team-b.example.com", ""]
    binding = one(objs, "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "team-b-regroup", "namespace": "team-b"}]


# The chart's `regroup.mapGroup` against regroup's own GroupMap: rules of
# every kind regroup accepts (exact; suffixes, one inside another; an exact
# rule inside a suffix, listed after it: the first match must agree), and
# groups matching each way or none (a suffix only on a label boundary).
MAP_RULES = [{"from": "samplecontroller.k8s.io", "to": "samplecontroller.team-b.example.com"},
             {"fromSuffix": "concierge.pinniped.dev", "toSuffix": "concierge.pinniped.team-b.example.com"},
             {"fromSuffix": "pinniped.dev", "toSuffix": "pinniped.team-b.example.com"},
             {"from": "login.concierge.pinniped.dev", "to": "login.concierge.pinniped.team-b.example.com"},
             {"fromSuffix": "kopf.dev", "toSuffix": "kopf.team-b.example.com"}]
MAP_GROUPS = [
    "samplecontroller.k8s.io",        # exact
    "sub.samplecontroller.k8s.io",    # an exact rule is no suffix: no match
    "login.concierge.pinniped.dev",   # exact, and inside two suffixes
    "x.concierge.pinniped.dev",       # the inner suffix, and the outer one
    "concierge.pinniped.dev",         # a suffix itself
    "pinniped.dev",
    "a.b.pinniped.dev",               # several labels before the suffix
    "xpinniped.dev",                  # not on a label boundary: no match
    "pinniped.dev.evil.io",           # the suffix inside: no match
    "kopf.dev", "zalando.kopf.dev",
    "apps", "", "k8s.io",             # no rule
]


def test_map_group_template_maps_as_regroup_does(regroup_bin, tmp_path):
    """Helm can't run regroup at install time, so the chart maps bare group
    names (RBAC apiGroups, APIService groups) with its own template: every
    group it maps must be exactly what regroup maps (`regroup render` of the
    same ClusterRole and APIServices), whatever the kind of rule."""
    rbac = {"rules": [{"apiGroups": MAP_GROUPS, "resources": ["*"], "verbs": ["get"]}]}
    services = [{"group": g, "version": "v1"} for g in MAP_GROUPS if g]
    objs = template(values_for({"rules": MAP_RULES, "rbac": rbac, "mode": "kubeconfig",
                                "front": {"enabled": True, "insecureBackend": True,
                                          "apiServices": services}}), tmp_path)
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(yaml.safe_dump({"rules": MAP_RULES}))
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "x"},
            "rules": rbac["rules"]}
    apis = [{"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
             "metadata": {"name": f"v1.{s['group']}"}, "spec": {"group": s["group"], "version": "v1"}}
            for s in services]
    p = subprocess.run([regroup_bin, "render", "-c", str(rules_file), "-f", "-"],
                       input="\n".join(json.dumps(o) for o in [role, *apis]), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    rendered = [d for d in yaml.safe_load_all(p.stdout) if d]
    regroup_maps = dict(zip(MAP_GROUPS, rendered[0]["rules"][0]["apiGroups"]))
    assert one(objs, "ClusterRole")["rules"][0]["apiGroups"] == [regroup_maps[g] for g in MAP_GROUPS]
    # Not vacuous: every kind of match renamed, every non-match kept.
    assert regroup_maps["x.concierge.pinniped.dev"] == "x.concierge.pinniped.team-b.example.com"
    assert regroup_maps["zalando.kopf.dev"] == "zalando.kopf.team-b.example.com"
    for kept in ["sub.samplecontroller.k8s.io", "xpinniped.dev", "pinniped.dev.evil.io", "apps", ""]:
        assert regroup_maps[kept] == kept
    chart_groups = sorted(a["spec"]["group"] for a in by_kind(objs, "APIService"))
    assert chart_groups == sorted(a["spec"]["group"] for a in rendered[1:])
    assert chart_groups == sorted(regroup_maps[s["group"]] for s in services)


def test_renamed_manifests_from_regroup_render(regroup_bin, tmp_path):
    """renamedManifests takes `regroup render`'s output as is, and refuses a
    manifest that was not rendered."""
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(yaml.safe_dump({"rules": RULES}))
    crd = E2E / "manifests" / "crd-foos.yaml"
    p = subprocess.run([regroup_bin, "render", "-c", str(rules_file), "-f", str(crd)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rendered = tmp_path / "renamed.yaml"
    rendered.write_text(p.stdout)
    objs = template(values_for({}), tmp_path, "1.31.0", "--set-file", f"renamedManifests={rendered}")
    crds = by_kind(objs, "CustomResourceDefinition")
    assert [c["spec"]["group"] for c in crds] == ["samplecontroller.team-b.example.com"]
    # helm uninstall keeps them (and the app's objects)
    assert crds[0]["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    kubernetes_validate.validate(crds[0], "1.31.0", strict=True)

    values = values_for({})
    path = tmp_path / "v.yaml"
    path.write_text(yaml.safe_dump(values))
    bad = helm("template", "team-b", CHART, "-f", path, "--set-file", f"renamedManifests={crd}", check=False)
    assert bad.returncode != 0
    assert "still names the app's group samplecontroller.k8s.io" in bad.stderr


def test_refuses_incomplete_values(tmp_path):
    # An emptied image repository: the message says what the default is and how to load it.
    p = helm("template", "t", CHART, values={"rules": RULES, "app": APP, "regroup": {"image": {"repository": ""}}},
             tmp=tmp_path, check=False)
    assert p.returncode != 0, p.stdout
    for message in ["regroup.image.repository is empty", "dist/build-image.sh", "kind load image-archive"]:
        assert message in p.stderr, p.stderr
    for values, message in [({"rules": RULES}, "app.containers is required"),
                            ({"app": APP, "rules": []}, "rules is required"),
                            ({"app": APP, "rules": RULES, "front": {"enabled": True}}, "front.backendCaSecret"),
                            ({"app": APP, "rules": RULES, "mode": "sideways"}, "mode"),
                            ({"app": APP, "rules": RULES, "webhooks": {"enabled": True}},
                             "webhooks.enabled needs webhooks.hooks"),
                            ({"app": APP, "rules": RULES, "regroup": {"logLevel": "loud"}}, "logLevel"),
                            # Groups and prefixes as regroup validates them (DNS-1123 subdomain).
                            ({"app": APP, "rules": [{"from": "samplecontroller.k8s.io", "to": "Team_B..example"}]},
                             "/rules/0/to"),
                            ({"app": APP, "rules": [{"fromSuffix": "k8s.io.", "toSuffix": "b.example"}]},
                             "/rules/0/fromSuffix"),
                            ({"app": APP, "rules": RULES, "names": {"prefix": "Team_B-"}}, "/names/prefix"),
                            ({"app": APP, "rules": RULES, "fields": [{"group": "a..b", "kind": "K", "path": "spec.g",
                                                                      "form": "group"}]}, "/fields/0/group"),
                            ({"app": APP, "rules": RULES, "front": {
                                "enabled": True, "insecureBackend": True, "tlsSecret": "absent",
                                "apiServices": [{"group": "a.example.com", "version": "v1"}]}},
                             "front.tlsSecret absent not found")]:
        p = helm("template", "t", CHART, values=merge(IMAGE, values), tmp=tmp_path, check=False)
        assert p.returncode != 0 and message in p.stderr, (values, p.stderr)


# --- publish mode (docs/publish.md): regroup alone, the front of a central cluster's groups -------

PUBLISH_RULES = [{"from": "database.acmeco.org", "to": "database.team1.example.com"}]
PUBLISH = {"publish": {"enabled": True, "centralKubeconfigSecret": "regroup-publish-central",
                       "groups": ["database.acmeco.org"], "targetNamespace": "bar"},
           "front": {"apiServices": [{"group": "database.acmeco.org", "version": "v1alpha1"}]}}
CENTRAL_DIR = "/etc/regroup/central"


def publish_values(extra=None):
    """Publish values alone: no app, no app RBAC (values_for's would fail)."""
    return copy.deepcopy(merge(merge(IMAGE, PUBLISH), extra or {}))


def check_config(regroup_bin, objs, tmp_path, name="config.yaml"):
    """The ConfigMap's config.yaml passes `regroup check -c`; returns it parsed."""
    cm = next(o for o in by_kind(objs, "ConfigMap") if o["metadata"]["name"].endswith("-regroup-config"))
    path = tmp_path / name
    path.write_text(cm["data"]["config.yaml"])
    p = subprocess.run([regroup_bin, "check", "-c", str(path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"{p.stdout}{p.stderr}"
    return yaml.safe_load(cm["data"]["config.yaml"])


@pytest.mark.parametrize("case", ["renamed", "no-rules"])
def test_publish_mode(case, regroup_bin, tmp_path):
    """publish.enabled: one container (regroup) with the central kubeconfig,
    a config regroup accepts (publish.central, no front.backend), the
    APIService in the remote name pointing at the front's Service with the
    generated CA, and regroup's own rights: Namespaces read, Secrets written."""
    rules = PUBLISH_RULES if case == "renamed" else []
    values = publish_values({"rules": rules, "publish": {"replicas": 2}})
    lint = helm("lint", "--strict", CHART, "--kube-version", "1.31.0", values=values, tmp=tmp_path)
    assert "0 chart(s) failed" in lint.stdout
    objs = template(values, tmp_path)
    for o in objs:
        try:
            kubernetes_validate.validate(o, "1.31.0", strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{o['kind']} {o['metadata']['name']} invalid: {e.message}")

    # The pod: regroup alone, an ordinary container (no app to start before).
    deployment = one(objs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    spec = deployment["spec"]["template"]["spec"]
    assert "initContainers" not in spec
    (regroup,) = spec["containers"]
    assert regroup["name"] == "regroup" and "restartPolicy" not in regroup
    assert regroup["image"] == "regroup:dev"
    assert regroup["args"] == ["serve", "-c", "/etc/regroup/config/config.yaml"]
    assert not regroup.get("env")
    assert {"name": "regroup-front", "containerPort": 9443, "protocol": "TCP"} in regroup["ports"]
    assert regroup["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "regroup-metrics"}
    assert regroup["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "regroup-metrics"}
    sc = regroup["securityContext"]
    assert sc["runAsNonRoot"] and sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
    mounts = {m["mountPath"]: m for m in regroup["volumeMounts"]}
    assert mounts[CENTRAL_DIR] == {"name": "regroup-central", "mountPath": CENTRAL_DIR, "readOnly": True}
    assert mounts["/etc/regroup/front"]["name"] == "regroup-front-tls"
    # regroup's in-cluster credential for this cluster: the pod's own token, the real CA
    assert mounts[SA_PATH]["name"] == "regroup-upstream-sa"
    assert spec["automountServiceAccountToken"] is False
    assert spec["serviceAccountName"] == "team-b-regroup"
    vols = {v["name"]: v for v in spec["volumes"]}
    assert set(vols) == {"regroup-config", "regroup-spill", "regroup-upstream-sa", "regroup-front-tls",
                         "regroup-central"}
    assert vols["regroup-central"]["secret"] == {"secretName": "regroup-publish-central",
                                                 "items": [{"key": "kubeconfig", "path": "kubeconfig"}]}
    srcs = vols["regroup-upstream-sa"]["projected"]["sources"]
    assert {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}} in srcs
    assert any(s.get("configMap", {}).get("name") == "kube-root-ca.crt" for s in srcs)
    assert {m["name"] for m in regroup["volumeMounts"]} <= set(vols)
    assert not any(s["metadata"]["name"] == "team-b-regroup-serving" for s in by_kind(objs, "Secret"))

    # The config: what regroup accepts in publish mode.
    config = check_config(regroup_bin, objs, tmp_path)
    assert config["publish"] == {"central": {"kubeconfig": f"{CENTRAL_DIR}/kubeconfig"},
                                 "groups": ["database.acmeco.org"], "targetNamespace": "bar",
                                 "matchNamespaces": False,
                                 "connectionSecrets": {"fields": ["spec.writeConnectionSecretToRef.name"],
                                                       "resyncSeconds": 10, "requireOwner": True}}
    assert "backend" not in config["front"]
    assert config["front"] == {"listen": "0.0.0.0:9443", "certFile": "/etc/regroup/front/tls.crt",
                               "keyFile": "/etc/regroup/front/tls.key", "caFile": "/etc/regroup/front/ca.crt",
                               "requestHeader": {"fromCluster": True}}
    assert config["upstream"] == {"inCluster": True}
    assert config["listeners"] == {"metrics": "0.0.0.0:9090"}  # no listener for an app
    assert config["rules"] == rules
    assert "webhooks" not in config and "credentials" not in config

    # The APIService: the remote name, the front's Service, the generated CA.
    svc = next(s for s in by_kind(objs, "Service") if s["metadata"]["name"] == "team-b-regroup-front")
    assert svc["spec"]["ports"][0]["targetPort"] == "regroup-front"
    assert svc["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    api = one(objs, "APIService")
    group = "database.team1.example.com" if rules else "database.acmeco.org"
    assert api["metadata"]["name"] == f"v1alpha1.{group}"
    assert (api["spec"]["group"], api["spec"]["version"]) == (group, "v1alpha1")
    assert api["spec"]["service"] == {"name": "team-b-regroup-front", "namespace": "team-b", "port": 443}
    secret = next(s for s in by_kind(objs, "Secret") if s["metadata"]["name"] == "team-b-regroup-front-tls")
    assert api["spec"]["caBundle"] == secret["data"]["ca.crt"]
    assert base64.b64decode(api["spec"]["caBundle"]).startswith(b"-----BEGIN CERTIFICATE-----")

    # regroup's rights: exactly Namespaces read and Secrets read/write; reviews; the request-header CA.
    sa = [{"kind": "ServiceAccount", "name": "team-b-regroup", "namespace": "team-b"}]
    role = one(objs, "ClusterRole")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
                             {"apiGroups": [""], "resources": ["secrets"],
                              "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]
    bindings = {b["roleRef"]["name"]: b for b in by_kind(objs, "ClusterRoleBinding")}
    assert set(bindings) == {role["metadata"]["name"], "system:auth-delegator"}
    assert all(b["subjects"] == sa for b in bindings.values())
    role_bindings = by_kind(objs, "RoleBinding")
    assert len(role_bindings) == 2, [(b["metadata"], b["roleRef"]) for b in role_bindings]
    lease_binding = next(b for b in role_bindings if b["roleRef"]["name"].endswith("-lease"))
    reader = next(b for b in role_bindings if b is not lease_binding)
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"]["name"] == "extension-apiserver-authentication-reader" and reader["subjects"] == sa
    # The Lease the replicas elect the Secret copier with, in the release's namespace.
    (lease,) = by_kind(objs, "Role")
    assert lease["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                               "verbs": ["get", "create", "update"]}]
    assert lease_binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                        "name": lease["metadata"]["name"]}
    assert lease_binding["subjects"] == sa


def test_publish_mode_options(regroup_bin, tmp_path):
    """matchNamespaces, a clusterId, other connection-Secret fields, no
    metrics: all in the config regroup accepts; an empty clusterId is left
    out (regroup then takes kube-system's uid)."""
    values = publish_values({"publish": {"targetNamespace": "", "matchNamespaces": True, "clusterId": "remote-eu-1",
                                         "connectionSecrets": {"fields": ["spec.a.b", "spec.c"],
                                                               "resyncSeconds": 30}},
                             "regroup": {"metrics": {"enabled": False}}})
    objs = template(values, tmp_path)
    config = check_config(regroup_bin, objs, tmp_path)
    p = config["publish"]
    assert p["matchNamespaces"] is True and "targetNamespace" not in p and p["clusterId"] == "remote-eu-1"
    assert p["connectionSecrets"] == {"fields": ["spec.a.b", "spec.c"], "resyncSeconds": 30, "requireOwner": True}
    assert "listeners" not in config
    (regroup,) = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert not any(k in regroup for k in ("livenessProbe", "readinessProbe", "startupProbe"))


def test_publish_example(regroup_bin, tmp_path):
    """charts/regroup/examples/publish.yaml (the README's) lints, renders,
    validates, and its config passes `regroup check`."""
    path = CHART / "examples" / "publish.yaml"
    lint = subprocess.run([str(HELM), "lint", "--strict", str(CHART), "-f", str(path)], capture_output=True,
                          text=True, timeout=120)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    out = subprocess.run([str(HELM), "template", "ex", str(CHART), "-f", str(path), "--kube-version", "1.31.0"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    objs = [d for d in yaml.safe_load_all(out) if d]
    for o in objs:
        kubernetes_validate.validate(o, "1.31.0", strict=True)
    assert [c["name"] for c in one(objs, "Deployment")["spec"]["template"]["spec"]["containers"]] == ["regroup"]
    assert one(objs, "APIService")["metadata"]["name"] == "v1alpha1.database.team1.example.com"
    assert "central" in check_config(regroup_bin, objs, tmp_path)["publish"]


def test_publish_refuses_incomplete_values(tmp_path):
    """Without the central kubeconfig Secret or groups the schema refuses
    the values (naming the value), and so do the templates when the schema
    is skipped (the chart's own message); the rest only the templates."""
    def render(values, *extra):
        path = tmp_path / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        return helm("template", "t", CHART, "-f", path, *extra, check=False)

    for drop, schema_says, template_says in [
            ({"centralKubeconfigSecret": ""}, "/publish/centralKubeconfigSecret",
             "publish.centralKubeconfigSecret is required with publish.enabled"),
            ({"groups": []}, "/publish/groups", "publish.groups is required with publish.enabled")]:
        values = publish_values({"publish": drop})
        p = render(values)
        assert p.returncode != 0 and schema_says in p.stderr, p.stderr
        p = render(values, "--skip-schema-validation")
        assert p.returncode != 0 and template_says in p.stderr, p.stderr
    # Left out altogether (not just empty): the schema names the missing property.
    values = publish_values()
    del values["publish"]["groups"]
    p = render(values)
    assert p.returncode != 0 and "groups" in p.stderr, p.stderr
    for extra, message in [({"publish": {"targetNamespace": ""}},
                            "publish.enabled needs publish.targetNamespace"),
                           ({"app": APP}, "publish.enabled runs regroup alone"),
                           ({"rbac": RBAC}, "rbac.rules: publish.enabled runs no app"),
                           ({"webhooks": {"enabled": True, "hooks": [HOOK]}},
                            "webhooks.enabled: publish.enabled runs no app"),
                           ({"front": {"apiServices": [{"group": "network.acmeco.org", "version": "v1"}]}},
                            "group network.acmeco.org is not in publish.groups")]:
        p = render(publish_values(extra))
        assert p.returncode != 0 and message in p.stderr, (extra, p.stderr)


# --- regroup inject: the same sidecar as the chart, and as a Helm post-renderer -----------------

HELM3 = Path(os.environ.get("REGROUP_E2E_HELM3") or E2E / ".bin" / "helm3")
PLUGIN = REPO / "charts" / "plugins" / "regroup-inject"


def inject(regroup_bin, rules_file, text, *args):
    p = subprocess.run([regroup_bin, "inject", "-c", str(rules_file), *args], input=text, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def test_default_image_is_the_archives(regroup_bin, tmp_path):
    """With no image given, the chart (sidecar and publish modes), `regroup
    inject` and `regroup publish-manifests` all name regroup:VERSION, pulled
    IfNotPresent: the tag dist/image-archive.py gives the archive of this
    version (test_image_archive.py), so a loaded archive is used as it is."""
    version = subprocess.run([regroup_bin, "--version"], capture_output=True, text=True, timeout=30,
                             check=True).stdout.split()[1]
    image = f"regroup:{version}"
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == version
    sidecar_values = {"rules": RULES, "app": APP, "rbac": RBAC}
    for values in (sidecar_values, merge(PUBLISH, {})):
        spec = one(template(values, tmp_path), "Deployment")["spec"]["template"]["spec"]
        (regroup,) = [c for c in spec.get("initContainers", []) + spec["containers"] if c["name"] == "regroup"]
        assert (regroup["image"], regroup["imagePullPolicy"]) == (image, "IfNotPresent"), values
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(yaml.safe_dump({"rules": RULES}))
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "app"},
                  "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                      "metadata": {"labels": {"a": "b"}}, "spec": {"containers": APP["containers"]}}}}
    spec = one(inject(regroup_bin, rules_file, yaml.safe_dump(deployment)), "Deployment")["spec"]["template"]["spec"]
    (regroup,) = [c for c in spec["initContainers"] if c["name"] == "regroup"]
    assert (regroup["image"], regroup["imagePullPolicy"]) == (image, "IfNotPresent")
    # publish-manifests (no pull policy: a tag other than latest is IfNotPresent by Kubernetes' default).
    publish = tmp_path / "publish.yaml"
    publish.write_text(yaml.safe_dump({
        "front": {"listen": "0.0.0.0:9443", "generatedDnsNames": ["regroup-publish.regroup.svc"],
                  "requestHeader": {"fromCluster": True}},
        "publish": {"central": {"kubeconfig": "/etc/regroup/central/kubeconfig"},
                    "groups": ["database.acmeco.org"], "targetNamespace": "bar"}}))
    p = subprocess.run([regroup_bin, "publish-manifests", "-c", str(publish), "--versions",
                        "database.acmeco.org/v1alpha1"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    (regroup,) = one([d for d in yaml.safe_load_all(p.stdout) if d], "Deployment")["spec"]["template"]["spec"][
        "containers"]
    assert regroup["image"] == image and regroup.get("imagePullPolicy", "IfNotPresent") == "IfNotPresent"


def test_chart_and_inject_build_the_same_sidecar(regroup_bin, tmp_path):
    """The chart (fullnameOverride=regroup) and `regroup inject` of a
    Deployment with the same app container give the same regroup container,
    the same pod volumes, the same app env and mounts, the same config."""
    objs = template(values_for({"fullnameOverride": "regroup"}), tmp_path)
    chart_spec = one(objs, "Deployment")["spec"]["template"]["spec"]
    chart_config = yaml.safe_load(next(o for o in by_kind(objs, "ConfigMap")
                                       if o["metadata"]["name"] == "regroup-config")["data"]["config.yaml"])
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(yaml.safe_dump({"rules": RULES}))
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "app", "namespace": "team-b"},
                  "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                      "metadata": {"labels": {"a": "b"}},
                      "spec": {"containers": APP["containers"], "volumes": APP["volumes"]}}}}
    out = inject(regroup_bin, rules_file, yaml.safe_dump(deployment), "--tls-secret", "regroup-serving",
                 "--image", "regroup:dev")
    spec = one(out, "Deployment")["spec"]["template"]["spec"]
    assert spec["initContainers"] == chart_spec["initContainers"]
    assert spec["containers"] == chart_spec["containers"]
    assert spec["volumes"] == chart_spec["volumes"]
    assert spec["automountServiceAccountToken"] is chart_spec["automountServiceAccountToken"] is False
    injected = yaml.safe_load(one(out, "ConfigMap")["data"]["config.yaml"])
    # The one difference: inject pins the names prefix regroup derives from
    # the rules (docs/config.md, "Names"); the chart leaves it to be derived
    # at run time (the same prefix; pin it with `names.prefix` in values).
    assert injected.pop("names") == {"prefix": names_prefix(regroup_bin, rules_file)}
    assert "names" not in chart_config
    assert injected == chart_config
    for o in out:
        kubernetes_validate.validate(o, "1.31.0", strict=True)


def helm_create(tmp_path):
    """A real chart: what `helm create` writes (a Deployment, Service,
    ServiceAccount, test Pod, ...)."""
    env = helm_env(tmp_path)
    subprocess.run([str(HELM), "create", str(tmp_path / "mychart")], check=True, capture_output=True, env=env)
    return tmp_path / "mychart"


def helm_env(tmp_path, regroup_bin=None):
    env = dict(os.environ, HELM_CONFIG_HOME=str(tmp_path / "helm-config"), HELM_CACHE_HOME=str(tmp_path / "helm-cache"),
               HELM_DATA_HOME=str(tmp_path / "helm-data"))
    env.pop("HELM_PLUGINS", None)
    if regroup_bin:
        env["REGROUP_BIN"] = regroup_bin
    return env


def check_post_rendered(objs, plain):
    """Every object of the plain rendering is there; the Deployment is wrapped."""
    key = lambda o: (o["kind"], o["metadata"]["name"])  # noqa: E731
    assert {key(o) for o in plain} <= {key(o) for o in objs}
    spec = one(objs, "Deployment")["spec"]["template"]["spec"]
    assert spec["initContainers"][0]["name"] == "regroup"
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert one(objs, "ConfigMap")["metadata"]["name"] == "regroup-config"
    for o in objs:
        kubernetes_validate.validate(o, "1.31.0", strict=True)


def test_post_renderer_helm4_plugin(regroup_bin, tmp_path):
    """Helm 4: --post-renderer takes the name of a postrenderer/v1 plugin."""
    chart = helm_create(tmp_path)
    env = helm_env(tmp_path, regroup_bin)
    p = subprocess.run([str(HELM), "plugin", "install", str(PLUGIN)], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(yaml.safe_dump({"rules": RULES}))
    plain = subprocess.run([str(HELM), "template", "b", str(chart)], capture_output=True, text=True, env=env, check=True)
    p = subprocess.run([str(HELM), "template", "b", str(chart), "--post-renderer", "regroup-inject",
                        "--post-renderer-args=-c", f"--post-renderer-args={rules_file}"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    check_post_rendered([d for d in yaml.safe_load_all(p.stdout) if d],
                        [d for d in yaml.safe_load_all(plain.stdout) if d])


def test_post_renderer_helm3_executable(regroup_bin, tmp_path):
    """Helm 3: --post-renderer takes an executable (the plugin's script)."""
    if not HELM3.exists():
        pytest.fail(f"helm 3 not found at {HELM3}: run e2e/install.sh")
    chart = helm_create(tmp_path)
    env = helm_env(tmp_path, regroup_bin)
    env["REGROUP_CONFIG"] = str(tmp_path / "rules.yaml")
    Path(env["REGROUP_CONFIG"]).write_text(yaml.safe_dump({"rules": RULES}))
    plain = subprocess.run([str(HELM3), "template", "b", str(chart)], capture_output=True, text=True, env=env,
                           check=True)
    p = subprocess.run([str(HELM3), "template", "b", str(chart), "--post-renderer", str(PLUGIN / "regroup-inject")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    check_post_rendered([d for d in yaml.safe_load_all(p.stdout) if d],
                        [d for d in yaml.safe_load_all(plain.stdout) if d])


def test_post_renderer_errors_are_regroups_own(regroup_bin, tmp_path):
    """A missing rules file: Helm 3 shows the script's standard error, which
    is regroup's message; Helm 4 discards a plugin's standard error, so the
    script also writes it to the terminal or $REGROUP_INJECT_ERROR_FILE."""
    chart = helm_create(tmp_path)
    env = helm_env(tmp_path, regroup_bin)
    missing = tmp_path / "no-such-rules.yaml"
    want = f"regroup: cannot read config {missing}"
    if not HELM3.exists():
        pytest.fail(f"helm 3 not found at {HELM3}: run e2e/install.sh")
    p = subprocess.run([str(HELM3), "template", "b", str(chart), "--post-renderer", str(PLUGIN / "regroup-inject"),
                        "--post-renderer-args=-c", f"--post-renderer-args={missing}"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode != 0 and want in p.stderr, p.stderr
    p = subprocess.run([str(HELM), "plugin", "install", str(PLUGIN)], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    err_file = tmp_path / "inject-error.txt"
    p = subprocess.run([str(HELM), "template", "b", str(chart), "--post-renderer", "regroup-inject",
                        "--post-renderer-args=-c", f"--post-renderer-args={missing}"],
                       capture_output=True, text=True, env={**env, "REGROUP_INJECT_ERROR_FILE": str(err_file)},
                       timeout=120)
    assert p.returncode != 0
    assert want in err_file.read_text() or want in p.stderr, (p.stderr, err_file.exists())
