#!/usr/bin/env node
// Checks every manifest in deploy/kubernetes without a cluster:
//  1. YAML: each file parses (YAML 1.1, as kubectl reads it; duplicate keys
//     are errors).
//  2. Schemas: each Kubernetes object validates against the Kubernetes
//     OpenAPI schema (kubernetes-models), each ServiceMonitor and
//     PrometheusRule against the Prometheus Operator's CRD schemas
//     (@kubernetes-models/prometheus-operator);
//     KServe objects, which no package describes, get their embedded
//     Kubernetes objects (containers, volumes, tolerations) validated.
//  3. Fields: every object, written out as a TypeScript literal of its type,
//     passes `tsc --strict`, which refuses fields the type does not have
//     (the schemas above allow unknown fields; kubectl's strict field
//     validation does not). KServe's types: kserve.d.ts.
//  4. Consistency: server flags exist in server/server_flags.cc and their
//     values parse; listen ports are declared container ports and the gRPC
//     probes' port; selectors of Services, PodDisruptionBudgets and the
//     ServiceMonitor match pods or Services of the set; the PrometheusRule
//     holds exactly deploy/prometheus/dmlserve-alerts.yml's rules, with the
//     ServiceMonitor's release label; the headless Service;
//     the tensor repository's ConfigMap (manifest.json and its files, as the
//     server's loader reads them); KServe's runtime, model formats (dmlserve's
//     KServe models) and protocol.
//  5. With --server=BINARY: the real server loads each ConfigMap's repository
//     laid out as kubelet mounts it (symlinked ..data), reloads it on SIGHUP
//     after a kubelet-style swap, and starts with every manifest's exact
//     flags (listen addresses, file paths and TLS files swapped for local
//     ones).
// Usage (the script next to kserve.d.ts and a node_modules with package.json's packages):
//   node check_manifests.js --root=REPOSITORY --manifests=DIR [--server=BINARY]
'use strict';
const childProcess = require('child_process');
const fs = require('fs');
const http = require('http');
const os = require('os');
const path = require('path');
const YAML = require('yaml');
const ts = require('typescript');

const options = {};
for (const arg of process.argv.slice(2)) {
  const match = /^--(root|manifests|server)=(.*)$/.exec(arg);
  if (!match) {
    console.error(`usage: check_manifests.js --root=DIR --manifests=DIR [--server=BINARY] (got ${arg})`);
    process.exit(2);
  }
  options[match[1]] = match[2];
}
if (!options.root || !options.manifests) {
  console.error('usage: check_manifests.js --root=DIR --manifests=DIR [--server=BINARY]');
  process.exit(2);
}

const errors = [];
let checks = 0;
function fail(where, message) {
  errors.push(`${where}: ${message}`);
}
function check(condition, where, message) {
  checks += 1;
  if (!condition) fail(where, message);
  return condition;
}

// ---------------------------------------------------------------------------
// What the repository says: server flags, backends, KServe models, data types.

function readSource(relative) {
  return fs.readFileSync(path.join(options.root, relative), 'utf8');
}

