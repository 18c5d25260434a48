{{/* Names and labels. */}}
{{- define "regroup.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "regroup.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "regroup.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "regroup.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "regroup.selectorLabels" -}}
app.kubernetes.io/name: {{ include "regroup.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "regroup.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "regroup.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "regroup.serviceAccountName" -}}
{{- if .Values.app.serviceAccount.create }}
{{- default (include "regroup.fullname" .) .Values.app.serviceAccount.name }}
{{- else }}
{{- required "app.serviceAccount.name is required when app.serviceAccount.create is false" .Values.app.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "regroup.frontServiceName" -}}
{{- printf "%s-front" (include "regroup.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Whether the front is on: front.enabled, or publish mode (whose front is the whole point). */}}
{{- define "regroup.frontOn" -}}
{{- if or .Values.front.enabled .Values.publish.enabled }}true{{ end }}
{{- end }}

{{- define "regroup.centralSecretName" -}}
{{- required (printf "publish.centralKubeconfigSecret is required with publish.enabled: the name of a Secret in namespace %s with the key `kubeconfig` (the central cluster's server and credential; docs/publish.md, \"Deploying\")" .Release.Namespace) .Values.publish.centralKubeconfigSecret }}
{{- end }}

{{- define "regroup.webhooksServiceName" -}}
{{- printf "%s-webhooks" (include "regroup.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "regroup.webhooksSecretName" -}}
{{- default (printf "%s-webhooks-tls" (include "regroup.fullname" .)) .Values.webhooks.tlsSecret }}
{{- end }}

{{- define "regroup.tlsSecretName" -}}
{{- default (printf "%s-serving" (include "regroup.fullname" .)) .Values.regroup.tlsSecret }}
{{- end }}

{{- define "regroup.frontSecretName" -}}
{{- default (printf "%s-front-tls" (include "regroup.fullname" .)) .Values.front.tlsSecret }}
{{- end }}

{{/*
regroup.mapGroup: one API group from the app's name to the cluster's, with
the rules as regroup applies them (exact first, then a DNS suffix on a label
boundary). Only group NAMES are mapped here (RBAC apiGroups, APIService
groups); whole manifests go through `regroup render`.
Call: include "regroup.mapGroup" (dict "group" "foo.example.io" "rules" .Values.rules)
*/}}
{{- define "regroup.mapGroup" -}}
{{- $g := .group -}}
{{- $out := $g -}}
{{- $done := false -}}
{{- range .rules }}
{{- if and (not $done) .from (eq .from $g) }}{{- $out = .to }}{{- $done = true }}{{- end }}
{{- end }}
{{- range .rules }}
{{- if and (not $done) .fromSuffix }}
{{- if eq $g .fromSuffix }}{{- $out = .toSuffix }}{{- $done = true }}
{{- else if hasSuffix (printf ".%s" .fromSuffix) $g }}{{- $out = printf "%s.%s" (trimSuffix (printf ".%s" .fromSuffix) $g) .toSuffix }}{{- $done = true }}
{{- end }}
{{- end }}
{{- end }}
{{- $out -}}
{{- end }}

{{/* Whether regroup runs as a native sidecar (init container, restartPolicy Always). */}}
{{- define "regroup.native" -}}
{{- $n := .Values.regroup.nativeSidecar | toString -}}
{{- if eq $n "true" }}true
{{- else if eq $n "false" }}
{{- else if semverCompare ">=1.29.0-0" .Capabilities.KubeVersion.Version }}true
{{- end }}
{{- end }}

{{/* regroup's configuration file (docs/config.md). With publish.enabled
(docs/publish.md): no app, so no listener for one (no `listeners.http`,
`listeners.tls`, `credentials`), and the front without `backend` (the
config loader refuses one with `publish:`: publish.central is the backend). */}}
{{- define "regroup.config" -}}
{{- $publish := .Values.publish.enabled -}}
rules:
{{- toYaml .Values.rules | nindent 2 }}
{{- with .Values.fields }}
fields:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.names }}
names:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.metadata }}
metadata:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- if $publish }}
{{- if .Values.regroup.metrics.enabled }}
listeners:
  metrics: 0.0.0.0:{{ .Values.regroup.metrics.port }}
{{- end }}
{{- else }}
listeners:
  http: 127.0.0.1:{{ .Values.regroup.httpPort }}
{{- if eq .Values.mode "inCluster" }}
  tls:
    listen: 127.0.0.1:{{ .Values.regroup.tlsPort }}
    certFile: /etc/regroup/serving/tls.crt
    keyFile: /etc/regroup/serving/tls.key
{{- end }}
{{- if .Values.regroup.metrics.enabled }}
  metrics: 0.0.0.0:{{ .Values.regroup.metrics.port }}
{{- end }}
{{- end }}
upstream:
  inCluster: true
{{- if not $publish }}
credentials:
  passThrough: true
{{- end }}
{{- if or .Values.front.enabled $publish }}
front:
  listen: 0.0.0.0:{{ .Values.front.port }}
  certFile: /etc/regroup/front/tls.crt
  keyFile: /etc/regroup/front/tls.key
  caFile: /etc/regroup/front/ca.crt
{{- if not $publish }}
  backend: {{ .Values.front.backend }}
{{- if .Values.front.backendCaSecret }}
  backendCaFile: /etc/regroup/backend/ca.crt
{{- end }}
{{- if .Values.front.insecureBackend }}
  dangerousInsecureBackend: true
{{- end }}
{{- end }}
  requestHeader:
    fromCluster: true
{{- end }}
{{- if $publish }}
{{- $p := .Values.publish }}
publish:
  central:
    kubeconfig: /etc/regroup/central/kubeconfig
  groups:
{{- toYaml $p.groups | nindent 4 }}
{{- with $p.targetNamespace }}
  targetNamespace: {{ . | quote }}
{{- end }}
  matchNamespaces: {{ $p.matchNamespaces }}
{{- with $p.clusterId }}
  clusterId: {{ . | quote }}
{{- end }}
  connectionSecrets:
{{- toYaml $p.connectionSecrets | nindent 4 }}
{{- end }}
{{- if and .Values.webhooks.enabled (not $publish) }}
webhooks:
  listen: 0.0.0.0:{{ .Values.webhooks.port }}
  certFile: /etc/regroup/webhooks/tls.crt
  keyFile: /etc/regroup/webhooks/tls.key
  caFile: /etc/regroup/webhooks/ca.crt
{{- if .Values.webhooks.clientCaSecret }}
  clientCaFile: /etc/regroup/webhooks-client-ca/ca.crt
{{- end }}
{{- if .Values.webhooks.backendCaSecret }}
  backendCaFile: /etc/regroup/webhooks-backend/ca.crt
{{- end }}
{{- if .Values.webhooks.insecureBackend }}
  dangerousInsecureBackend: true
{{- end }}
  reachAt:
    service:
      namespace: {{ .Release.Namespace }}
      name: {{ include "regroup.webhooksServiceName" . }}
      port: {{ .Values.webhooks.service.port }}
  hooks:
{{- if .Values.webhooks.hooks }}
{{- toYaml .Values.webhooks.hooks | nindent 4 }}
{{- else }}
{{- fail "webhooks.enabled needs webhooks.hooks (the app's webhooks regroup fronts)" }}
{{- end }}
{{- end }}
logging:
  level: {{ .Values.regroup.logLevel }}
  format: {{ .Values.regroup.logFormat }}
limits:
  shutdownGracePeriod: {{ .Values.regroup.shutdownGracePeriod }}
{{- with .Values.regroup.limits }}
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The kubeconfig the app reads in kubeconfig mode: regroup on loopback, no credentials. */}}
{{- define "regroup.appKubeconfig" -}}
apiVersion: v1
kind: Config
clusters:
  - name: regroup
    cluster:
      server: http://127.0.0.1:{{ .Values.regroup.httpPort }}
