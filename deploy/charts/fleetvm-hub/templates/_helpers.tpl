{{/* fleetvm-hub.fullname: the name of every object of the release. */}}
{{- define "fleetvm-hub.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "fleetvm-hub.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "fleetvm-hub.labels" -}}
{{ include "fleetvm-hub.selectorLabels" . }}
app.kubernetes.io/part-of: fleetvm
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "fleetvm-hub.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "fleetvm-hub.serviceAccountName" -}}{{ include "fleetvm-hub.fullname" . }}{{- end -}}
{{- define "fleetvm-hub.webhookServiceName" -}}{{ include "fleetvm-hub.fullname" . }}-webhook{{- end -}}
{{- define "fleetvm-hub.webhookSecretName" -}}{{ include "fleetvm-hub.fullname" . }}-webhook-cert{{- end -}}
{{- define "fleetvm-hub.webhookConfigName" -}}{{ include "fleetvm-hub.fullname" . }}{{- end -}}
{{- define "fleetvm-hub.certificateName" -}}{{ include "fleetvm-hub.fullname" . }}-webhook{{- end -}}
{{/* Must match LeaderElectionID in cmd/fleetvm-hub. */}}
{{- define "fleetvm-hub.leaderElectionID" -}}fleetvm-hub.fleetvm.io{{- end -}}
{{- define "fleetvm-hub.certDir" -}}/etc/fleetvm/webhook-certs{{- end -}}