const serverFlags = new Map();  // name -> type as declared in ABSL_FLAG
for (const match of readSource('server/server_flags.cc').matchAll(
  /ABSL_FLAG\(\s*([\w:]+)\s*,\s*(\w+)\s*,/g)) {
  serverFlags.set(match[2], match[1]);
}
if (serverFlags.size < 10) {
  console.error('check_manifests: found no ABSL_FLAG definitions in server/server_flags.cc');
  process.exit(1);
}
const backends = new Set(
  [...readSource('server/backend_devices.cc').matchAll(/backend [!=]= "(\w+)"/g)].map((m) => m[1]));
const kserveModels = new Set(
  [...readSource('server/kserve_translation.cc').matchAll(/\{"(\w+)",\s*v1::ExecuteRequest::k/g)]
    .map((m) => m[1]));
const protoTypes = new Set([...readSource('proto/dmlserve/v1/dmlserve.proto')
  .replace(/^[\s\S]*?enum DataType \{/, '').replace(/\}[\s\S]*$/, '')
  .matchAll(/^\s*([A-Z0-9_]+)\s*=/gm)].map((m) => m[1]));
const elementBytes = {FLOAT32: 4, FLOAT16: 2, FLOAT64: 8, UINT8: 1, INT8: 1, UINT16: 2,
  INT16: 2, UINT32: 4, INT32: 4, UINT64: 8, INT64: 8};
const npyTypes = {'|u1': 'UINT8', '|i1': 'INT8', '<u2': 'UINT16', '<i2': 'INT16', '<u4': 'UINT32',
  '<i4': 'INT32', '<u8': 'UINT64', '<i8': 'INT64', '<f2': 'FLOAT16', '<f4': 'FLOAT32',
  '<f8': 'FLOAT64'};
for (const name of Object.keys(elementBytes)) {
  if (!protoTypes.has(name)) {
    console.error(`check_manifests: data type ${name} is not in dmlserve.proto's DataType`);
    process.exit(1);
  }
}
if (!backends.has('cpu') || kserveModels.size === 0) {
  console.error('check_manifests: cannot read the backends (server/backend_devices.cc) or the ' +
    'KServe models (server/kserve_translation.cc)');
  process.exit(1);
}

// ---------------------------------------------------------------------------
// 1. Parse.

const manifestDir = path.resolve(options.manifests);
const files = fs.readdirSync(manifestDir).filter((f) => /\.ya?ml$/.test(f)).sort();
if (files.length === 0) {
  console.error(`check_manifests: no .yaml files in ${manifestDir}`);
  process.exit(1);
}
const objects = [];  // {file, index, obj, where}
for (const file of files) {
  const text = fs.readFileSync(path.join(manifestDir, file), 'utf8');
  const documents = YAML.parseAllDocuments(text, {version: '1.1', uniqueKeys: true, prettyErrors: true});
  const list = Array.isArray(documents) ? documents : [documents];
  list.forEach((document, index) => {
    for (const problem of [...document.errors, ...document.warnings]) {
      fail(`${file}: document ${index + 1}`, problem.message.split('\n')[0]);
    }
    if (document.errors.length) return;
    const obj = document.toJS();
    if (obj === null || obj === undefined) return;
    const kind = obj && obj.kind;
    const name = obj && obj.metadata && obj.metadata.name;
    const where = `${file}: ${kind || 'document ' + (index + 1)} ${name || ''}`.trim();
    if (!check(typeof obj === 'object' && !Array.isArray(obj), `${file}: document ${index + 1}`,
      'is not a mapping')) return;
    if (!check(typeof obj.apiVersion === 'string' && typeof kind === 'string' &&
      obj.metadata !== null && typeof obj.metadata === 'object', where,
    'needs apiVersion, kind and metadata')) return;
    check(typeof name === 'string' && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name) && name.length <= 63,
      where, `metadata.name ${JSON.stringify(name)} must be a DNS label (a-z, 0-9, -)`);
    objects.push({file, index, obj, where});
  });
}
for (const file of files) {
  const seen = new Set();
  for (const o of objects.filter((x) => x.file === file)) {
    const key = `${o.obj.apiVersion}/${o.obj.kind}/${o.obj.metadata && o.obj.metadata.name}`;
    check(!seen.has(key), o.where, 'defined twice in one file');
    seen.add(key);
  }
}

// ---------------------------------------------------------------------------
// 2. Schemas.

const KSERVE = new Set(['serving.kserve.io/v1alpha1/ServingRuntime',
  'serving.kserve.io/v1beta1/InferenceService']);
const coreV1 = require('kubernetes-models/v1');

function modelModule(apiVersion) {
  if (apiVersion === 'monitoring.coreos.com/v1') {
    return '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
  }
  return `kubernetes-models/${apiVersion}`;
}

function schemaErrors(Model, value) {
  try {
    new Model(value).validate();
    return [];
  } catch (error) {
    if (!error.errors) return [error.message];
    return error.errors.map((e) => {
      // A JSON pointer (/spec/containers/0/name, ~1 for / in a key) as spec.containers[0].name.
      const where = (e.instancePath || '').split('/').slice(1)
        .map((key) => key.replace(/~1/g, '/').replace(/~0/g, '~'))
        .map((key, i) => (/^\d+$/.test(key) ? `[${key}]` : `${i ? '.' : ''}${key}`)).join('') || '(top)';
      const extra = e.params && e.params.allowedValues ? ` (${e.params.allowedValues.join(', ')})` : '';
      return `${where}: ${e.message}${extra}`;
    });
  }
}

function validateEmbedded(where, Model, value, prefix) {
  for (const message of schemaErrors(Model, value)) fail(where, `${prefix}.${message}`);
  checks += 1;
}

for (const o of objects) {
  const {apiVersion, kind} = o.obj;
  const key = `${apiVersion}/${kind}`;
  if (KSERVE.has(key)) {
    o.typed = true;
    const spec = o.obj.spec || {};
    if (kind === 'ServingRuntime') {
      (spec.containers || []).forEach((c, i) =>
        validateEmbedded(o.where, coreV1.Container, c, `spec.containers[${i}]`));
      (spec.volumes || []).forEach((v, i) =>
        validateEmbedded(o.where, coreV1.Volume, v, `spec.volumes[${i}]`));
      (spec.tolerations || []).forEach((t, i) =>
        validateEmbedded(o.where, coreV1.Toleration, t, `spec.tolerations[${i}]`));
      validateEmbedded(o.where, require('@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta')
        .ObjectMeta, o.obj.metadata, 'metadata');
    } else {
      const model = (spec.predictor || {}).model;
      if (check(model, o.where, 'spec.predictor.model is required (dmlserve is a model runtime)')) {
        const container = {name: 'kserve-container', ...model};
        for (const field of ['modelFormat', 'runtime', 'storageUri', 'runtimeVersion', 'protocolVersion']) {
          delete container[field];
        }
        validateEmbedded(o.where, coreV1.Container, container, 'spec.predictor.model');
      }
    }
    continue;
  }
  let Model;
  try {
    Model = require(modelModule(apiVersion))[kind];
  } catch (error) {
    Model = undefined;
  }
  if (!check(typeof Model === 'function', o.where,
    `no schema for ${key}: check_manifests.js knows core Kubernetes, monitoring.coreos.com/v1 ` +
    'and KServe objects')) continue;
  o.typed = true;
  for (const message of schemaErrors(Model, o.obj)) fail(o.where, message);
}

// ---------------------------------------------------------------------------
// 3. Fields, with TypeScript: each object as a typed literal.

function typeOf(obj) {
  const {apiVersion, kind} = obj;
  if (apiVersion === 'serving.kserve.io/v1alpha1' && kind === 'ServingRuntime') {
    return {module: './kserve', name: 'IServingRuntime'};
  }
  if (apiVersion === 'serving.kserve.io/v1beta1' && kind === 'InferenceService') {
    return {module: './kserve', name: 'IInferenceService'};
  }
  return {module: `${modelModule(apiVersion)}/${kind}`, name: `I${kind}`};
}

// Writes `value` one property per line, remembering each line's path.
function emit(value, where, indent, prefix, suffix, out) {
  if (Array.isArray(value)) {
    if (value.length === 0) return void out.push({text: `${indent}${prefix}[]${suffix}`, where});
    out.push({text: `${indent}${prefix}[`, where});
    value.forEach((item, i) => emit(item, `${where}[${i}]`, `${indent}  `, '',
      i + 1 < value.length ? ',' : '', out));
    return void out.push({text: `${indent}]${suffix}`, where});
  }
  if (value instanceof Date) value = value.toISOString();
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value);
    if (keys.length === 0) return void out.push({text: `${indent}${prefix}{}${suffix}`, where});
    out.push({text: `${indent}${prefix}{`, where});
    keys.forEach((key, i) => emit(value[key], where ? `${where}.${key}` : key, `${indent}  `,
      `${JSON.stringify(key)}: `, i + 1 < keys.length ? ',' : '', out));
    return void out.push({text: `${indent}}${suffix}`, where});
  }
  out.push({text: `${indent}${prefix}${JSON.stringify(value)}${suffix}`, where});
}

