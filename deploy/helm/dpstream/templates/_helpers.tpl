{{- define "dpstream.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dpstream.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "dpstream.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dpstream.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "dpstream.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{ include "dpstream.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "dpstream.secretName" -}}
{{- default (printf "%s-kafka" (include "dpstream.fullname" .)) .Values.kafka.existingSecret -}}
{{- end -}}

{{- define "dpstream.topologiesConfigMap" -}}
{{- default (printf "%s-topologies" (include "dpstream.fullname" .)) .Values.topologies.existingConfigMap -}}
{{- end -}}

{{- define "dpstream.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "dpstream.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "dpstream.sasl" -}}
{{- if hasPrefix "SASL" .Values.kafka.securityProtocol -}}true{{- end -}}
{{- end -}}

{{- define "dpstream.tls" -}}
{{- if hasSuffix "SSL" .Values.kafka.securityProtocol -}}true{{- end -}}
{{- end -}}

{{/* Memory request/limit from the memory model (values.yaml), in MiB. */}}
{{- define "dpstream.memoryMiB" -}}
{{- $m := .Values.memoryModel -}}
{{- add (int $m.baseMiB) (mul (int $m.shardsPerWorker) (int $m.sketchMiBPerShard) (int $m.copies)) -}}
{{- end -}}