contexts:
  - name: regroup
    context:
      cluster: regroup
      user: app
      namespace: {{ .Release.Namespace }}
current-context: regroup
users:
  - name: app
    user: {}
{{- end }}

{{/* regroup's image: by default regroup:appVersion, the name of the archive
dist/build-image.sh makes (values.yaml). */}}
{{- define "regroup.image" -}}
{{- $repo := required "regroup.image.repository is empty: leave it unset for regroup (the image archive dist/build-image.sh makes, loaded onto the nodes with kind load image-archive, ctr -n k8s.io images import or docker load; see charts/regroup/README.md, \"Image\") or name the repository you pushed it to" .Values.regroup.image.repository -}}
{{ $repo }}:{{ .Values.regroup.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The regroup container, the pod's volumes and the app containers'
mounts and env: generated, in _container.tpl. */}}

{{/*
A generated CA and certificate as Secret data (ca.crt, tls.crt, tls.key),
kept from the existing Secret on upgrade (lookup; `helm template` has no
cluster and generates afresh).
Call: include "regroup.certData" (dict "ctx" $ "name" SECRET "cn" CN "ips" LIST "dns" LIST)
*/}}
{{- define "regroup.certData" -}}
{{- $existing := lookup "v1" "Secret" .ctx.Release.Namespace .name -}}
{{- if and $existing (index $existing.data "tls.crt") }}
ca.crt: {{ index $existing.data "ca.crt" }}
tls.crt: {{ index $existing.data "tls.crt" }}
tls.key: {{ index $existing.data "tls.key" }}
{{- else }}
{{- $ca := genCA (printf "%s-ca" .cn) 3650 }}
{{- $cert := genSignedCert .cn .ips .dns 3650 $ca }}
ca.crt: {{ $ca.Cert | b64enc }}
tls.crt: {{ $cert.Cert | b64enc }}
tls.key: {{ $cert.Key | b64enc }}
{{- end }}
{{- end }}
