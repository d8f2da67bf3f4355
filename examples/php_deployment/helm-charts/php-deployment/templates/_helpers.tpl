{{/* The name of every object: the release name (one PhpDeployment = one release). */}}
{{- define "php-deployment.name" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "php-deployment.selectorLabels" -}}
app.kubernetes.io/name: php-deployment
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "php-deployment.labels" -}}
{{ include "php-deployment.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}