function checkFieldsWithTypeScript() {
  const lines = [];
  const imports = new Map();
  const typed = objects.filter((o) => o.typed);  // the others have no type: reported above
  typed.forEach((o, i) => {
    const type = typeOf(o.obj);
    const alias = `T${imports.size}`;
    const importKey = `${type.module}#${type.name}`;
    if (!imports.has(importKey)) imports.set(importKey, {alias, ...type});
    emit(o.obj, '', '', `export const object${i}: ${imports.get(importKey).alias} = `, ';', lines);
    for (let j = lines.length - 1; j >= 0 && lines[j].object === undefined; --j) lines[j].object = o;
  });
  const header = [...imports.values()].map(
    (t) => ({text: `import type { ${t.name} as ${t.alias} } from ${JSON.stringify(t.module)};`}));
  const all = [...header, ...lines];
  // Next to kserve.d.ts and node_modules.
  const file = path.join(__dirname, 'manifests.ts');
  fs.writeFileSync(file, all.map((l) => l.text).join('\n') + '\n');
  const program = ts.createProgram([file], {
    strict: true, noEmit: true, skipLibCheck: true, target: ts.ScriptTarget.ES2020,
    module: ts.ModuleKind.CommonJS, moduleResolution: ts.ModuleResolutionKind.Node10,
    types: [],
  });
  checks += 1;
  for (const diagnostic of ts.getPreEmitDiagnostics(program)) {
    const text = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n').split('\n');
    const message = (text.length > 2 ? `${text[0]} ... ${text[text.length - 1].trim()}` : text.join(' '))
      .replace(/'\{[^']{60,}'/g, "'{...}'");  // an inline object type written out in full
    if (!diagnostic.file || path.resolve(diagnostic.file.fileName) !== file) {
      fail('TypeScript', message);
      continue;
    }
    const {line} = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
    const entry = all[line] || {};
    if (!entry.object) {
      fail(`TypeScript (manifests.ts line ${line + 1})`, message);
      continue;
    }
    fail(entry.object.where, `${entry.where || '(top)'}: ${message}`);
  }
}
checkFieldsWithTypeScript();

// ---------------------------------------------------------------------------
// 4. Consistency.

const byKind = (kind) => objects.filter((o) => o.obj.kind === kind);
const labelsMatch = (selector, labels) => selector && Object.keys(selector).length > 0 &&
  Object.entries(selector).every(([k, v]) => labels && labels[k] === v);

// Pod templates: workloads' templates and ServingRuntimes' pod specs.
const templates = [];
for (const o of objects) {
  const spec = o.obj.spec || {};
  if (['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job'].includes(o.obj.kind)) {
    const template = spec.template || {};
    templates.push({o, labels: (template.metadata || {}).labels || {}, pod: template.spec || {},
      replicas: o.obj.kind === 'Deployment' ? (spec.replicas === undefined ? 1 : spec.replicas) : undefined,
      prefix: 'spec.template.spec'});
  } else if (o.obj.kind === 'ServingRuntime') {
    templates.push({o, labels: spec.labels || {}, pod: spec, kserve: true, prefix: 'spec'});
  }
}

const isServerImage = (image) => /^dmlserve(-[a-z0-9]+)*(:|@|$)/.test(String(image).split('/').pop());
const portOf = (address) => {
  const match = /^(.*):(\d+)$/.exec(address || '');
  return match ? {host: match[1], port: Number(match[2])} : undefined;
};
const normalizePath = (p) => {
  const windows = /^[A-Za-z]:[\\/]/.test(p);
  const normal = p.replace(/\\/g, '/').replace(/\/+$/, '');
  return windows ? normal.toLowerCase() : normal;
};
const within = (inner, outer) => {
  const a = normalizePath(inner);
  const b = normalizePath(outer);
  return a === b || a.startsWith(`${b}/`);
};

// Parses a server container's args: Map flag -> value (undefined for a bare boolean).
function serverArgs(where, container) {
  const flags = new Map();
  for (const arg of container.args || []) {
    const match = /^--(no)?([a-z0-9_]+)(?:=(.*))?$/s.exec(String(arg));
    if (!check(match, where, `argument ${JSON.stringify(arg)} is not --flag=value`)) continue;
    const [, negated, name, value] = match;
    const type = serverFlags.get(name);
    if (!check(type, where, `--${negated || ''}${name}: not a flag of the server ` +
      '(server/server_flags.cc)')) continue;
    if (negated) check(type === 'bool' && value === undefined, where, `--no${name}: only for bool flags`);
    check(!flags.has(name), where, `--${name} given twice`);
    flags.set(name, negated ? 'false' : value);
    if (value === undefined) {
      check(type === 'bool', where, `--${name} needs a value (--${name}=...)`);
      continue;
    }
    let valid = true;
    if (type === 'bool') valid = /^(true|false|t|f|yes|no|y|n|1|0)$/i.test(value);
    else if (/^(int|int32_t|int64_t)$/.test(type)) valid = /^-?\d+$/.test(value);
    else if (/^(uint32_t|uint64_t)$/.test(type)) valid = /^\d+$/.test(value);
    else if (type === 'absl::Duration') valid = /^(inf|-inf|0|(-?\d+(\.\d+)?(ns|us|ms|s|m|h))+)$/.test(value);
    check(valid, where, `--${name}=${value}: not a valid ${type}`);
  }
  return flags;
}

function findContainerPort(template, port) {
  for (const c of template.pod.containers || []) {
    for (const p of c.ports || []) {
      if (typeof port === 'string' ? p.name === port : p.containerPort === port) return p;
    }
  }
  return undefined;
}

