{{/*
Publish mode (docs/publish.md): the pod is regroup alone. Its container and
volumes are the generated ones of _container.tpl (one definition, shared with
`regroup inject`: image, args, probes, resources, securityContext, and the
pod's own token at the service-account path, which regroup reads as its
in-cluster credential for the remote cluster), seen through values that say
"front on, no app": no loopback TLS listener (so no serving certificate and
no app service-account volume), no webhooks, no app-server CA, an ordinary
container (there is no app to start before). Then the central cluster's
kubeconfig is added, read-only at /etc/regroup/central/.
*/}}
{{- define "regroup.publishContext" -}}
{{- $v := .Values | toYaml | fromYaml }}
{{- $_ := set $v "mode" "publish" }}
{{- $_ := set $v.regroup "nativeSidecar" "false" }}
{{- $_ := set $v.front "enabled" true }}
{{- $_ := set $v.front "backendCaSecret" "" }}
{{- $_ := set $v.webhooks "enabled" false }}
{{- toYaml $v }}
{{- end }}

{{/* The one container of the publish pod. */}}
{{- define "regroup.publishContainer" -}}
{{- $ctx := dict "Values" (include "regroup.publishContext" . | fromYaml) "Chart" .Chart "Release" .Release "Capabilities" .Capabilities "Template" .Template }}
{{- $c := include "regroup.container" $ctx | fromYamlArray | first }}
{{- $mounts := append $c.volumeMounts (dict "name" "regroup-central" "mountPath" "/etc/regroup/central" "readOnly" true) }}
{{- $_ := set $c "volumeMounts" $mounts }}
{{- toYaml (list $c) }}
{{- end }}

{{/* The publish pod's volumes: regroup's, the central kubeconfig Secret. */}}
{{- define "regroup.publishVolumes" -}}
{{- $ctx := dict "Values" (include "regroup.publishContext" . | fromYaml) "Chart" .Chart "Release" .Release "Capabilities" .Capabilities "Template" .Template }}
{{- $vols := list }}
{{- range include "regroup.volumes" $ctx | fromYamlArray }}
{{- if ne .name "regroup-app-kubeconfig" }}
{{- $vols = append $vols . }}
{{- end }}
{{- end }}
{{- $vols = append $vols (dict "name" "regroup-central" "secret" (dict "secretName" (include "regroup.centralSecretName" .) "items" (list (dict "key" "kubeconfig" "path" "kubeconfig")))) }}
{{- toYaml $vols }}
{{- end }}
