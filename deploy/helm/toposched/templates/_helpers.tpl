{{/* Labels every object carries: the kustomize ones plus Helm's bookkeeping. */}}
{{- define "toposched.labels" -}}
app.kubernetes.io/name: toposched
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: toposched
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* Labels RBAC objects carry (no component, as in deploy/rbac). */}}
{{- define "toposched.commonLabels" -}}
app.kubernetes.io/part-of: toposched
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Pod selector of one component (never changes across upgrades: selectors are immutable). */}}
{{- define "toposched.selector" -}}
app.kubernetes.io/name: toposched
app.kubernetes.io/component: {{ . }}
{{- end -}}

{{- define "toposched.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Scheduling of a component's pods: anti-affinity, nodeSelector, tolerations. */}}
{{- define "toposched.placement" -}}
{{- if .root.Values.podAntiAffinity }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "toposched.selector" .component | nindent 14 }}
{{- end }}
{{- with .root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{- define "toposched.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end -}}

{{- define "toposched.certManager" -}}
{{- eq .Values.certificates.mode "cert-manager" -}}
{{- end -}}

{{/* Secret holding the gRPC server certificate ("" when gRPC is not exposed). */}}
{{- define "toposched.grpcTLSSecret" -}}
{{- if .Values.grpc.expose -}}
{{- if .Values.grpc.tls.secretName -}}
{{ .Values.grpc.tls.secretName }}
{{- else if eq .Values.certificates.mode "cert-manager" -}}
toposched-controller-grpc-tls
{{- else -}}
{{ fail "grpc.expose needs grpc.tls.secretName (a kubernetes.io/tls Secret) or certificates.mode=cert-manager: the gRPC API is never exposed without TLS" }}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The cert-manager issuer of the chart's Certificates. */}}
{{- define "toposched.issuerRef" -}}
{{- if .Values.certificates.certManager.issuerRef -}}
{{ toYaml .Values.certificates.certManager.issuerRef }}
{{- else -}}
kind: Issuer
name: toposched-selfsigned
{{- end -}}
{{- end -}}
