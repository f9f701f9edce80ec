{{/* Labels every object of a release carries. */}}
{{- define "pir.labels" -}}
app.kubernetes.io/name: pir
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "pir.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The database versions, checked: DNS labels, at least one. */}}
{{- define "pir.versions" -}}
{{- if not .Values.database.versions }}{{ fail "database.versions needs at least one version" }}{{ end }}
{{- range .Values.database.versions }}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$" (toString .)) }}
{{- fail (printf "database version %q is not a DNS label (a-z, 0-9, '-', at most 32)" (toString .)) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The version the front ends serve: database.serve, else the last of database.versions. */}}
{{- define "pir.serve" -}}
{{- $serve := .Values.database.serve | default (last .Values.database.versions) | toString }}
{{- if not (has $serve (.Values.database.versions | toStrings)) }}
{{- fail (printf "database.serve %q is not one of database.versions" $serve) }}
{{- end }}
{{- $serve }}
{{- end }}

{{/* Name of the StatefulSet (and headless Service) of shard .k of version .version. */}}
{{- define "pir.shardName" -}}
{{ .root.Release.Name }}-{{ .version }}-shard-{{ .k }}
{{- end }}

{{/* Name of the Secret (or, with podman, ConfigMap) that holds the secret keys. */}}
{{- define "pir.keysName" -}}
{{ .Values.keys.existingSecret | default (printf "%s-keys" .Release.Name) }}
{{- end }}

{{/* The keys volume: a Secret, or with podman (whose 4.3 Secret volumes hold base64 text) a
ConfigMap of the same name. */}}
{{- define "pir.keysVolume" -}}
- name: keys
{{- if .Values.podman }}
  configMap:
    name: {{ include "pir.keysName" . }}
{{- else }}
  secret:
    secretName: {{ include "pir.keysName" . }}
    defaultMode: 0440
    optional: false
{{- end }}
{{- end }}

{{/* The settings every server shares, as TOML lines. */}}
{{- define "pir.settings" -}}
listen = "0.0.0.0:8443"
{{- range $key, $value := .Values.settings }}
{{ $key }} = {{ $value | toJson }}
{{- end }}
{{- end }}

{{/* Container security settings: the image needs no privilege and writes nothing. */}}
{{- define "pir.securityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: [ALL]
{{- end }}

{{/* /health on the HTTPS port: a server answers it once it serves (a shard after computing
its part of the hint, a front end after fetching every shard's part), without touching the
database. Kubernetes does not check the self-signed certificate of an HTTPS probe. */}}
{{- define "pir.probes" -}}
readinessProbe:
  httpGet: {path: /health, port: 8443, scheme: HTTPS}
  periodSeconds: 5
  failureThreshold: 2
livenessProbe:
  httpGet: {path: /health, port: 8443, scheme: HTTPS}
  periodSeconds: 10
  failureThreshold: 6
{{- end }}

{{/* The pod spec of one replica of shard .k of version .version. */}}
{{- define "pir.shardPodSpec" -}}
{{- $v := .root.Values -}}
terminationGracePeriodSeconds: 30
securityContext:
  fsGroup: 65532
containers:
  - name: shard
    image: {{ include "pir.image" .root }}
    imagePullPolicy: {{ $v.image.pullPolicy }}
    args:
      - shard
      - serve
      - --config=/etc/pir/settings/shard.toml
      - --db=/db/{{ .version }}
      - --shard={{ .k }}
      - --key=/etc/pir/keys/shard-{{ .k }}.key
    {{- if not $v.podman }}
    {{- /* podman 4.3 publishes a containerPort without hostPort on the host's same port,
    so shards there declare none (pods reach each other all the same). */}}
    ports:
      - {name: https, containerPort: 8443, protocol: TCP}
    {{- end }}
    {{- include "pir.probes" . | nindent 4 }}
    startupProbe:
      httpGet: {path: /health, port: 8443, scheme: HTTPS}
      periodSeconds: 10
      failureThreshold: {{ div $v.shards.startupSeconds 10 | max 1 }}
    resources:
      {{- toYaml $v.shards.resources | nindent 6 }}
    securityContext:
      {{- include "pir.securityContext" . | nindent 6 }}
    volumeMounts:
      - {name: db, mountPath: /db, readOnly: true}
      - {name: keys, mountPath: /etc/pir/keys, readOnly: true}
      - {name: settings, mountPath: /etc/pir/settings, readOnly: true}
volumes:
  - name: db
    {{- toYaml $v.database.volume | nindent 4 }}
  {{- include "pir.keysVolume" .root | nindent 2 }}
  - name: settings
    configMap:
      name: {{ .root.Release.Name }}-settings
{{- end }}