const servers = [];  // {template, container, flags, where}
for (const template of templates) {
  const {o, pod, prefix} = template;
  const volumes = new Map((pod.volumes || []).map((v) => [v.name, v]));
  const containers = pod.containers || [];
  const initContainers = pod.initContainers || [];
  check(containers.length > 0, o.where, `${prefix}.containers: none`);
  const names = new Set([...containers, ...initContainers].map((c) => c.name));
  for (const [list, listName] of [[containers, 'containers'], [initContainers, 'initContainers']]) {
    list.forEach((c, i) => {
      const where = `${o.where}: ${prefix}.${listName}[${i}] (${c.name})`;
      for (const mount of c.volumeMounts || []) {
        check(volumes.has(mount.name), where, `volumeMount ${mount.name}: no such volume in the pod`);
      }
      for (const env of c.env || []) {
        const ref = env.valueFrom && env.valueFrom.resourceFieldRef;
        if (ref && ref.containerName) {
          check(names.has(ref.containerName), where,
            `env ${env.name}: resourceFieldRef names container ${ref.containerName}, not in the pod`);
        }
      }
    });
  }
  for (const [name, volume] of volumes) {
    if (volume.configMap && !volume.configMap.optional) {
      check(byKind('ConfigMap').some((m) => m.obj.metadata.name === volume.configMap.name),
        o.where, `volume ${name}: ConfigMap ${volume.configMap.name} is defined in no manifest`);
    }
  }
  const windows = pod.os && pod.os.name === 'windows';
  if ((pod.nodeSelector || {})['kubernetes.io/os'] === 'windows') {
    check(windows, o.where, `${prefix}: nodeSelector kubernetes.io/os=windows needs os.name: windows`);
  }
  if (windows) {
    const linuxOnly = ['runAsUser', 'runAsGroup', 'fsGroup', 'seccompProfile', 'seLinuxOptions',
      'supplementalGroups', 'sysctls', 'readOnlyRootFilesystem', 'capabilities', 'privileged',
      'allowPrivilegeEscalation', 'procMount', 'appArmorProfile'];
    for (const [owner, context] of [['pod', pod.securityContext],
      ...containers.map((c) => [c.name, c.securityContext])]) {
      for (const field of linuxOnly) {
        check(!context || context[field] === undefined, o.where,
          `${owner} securityContext.${field}: Linux only, refused for a Windows pod`);
      }
    }
  }
  containers.forEach((c, i) => {
    if (!isServerImage(c.image)) return;
    const where = `${o.where}: ${prefix}.containers[${i}] (${c.name})`;
    if (c.command) {
      check(/(^|[\\/])dmlserve(\.exe)?$/i.test(c.command[0] || '') && c.command.length === 1, where,
        `command ${JSON.stringify(c.command)}: the server binary, its flags in args`);
    }
    const flags = serverArgs(where, c);
    servers.push({template, container: c, flags, where});
    const ports = new Map((c.ports || []).map((p) => [p.containerPort, p]));
    for (const flag of ['listen', 'metrics_listen']) {
      const address = portOf(flags.get(flag));
      if (!check(address, where, `--${flag}=HOST:PORT is required (the default listens on 127.0.0.1)`)) continue;
      check(!/^(127\.|localhost$|\[::1\]$)/.test(address.host), where,
        `--${flag}=${flags.get(flag)}: a loopback address is unreachable from other pods and the kubelet`);
      // Under KServe the container declares its gRPC port only (Knative allows one).
      if (flag === 'listen' || !template.kserve) {
        check(ports.has(address.port), where, `--${flag} port ${address.port} is not a declared containerPort`);
      }
    }
    const listen = portOf(flags.get('listen'));
    const tls = flags.has('tls_cert_file');
    const probes = ['startupProbe', 'readinessProbe', 'livenessProbe'].filter((p) => c[p]);
    check(c.readinessProbe, where, 'needs a readinessProbe (SERVING on grpc.health.v1)');
    for (const probe of probes) {
      const grpc = c[probe].grpc;
      if (!grpc) continue;
      check(!tls, where, `${probe}: a grpc probe speaks plaintext, the server TLS only (use exec ` +
        'dmlserve-cli health, as dmlserve-tls.yaml does)');
      if (listen) {
        check(grpc.port === listen.port, where,
          `${probe}: grpc port ${grpc.port} is not --listen's ${listen.port}`);
      }
      check(!grpc.service || grpc.service === 'dmlserve.v1.OperatorService', where,
        `${probe}: grpc service ${grpc.service}: the server reports health for "" and ` +
        'dmlserve.v1.OperatorService');
    }
    if (flags.has('backend')) {
      check(backends.has(flags.get('backend')), where,
        `--backend=${flags.get('backend')}: expected ${[...backends].join(', ')}`);
    }
    const repository = flags.get('tensor_repository');
    if (repository) {
      check(c.startupProbe, where, '--tensor_repository: a startupProbe gives the repository time to load');
      const mount = (c.volumeMounts || []).find((m) => within(repository, m.mountPath));
      if (check(mount, where, `--tensor_repository=${repository} is in no volumeMount of the container`)) {
        const volume = volumes.get(mount.name) || {};
        if (volume.configMap) {
          const configMap = byKind('ConfigMap').find((m) => m.obj.metadata.name === volume.configMap.name);
          if (configMap) {
            const keys = new Set([...Object.keys(configMap.obj.data || {}),
              ...Object.keys(configMap.obj.binaryData || {})]);
            check(normalizePath(repository) === normalizePath(mount.mountPath) && !mount.subPath &&
              !volume.configMap.items, where,
              '--tensor_repository must be the whole ConfigMap volume (no subPath, no items): kubelet ' +
              'updates such a mount in one atomic swap');
            check(keys.has('manifest.json'), where,
              `--tensor_repository: ConfigMap ${volume.configMap.name} has no manifest.json`);
            template.repository = configMap;
          }
        } else if (volume.emptyDir) {
          check(initContainers.some((ic) => (ic.volumeMounts || []).some((m) => m.name === mount.name)),
            where, `--tensor_repository: emptyDir volume ${mount.name} is filled by no init container`);
        }
      }
    }
  });
}
check(servers.length > 0, 'deploy/kubernetes', 'no dmlserve container in any manifest');

