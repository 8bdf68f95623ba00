{{/*
Names. The release's objects are called <release>-mcp-aggregator unless the
release name already holds the chart name, cut to the 63 characters a DNS
label allows.
*/}}
{{- define "mcp-aggregator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mcp-aggregator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The headless Service that names every aggregator pod, for HAProxy. */}}
{{- define "mcp-aggregator.headlessName" -}}
{{- printf "%s-pods" (include "mcp-aggregator.fullname" . | trunc 58 | trimSuffix "-") }}
{{- end }}

{{/* HAProxy's Deployment, Service and ConfigMap. */}}
{{- define "mcp-aggregator.haproxyName" -}}
{{- printf "%s-haproxy" (include "mcp-aggregator.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{- define "mcp-aggregator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels every object carries. */}}
{{- define "mcp-aggregator.labels" -}}
helm.sh/chart: {{ include "mcp-aggregator.chart" . }}
app.kubernetes.io/name: {{ include "mcp-aggregator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of the aggregator pods. */}}
{{- define "mcp-aggregator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcp-aggregator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: aggregator
{{- end }}

{{/* Selector labels of the HAProxy pods. */}}
{{- define "mcp-aggregator.haproxySelectorLabels" -}}
app.kubernetes.io/name: {{ include "mcp-aggregator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: haproxy
{{- end }}

{{/* The Secret whose keys become the aggregator's environment. */}}
{{- define "mcp-aggregator.secretName" -}}
{{- if .Values.secret.existingSecret }}
{{- .Values.secret.existingSecret }}
{{- else }}
{{- include "mcp-aggregator.fullname" . }}
{{- end }}
{{- end }}

{{/* The ConfigMap that holds config.yaml. */}}
{{- define "mcp-aggregator.configMapName" -}}
{{- if .Values.existingConfigMap }}
{{- .Values.existingConfigMap }}
{{- else }}
{{- include "mcp-aggregator.fullname" . }}
{{- end }}
{{- end }}

{{/*
Seconds the kubelet waits after SIGTERM before SIGKILL: the preStop pause,
then the drain grace the aggregator itself keeps (--drain-grace), then the
margin it needs to close every upstream and flush its traces once the grace
is over. Derived here so that the two can never be set the wrong way round.
*/}}
{{- define "mcp-aggregator.terminationGracePeriodSeconds" -}}
{{- $a := .Values.aggregator }}
{{- if lt (int $a.drainGraceSeconds) 1 }}
{{- fail "aggregator.drainGraceSeconds must be at least 1" }}
{{- end }}
{{- if lt (int $a.shutdownMarginSeconds) 1 }}
{{- fail "aggregator.shutdownMarginSeconds must be at least 1: the kubelet's SIGKILL has to come after the drain grace, not with it" }}
{{- end }}
{{- add (int $a.preStopSleepSeconds) (int $a.drainGraceSeconds) (int $a.shutdownMarginSeconds) }}
{{- end }}

{{/*
HAProxy's server slots: one per aggregator pod that may exist at once,
which during a rolling update includes the surge and the pods still
draining. 0 in values means twice the replicas plus two.
*/}}
{{- define "mcp-aggregator.haproxyServerSlots" -}}
{{- $slots := int .Values.haproxy.serverSlots }}
{{- if eq $slots 0 }}
{{- $slots = add (mul 2 (int .Values.replicaCount)) 2 }}
{{- end }}
{{- if lt $slots (int .Values.replicaCount) }}
{{- fail (printf "haproxy.serverSlots (%d) must be at least replicaCount (%d)" $slots (int .Values.replicaCount)) }}
{{- end }}
{{- $slots }}
{{- end }}
