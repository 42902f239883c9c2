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

{{/* kube-scheduler's tag: scheduler.image.tag, else the cluster's own version, vMAJOR.MINOR.PATCH of
.Capabilities.KubeVersion (EKS's v1.33.5-eks-3025e55 gives v1.33.5). A kube-scheduler must not be
newer than its API server (Kubernetes' version skew policy), so a tag of a later minor is refused;
so is a cluster version with no patch number (`helm template --kube-version 1.33`), where nothing
can be derived. `helm template` without a cluster renders with Helm's built-in version (v1.37.0 for
helm v4.3.2) unless given --kube-version. */}}
{{- define "toposched.schedulerTag" -}}
{{- $cluster := .Capabilities.KubeVersion.Version -}}
{{- $derived := regexFind "^v[0-9]+\\.[0-9]+\\.[0-9]+" $cluster -}}
{{- $tag := .Values.scheduler.image.tag | default $derived -}}
{{- if not $tag -}}
{{- fail (printf "scheduler.image.tag: cannot derive kube-scheduler's version from the cluster's %q: set scheduler.image.tag to the control plane's vMAJOR.MINOR.PATCH" $cluster) -}}
{{- end -}}
{{- if and $derived (regexMatch "^v?[0-9]+\\.[0-9]+\\.[0-9]+" $tag) -}}
{{- $parts := regexFindAll "[0-9]+" $derived 2 -}}
{{- if not (semverCompare (printf "<%s.%d.0-0" (index $parts 0) (add1 (atoi (index $parts 1)))) $tag) -}}
{{- fail (printf "scheduler.image.tag: %s is newer than the cluster's %s; a kube-scheduler must not be newer than its API server: leave scheduler.image.tag empty to take %s" $tag $cluster $derived) -}}
{{- end -}}
{{- end -}}
{{- $tag -}}
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