// Services: selectors match pods of the set; target ports exist on them.
function matchingTemplates(selector, file) {
  const all = templates.filter((t) => !t.kserve && labelsMatch(selector, t.labels));
  const same = all.filter((t) => t.o.file === file);
  return same.length ? same : all;
}
for (const service of byKind('Service')) {
  const spec = service.obj.spec || {};
  const pods = matchingTemplates(spec.selector, service.file);
  if (!check(pods.length > 0, service.where, `selector ${JSON.stringify(spec.selector)} matches no pods`)) continue;
  for (const port of spec.ports || []) {
    const target = port.targetPort === undefined ? port.port : port.targetPort;
    for (const t of pods) {
      check(findContainerPort(t, target), service.where,
        `port ${port.name}: targetPort ${target} is not a container port of ${t.o.where}`);
    }
  }
  if (spec.clusterIP === 'None') {
    check(!spec.publishNotReadyAddresses, service.where,
      'a headless Service for clients must list ready pods only (publishNotReadyAddresses)');
  }
}
const headless = byKind('Service').find((s) => s.obj.metadata.name === 'dmlserve-headless');
if (check(headless, 'deploy/kubernetes', 'no Service dmlserve-headless')) {
  const spec = headless.obj.spec || {};
  check(spec.clusterIP === 'None', headless.where, 'must be headless (clusterIP: None)');
  const grpc = (spec.ports || []).find((p) => p.name === 'grpc');
  if (check(grpc, headless.where, 'has no port named grpc')) {
    for (const t of matchingTemplates(spec.selector, headless.file)) {
      const server = servers.find((s) => s.template === t);
      const listen = server && portOf(server.flags.get('listen'));
      const containerPort = findContainerPort(t, grpc.targetPort === undefined ? grpc.port : grpc.targetPort);
      check(listen && containerPort && containerPort.containerPort === listen.port, headless.where,
        `port grpc does not reach --listen of ${t.o.where}`);
      // DNS gives clients the pods' addresses: they dial the container port.
      check(!listen || grpc.port === listen.port, headless.where,
        `port ${grpc.port}: a headless Service maps no ports, so it must be the container's ` +
        `(${listen && listen.port})`);
    }
  }
}

// Every Deployment is reachable through a Service and covered by a PodDisruptionBudget.
for (const t of templates.filter((x) => x.o.obj.kind === 'Deployment')) {
  const spec = t.o.obj.spec || {};
  check(labelsMatch((spec.selector || {}).matchLabels, t.labels), t.o.where,
    'spec.selector.matchLabels must match the template labels');
  const strategy = (spec.strategy || {}).rollingUpdate;
  if (strategy) {
    check(!(String(strategy.maxSurge) === '0' && String(strategy.maxUnavailable) === '0'), t.o.where,
      'rollingUpdate: maxSurge and maxUnavailable cannot both be 0');
  }
  check(byKind('Service').some((s) => labelsMatch((s.obj.spec || {}).selector, t.labels)), t.o.where,
    'no Service selects its pods');
  const budgets = byKind('PodDisruptionBudget');
  check(budgets.some((p) => labelsMatch(((p.obj.spec || {}).selector || {}).matchLabels, t.labels)),
    t.o.where, 'no PodDisruptionBudget selects its pods');
}
for (const pdb of byKind('PodDisruptionBudget')) {
  const spec = pdb.obj.spec || {};
  const selector = (spec.selector || {}).matchLabels;
  const pods = matchingTemplates(selector, pdb.file);
  if (!check(pods.length > 0, pdb.where, `selector ${JSON.stringify(selector)} matches no pods`)) continue;
  check((spec.minAvailable === undefined) !== (spec.maxUnavailable === undefined), pdb.where,
    'set one of minAvailable and maxUnavailable');
  if (typeof spec.maxUnavailable === 'number') {
    check(spec.maxUnavailable >= 1, pdb.where, 'maxUnavailable 0 blocks every drain');
  }
  if (typeof spec.minAvailable === 'number') {
    for (const t of pods.filter((x) => x.replicas !== undefined)) {
      check(spec.minAvailable < t.replicas, pdb.where,
        `minAvailable ${spec.minAvailable} with ${t.replicas} replicas (${t.o.where}) blocks every drain`);
    }
  }
}

// ServiceMonitor: selects a Service whose named port reaches --metrics_listen.
for (const monitor of byKind('ServiceMonitor')) {
  const spec = monitor.obj.spec || {};
  const selector = (spec.selector || {}).matchLabels;
  const services = byKind('Service').filter((s) => labelsMatch(selector, s.obj.metadata.labels));
  if (!check(services.length > 0, monitor.where,
    `selector ${JSON.stringify(selector)} matches no Service`)) continue;
  for (const endpoint of spec.endpoints || []) {
    check((endpoint.path || '/metrics') === '/metrics', monitor.where,
      `endpoint path ${endpoint.path}: the server serves /metrics only`);
    check(!endpoint.scheme || endpoint.scheme === 'http', monitor.where, 'metrics are plain HTTP');
    for (const service of services) {
      const port = ((service.obj.spec || {}).ports || []).find((p) => p.name === endpoint.port);
      if (!check(port, monitor.where, `port ${endpoint.port}: not a port of ${service.where}`)) continue;
      for (const t of matchingTemplates(service.obj.spec.selector, service.file)) {
        const server = servers.find((s) => s.template === t);
        const containerPort = findContainerPort(t, port.targetPort === undefined ? port.port : port.targetPort);
        const metrics = server && portOf(server.flags.get('metrics_listen'));
        check(metrics && containerPort && containerPort.containerPort === metrics.port, monitor.where,
          `port ${endpoint.port} of ${service.where} does not reach --metrics_listen of ${t.o.where}`);
      }
    }
  }
}

