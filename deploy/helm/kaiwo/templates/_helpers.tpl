{{- define "kaiwo.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The scheduler name the operator puts on pods: the kaiwo-scheduler's profile when it is
deployed, otherwise what kaiwoConfig names (default-scheduler when nothing does). */}}
{{- define "kaiwo.schedulerName" -}}
{{- if .Values.scheduler.enabled -}}
{{ .Values.scheduler.name }}
{{- else -}}
{{ dig "scheduling" "kubeSchedulerName" "default-scheduler" .Values.kaiwoConfig.spec }}
{{- end -}}
{{- end -}}

{{/* The default ClusterQueue (the API reference's installation setting DEFAULT_CLUSTER_QUEUE_NAME,
decision 0116): defaultClusterQueueName, or what kaiwoConfig.spec names; "" when neither does
(the CRD's default, kaiwo, then applies and nothing is rendered for it). */}}
{{- define "kaiwo.defaultClusterQueueName" -}}
{{- $top := .Values.defaultClusterQueueName | default "" -}}
{{- $spec := dig "defaultClusterQueueName" "" .Values.kaiwoConfig.spec -}}
{{- if and $top $spec (ne $top $spec) -}}
{{- fail (printf "defaultClusterQueueName (%s) and kaiwoConfig.spec.defaultClusterQueueName (%s) differ: set one" $top $spec) -}}
{{- end -}}
{{- $name := $top | default $spec -}}
{{- if and $name (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $name)) -}}
{{- fail (printf "defaultClusterQueueName %q is not a valid ClusterQueue name (lower-case letters, digits, '-' and '.')" $name) -}}
{{- end -}}
{{- if gt (len $name) 63 -}}
{{- fail (printf "defaultClusterQueueName %q is longer than 63 characters" $name) -}}
{{- end -}}
{{ $name }}
{{- end -}}

{{- define "kaiwo.natsEnv" -}}
- name: KAIWO_NATS_URL
  value: nats://nats:4222
- name: KAIWO_NATS_CREDENTIALS_FILE
  value: /var/run/secrets/kaiwo/nats/nkey
{{- end -}}

{{/* The shape of the bus, the same for every service and the provisioning Job: the partitions
(active-active planners and executors, decision 0030) and, last, the copies of each stream. */}}
{{- define "kaiwo.streamReplicas" -}}
- name: KAIWO_BUS_PARTITIONS
  value: {{ .Values.bus.partitions | quote }}
- name: KAIWO_BUS_STREAM_REPLICAS
  value: {{ .Values.nats.replicas | quote }}
{{- end -}}

{{- define "kaiwo.containerSecurity" -}}
allowPrivilegeEscalation: false
capabilities:
  drop: [ALL]
readOnlyRootFilesystem: true
{{- end -}}

{{- define "kaiwo.podSecurity" -}}
fsGroup: 65532
runAsNonRoot: true
runAsUser: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The event store's Secrets the chart creates when given the URL: the recorder's and the
console's read-only one. Rendered here once, for the objects and for the checksums that roll
the pods reading them. */}}
{{- define "kaiwo.eventstoreSecret" -}}
{{- if .Values.eventstore.url -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Values.eventstore.secretName }}
  namespace: {{ .Release.Namespace }}
type: Opaque
stringData:
  url: {{ .Values.eventstore.url | quote }}
{{- end -}}
{{- end -}}

{{- define "kaiwo.eventstoreReaderSecret" -}}
{{- if .Values.eventstore.readerUrl -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Values.eventstore.readerSecretName }}
  namespace: {{ .Release.Namespace }}
type: Opaque
stringData:
  url: {{ .Values.eventstore.readerUrl | quote }}
{{- end -}}
{{- end -}}

{{/* What rolls a pod holding a NATS key when the keys change: the keys the chart renders and
nats.credentialsRevision, which stands for keys created outside the chart
(existingCredentials), whose rendering here is empty and so never changes. A hash only. */}}
{{- define "kaiwo.natsCredentialsChecksum" -}}
{{- $rendered := include (print .Template.BasePath "/nats-credentials.yaml") . -}}
{{- printf "%s\n---\nrevision: %v" $rendered (.Values.nats.credentialsRevision | default "") | sha256sum -}}
{{- end -}}
