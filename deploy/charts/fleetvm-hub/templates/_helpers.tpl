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

{{/* fleetvm-hub.metricsServiceName: the Service Prometheus scrapes; the Prometheus Operator names its job after it. */}}
{{- define "fleetvm-hub.metricsServiceName" -}}{{ include "fleetvm-hub.fullname" . }}-metrics{{- end -}}

{{/*
fleetvm-hub.seconds: a duration in hours, minutes and seconds (15m, 1h30m,
90s) as a number of seconds, for PromQL. Called with (list name value):
name is the value's, for the error.
*/}}
{{- define "fleetvm-hub.seconds" -}}
{{- $name := index . 0 -}}
{{- $d := index . 1 | toString -}}
{{- if or (not $d) (not (regexMatch "^([0-9]+h)?([0-9]+m)?([0-9]+s)?$" $d)) -}}
{{- fail (printf "%s %q: monitoring.prometheusRule needs it in hours, minutes and seconds, such as 15m or 1h30m" $name $d) -}}
{{- end -}}
{{- $unit := dict "h" 3600 "m" 60 "s" 1 -}}
{{- $total := 0 -}}
{{- range regexFindAll "[0-9]+[hms]" $d -1 -}}
{{- $u := regexFind "[hms]$" . -}}
{{- $total = add $total (mul (trimSuffix $u . | atoi) (get $unit $u)) -}}
{{- end -}}
{{- $total -}}
{{- end -}}