// PrometheusRule: exactly the rules of deploy/prometheus/dmlserve-alerts.yml
// (written and unit-tested there; scripts/prometheus-rule.sh wraps them), for
// the Prometheus that the ServiceMonitor feeds (the same `release` label).
const alertsFile = 'deploy/prometheus/dmlserve-alerts.yml';
for (const rule of byKind('PrometheusRule')) {
  const alerts = YAML.parse(readSource(alertsFile), {version: '1.1', uniqueKeys: true});
  check(require('util').isDeepStrictEqual((rule.obj.spec || {}).groups, alerts.groups), rule.where,
    `spec.groups differ from ${alertsFile}'s groups: run scripts/prometheus-rule.sh`);
  const release = (rule.obj.metadata.labels || {}).release;
  for (const monitor of byKind('ServiceMonitor')) {
    check(release === (monitor.obj.metadata.labels || {}).release, rule.where,
      `label release=${release} differs from ${monitor.where}'s: one Prometheus selects both`);
  }
}
check(byKind('PrometheusRule').length > 0 || byKind('ServiceMonitor').length === 0,
  manifestDir, `a ServiceMonitor without the PrometheusRule of ${alertsFile}`);

// KServe.
for (const runtime of byKind('ServingRuntime')) {
  const spec = runtime.obj.spec || {};
  const container = (spec.containers || []).find((c) => c.name === 'kserve-container');
  if (check(container, runtime.where, 'needs a container named kserve-container (KServe merges the ' +
    "InferenceService's model fields into it)")) {
    const server = servers.find((s) => s.container === container);
    check(server, runtime.where, 'kserve-container does not run dmlserve');
    const ports = container.ports || [];
    check(ports.length === 1 && /h2c|grpc/.test(ports[0].name || ''), runtime.where,
      'kserve-container declares one port, named h2c (gRPC; Knative allows one port)');
    const listen = server && portOf(server.flags.get('listen'));
    check(listen && ports[0] && ports[0].containerPort === listen.port, runtime.where,
      'the h2c port must be --listen\'s');
  }
  for (const format of spec.supportedModelFormats || []) {
    check(kserveModels.has(format.name), runtime.where,
      `model format ${format.name}: dmlserve's KServe models are ${[...kserveModels].join(', ')}`);
    check(format.version === undefined || format.version === '1', runtime.where,
      `model format ${format.name}: the models' version is 1`);
  }
  check((spec.supportedModelFormats || []).length > 0, runtime.where, 'supports no model format');
  const protocols = spec.protocolVersions || [];
  check(protocols.length > 0 && protocols.every((p) => p === 'grpc-v2'), runtime.where,
    `protocolVersions ${JSON.stringify(protocols)}: dmlserve serves grpc-v2 only (no REST, no v1)`);
}
for (const service of byKind('InferenceService')) {
  const predictor = (service.obj.spec || {}).predictor || {};
  const model = predictor.model;
  if (!model) continue;
  const format = model.modelFormat || {};
  const runtimes = byKind('ServingRuntime').filter(
    (r) => !model.runtime || r.obj.metadata.name === model.runtime);
  const runtime = runtimes.find((r) => ((r.obj.spec || {}).supportedModelFormats || []).some(
    (f) => f.name === format.name && (format.version === undefined || f.version === format.version) &&
      (model.runtime || f.autoSelect)));
  if (check(runtime, service.where, `no ServingRuntime ${model.runtime || ''} supports model format ` +
    `${format.name} ${format.version || ''}`)) {
    const protocols = runtime.obj.spec.protocolVersions || [];
    check(!model.protocolVersion || protocols.includes(model.protocolVersion), service.where,
      `protocolVersion ${model.protocolVersion} is not one of ${runtime.where}'s ${JSON.stringify(protocols)}`);
  }
  check(model.protocolVersion === 'grpc-v2', service.where,
    'protocolVersion must be grpc-v2 (the default, v1, is REST)');
  check(predictor.minReplicas === undefined || predictor.maxReplicas === undefined ||
    predictor.minReplicas <= predictor.maxReplicas, service.where, 'minReplicas > maxReplicas');
  for (const field of ['args', 'command', 'image']) {
    check(model[field] === undefined, service.where,
      `spec.predictor.model.${field}: set in the ServingRuntime, where the flags are checked`);
  }
}

// ConfigMaps, and the tensor repositories in them.
function parseNpy(bytes) {
  if (bytes.length < 10 || bytes.subarray(0, 6).toString('latin1') !== '\x93NUMPY') {
    return {error: 'no \\x93NUMPY magic'};
  }
  const major = bytes[6];
  if (major < 1 || major > 3) return {error: `.npy format ${major} is not supported`};
  const lengthBytes = major === 1 ? 2 : 4;
  const headerLength = lengthBytes === 2 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
  const offset = 8 + lengthBytes + headerLength;
  if (bytes.length < offset) return {error: 'truncated .npy header'};
  const header = bytes.subarray(8 + lengthBytes, offset).toString('latin1');
  const descr = (/'descr':\s*'([^']*)'/.exec(header) || [])[1];
  const fortran = (/'fortran_order':\s*(\w+)/.exec(header) || [])[1];
  const shape = (/'shape':\s*\(([^)]*)\)/.exec(header) || [])[1];
  if (!npyTypes[descr]) return {error: `dtype '${descr}' is not supported`};
  if (fortran !== 'False') return {error: 'Fortran order is not supported'};
  if (shape === undefined) return {error: 'no shape in the .npy header'};
  const sizes = shape.split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  return {type: npyTypes[descr], sizes, data: bytes.subarray(offset)};
}

const repositories = [];  // {configMap, files: Map name -> Buffer, tensors}
for (const configMap of byKind('ConfigMap')) {
  const data = configMap.obj.data || {};
  const binary = configMap.obj.binaryData || {};
  const files = new Map();
  let total = 0;
  for (const [key, value] of Object.entries(data)) {
    check(/^[-._a-zA-Z0-9]+$/.test(key), configMap.where, `key ${key}: only letters, digits, -, _ and .`);
    check(typeof value === 'string', configMap.where, `data.${key}: must be a string`);
    files.set(key, Buffer.from(String(value), 'utf8'));
    total += key.length + Buffer.byteLength(String(value));
  }
  for (const [key, value] of Object.entries(binary)) {
    check(/^[-._a-zA-Z0-9]+$/.test(key), configMap.where, `key ${key}: only letters, digits, -, _ and .`);
    check(!(key in data), configMap.where, `key ${key}: in both data and binaryData`);
    const valid = typeof value === 'string' && /^[A-Za-z0-9+/]*={0,2}$/.test(value.replace(/\s/g, '')) &&
      value.replace(/\s/g, '').length % 4 === 0;
    if (!check(valid, configMap.where, `binaryData.${key}: not base64`)) continue;
    const bytes = Buffer.from(value, 'base64');
    files.set(key, bytes);
    total += key.length + bytes.length;
  }
  check(total <= 1024 * 1024, configMap.where, `${total} bytes: a ConfigMap holds at most 1 MiB`);
  if (!files.has('manifest.json')) continue;
  const where = `${configMap.where}: manifest.json`;
  let manifest;
  try {
    manifest = JSON.parse(files.get('manifest.json').toString('utf8'));
  } catch (error) {
    fail(where, `not JSON: ${error.message}`);
    continue;
  }
  if (!check(manifest && Array.isArray(manifest.tensors), where, 'needs "tensors", a list')) continue;
  const ids = new Set();
  manifest.tensors.forEach((entry, i) => {
    const at = `${where}: tensors[${i}]`;
    if (!check(entry && typeof entry.id === 'string' && /^[\x21-\x7e]{1,256}$/.test(entry.id), at,
      'needs "id": printable ASCII without spaces, at most 256 characters')) return;
    check(!ids.has(entry.id), at, `id ${entry.id} is given twice`);
    ids.add(entry.id);
    if (!check(typeof entry.file === 'string' && files.has(entry.file), at,
      `file ${JSON.stringify(entry.file)} is not a key of the ConfigMap`)) return;
    const bytes = files.get(entry.file);
    let type = entry.data_type;
    let sizes = entry.sizes;
    let payload = bytes;
    if (entry.file.endsWith('.npy')) {
      const npy = parseNpy(bytes);
      if (!check(!npy.error, at, `${entry.file}: ${npy.error}`)) return;
      check(type === undefined || type === npy.type, at, `data_type ${type} but the file holds ${npy.type}`);
      check(sizes === undefined || JSON.stringify(sizes) === JSON.stringify(npy.sizes), at,
        `sizes ${JSON.stringify(sizes)} differ from the .npy shape ${JSON.stringify(npy.sizes)}`);
      type = npy.type;
      sizes = npy.sizes;
      payload = npy.data;
    } else if (!check(type !== undefined && Array.isArray(sizes), at,
      'a raw file needs "data_type" and "sizes"')) return;
    if (!check(elementBytes[type], at,
      `data_type ${type}: expected one of ${Object.keys(elementBytes).join(', ')}`)) return;
    if (!check(Array.isArray(sizes) && sizes.length > 0 && sizes.every((s) => Number.isInteger(s) && s >= 0),
      at, 'sizes must be a list of sizes')) return;
    const expected = sizes.reduce((a, b) => a * b, 1) * elementBytes[type];
    check(payload.length === expected, at,
      `${entry.file}: ${payload.length} bytes, expected ${expected} for ${type} sizes ${JSON.stringify(sizes)}`);
  });
  repositories.push({configMap, files, tensors: manifest.tensors.length});
}

// ---------------------------------------------------------------------------
// 5. The real server, when given.

function startServer(args, env, label) {
  const child = childProcess.spawn(options.server, args, {env: {...process.env, ...env},
    stdio: ['ignore', 'pipe', 'pipe']});
  const state = {child, stdout: '', stderr: '', exited: null, label};
  child.stdout.on('data', (d) => { state.stdout += d; });
  child.stderr.on('data', (d) => { state.stderr += d; });
  state.done = new Promise((resolve) => child.on('exit', (code, signal) => {
    state.exited = {code, signal};
    resolve(state.exited);
  }));
  return state;
}

async function waitFor(predicate, seconds) {
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    const value = predicate();
    if (value) return value;
    await new Promise((r) => setTimeout(r, 50));
  }
  return predicate();
}

// The body at `url`; empty if the server cannot be reached (its absence is reported by the caller).
function getText(url) {
  return new Promise((resolve) => {
    http.get(url, (response) => {
      let body = '';
      response.on('data', (d) => { body += d; });
      response.on('end', () => resolve(body));
    }).on('error', () => resolve(''));
  });
}

async function serving(state) {
  const ready = await waitFor(() => state.exited ||
    (/serving gRPC on /.test(state.stdout) && /serving metrics on (\S+)/.exec(state.stdout)), 60);
  if (!ready || state.exited) {
    const last = state.stderr.trim().split('\n').pop();
    fail(state.label, `the server did not start (${state.exited ? `exit code ${state.exited.code}` :
      'no "serving" lines within 60 s'}): ${last}`);
    state.reported = true;
    return undefined;
  }
  return /serving metrics on (\S+)/.exec(state.stdout)[1];
}

async function stop(state) {
  if (!state.exited) state.child.kill('SIGTERM');
  let timer;
  const exited = await Promise.race([state.done,
    new Promise((r) => { timer = setTimeout(() => r(null), 40000); })]);
  clearTimeout(timer);
  if (!exited) {
    state.child.kill('SIGKILL');
    fail(state.label, 'did not stop within 40 s of SIGTERM');
  } else if (!state.reported) {
    check(exited.code === 0, state.label,
      `exit ${JSON.stringify(exited)} after SIGTERM: ${state.stderr.trim().split('\n').pop()}`);
  }
}

// Lays files out as kubelet mounts a ConfigMap: DIR/..<timestamp>/ holds
// them, DIR/..data links there, DIR/<key> links to ..data/<key>.
function kubeletLayout(directory, files, generation) {
  fs.mkdirSync(directory, {recursive: true});
  const version = `..2024_01_0${generation}_00_00_00.000000000`;
  fs.mkdirSync(path.join(directory, version));
  for (const [key, bytes] of files) fs.writeFileSync(path.join(directory, version, key), bytes);
  const temporary = path.join(directory, '..data_tmp');
  fs.symlinkSync(version, temporary);
  fs.renameSync(temporary, path.join(directory, '..data'));  // the atomic swap
  for (const key of files.keys()) {
    const link = path.join(directory, key);
    if (!fs.existsSync(link)) fs.symlinkSync(path.join('..data', key), link);
  }
}

function metricValue(text, name) {
  const match = new RegExp(`^${name.replace(/[{}"=]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text);
  return match ? Number(match[1]) : undefined;
}

async function withServer() {
  if (!fs.existsSync(options.server)) {
    fail('--server', `${options.server} does not exist`);
    return;
  }
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'dmlserve-manifests-'));
  try {
    // Each repository, mounted kubelet-style, loads; a swap and SIGHUP reload it.
    for (const repository of repositories) {
      const label = `${repository.configMap.where} (real server)`;
      const directory = path.join(scratch, `repository-${repository.configMap.obj.metadata.name}`);
      kubeletLayout(directory, repository.files, 1);
      repository.directory = directory;
      const state = startServer(['--listen=127.0.0.1:0', '--metrics_listen=127.0.0.1:0',
        `--tensor_repository=${directory}`], {}, label);
      const metricsUrl = await serving(state);
      repository.loaded = Boolean(metricsUrl);
      if (metricsUrl) {
        check(state.stderr.includes(`tensor repository ${directory}: ${repository.tensors} tensors`), label,
          `the server did not report loading ${repository.tensors} tensors: ${state.stderr.trim()}`);
        check(metricValue(await getText(metricsUrl), 'dmlserve_tensor_repository_tensors') === repository.tensors,
          label, 'dmlserve_tensor_repository_tensors does not count the repository');
        kubeletLayout(directory, repository.files, 2);
        state.child.kill('SIGHUP');
        let reloaded = false;
        for (const end = Date.now() + 20000; !reloaded && Date.now() < end;) {
          await new Promise((r) => setTimeout(r, 100));
          reloaded = metricValue(await getText(metricsUrl),
            'dmlserve_tensor_repository_reloads_total{result="ok"}') === 1;
        }
        check(reloaded, label,
          `no successful reload after a kubelet-style swap and SIGHUP: ${state.stderr.trim()}`);
      }
      await stop(state);
    }

    // Every server container starts with its manifest's flags.
    let tlsFiles;
    for (const server of servers) {
      const label = `${server.where} (real server, its flags)`;
      const args = [];
      let skip = false;
      for (const [name, value] of server.flags) {
        if (name === 'listen' || name === 'metrics_listen') {
          args.push(`--${name}=127.0.0.1:0`);
        } else if (name === 'tensor_repository') {
          const repository = (server.template.repository &&
            repositories.find((r) => r.configMap === server.template.repository)) || repositories[0];
          if (!check(repository && repository.directory, label, 'no repository to stand in for the volume') ||
            !repository.loaded) {  // a repository that did not load is reported above
            skip = true;
            continue;
          }
          args.push(`--tensor_repository=${repository.directory}`);
        } else if (/^tls_/.test(name)) {
          if (!tlsFiles) tlsFiles = makeTlsFiles(scratch);
          if (!check(tlsFiles, label, 'openssl is needed to stand in for the TLS files')) {
            skip = true;
            continue;
          }
          args.push(`--${name}=${name === 'tls_key_file' ? tlsFiles.key : tlsFiles.cert}`);
        } else if (name === 'backend' && value === 'd3d12') {
          args.push('--backend=auto');  // no GPU here: auto falls back to the CPU
        } else {
          args.push(value === undefined ? `--${name}` : `--${name}=${value}`);
        }
      }
      const env = {};
      for (const variable of server.container.env || []) {
        if (variable.value !== undefined) env[variable.name] = String(variable.value);
        const ref = variable.valueFrom && variable.valueFrom.resourceFieldRef;
        if (ref && ref.resource === 'requests.cpu') {  // whole CPUs, rounded up, as the kubelet gives them
          const cpu = String(((server.container.resources || {}).requests || {}).cpu || '1');
          env[variable.name] = String(Math.ceil(cpu.endsWith('m') ? parseFloat(cpu) / 1000 : parseFloat(cpu)));
        }
      }
      if (skip) continue;
      const state = startServer(args, env, label);
      await serving(state);
      await stop(state);
    }
  } finally {
    fs.rmSync(scratch, {recursive: true, force: true});
  }
}

function makeTlsFiles(scratch) {
  const key = path.join(scratch, 'tls.key');
  const cert = path.join(scratch, 'tls.pem');
  const result = childProcess.spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes',
    '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=localhost'], {stdio: 'ignore'});
  return result.status === 0 ? {key, cert} : undefined;
}

(async () => {
  if (options.server) await withServer();
  const summary = `${files.length} files, ${objects.length} objects, ${checks} checks`;
  if (errors.length) {
    for (const error of errors) console.error(`FAIL ${error}`);
    console.error(`check_manifests: ${errors.length} problems in ${manifestDir} (${summary})`);
    process.exit(1);
  }
  console.log(`check_manifests: ${manifestDir}: no problems (${summary})`);
  for (const file of files) {
    const list = objects.filter((o) => o.file === file).map((o) => `${o.obj.kind}/${o.obj.metadata.name}`);
    console.log(`  ${file}: ${list.join(', ')}`);
  }
  if (options.server) {
    console.log(`  real server: ${repositories.length} ConfigMap repositories loaded and reloaded ` +
      `(SIGHUP after a kubelet-style swap), ${servers.length} server containers started with their flags`);
  }
})().catch((error) => {
  console.error(`check_manifests: ${error.stack || error}`);
  process.exit(1);
});
