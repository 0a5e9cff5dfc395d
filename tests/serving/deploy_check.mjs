// Reads the Kubernetes manifests in deploy/ (js-yaml from tests/node) and prints, as one
// JSON line, what serving_router_test.cpp checks against a running memra-host: the
// memra container's probes, port, drain timeout flag and grace period, and the metric
// names the endpoint picker is told.   node deploy_check.mjs DEPLOY_DIR  (MEMRA_NODE_DIR set)
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [dir] = process.argv.slice(2);
const nodeDir = process.env.MEMRA_NODE_DIR;
if (!dir || !nodeDir) throw new Error("usage: DEPLOY_DIR (MEMRA_NODE_DIR set)");
const yaml = (await import(pathToFileURL(path.join(nodeDir, "node_modules/js-yaml/index.js")).href)).default;

const docs = [];
for (const f of fs.readdirSync(dir).filter((f) => f.endsWith(".yaml")).sort()) {
  for (const d of yaml.loadAll(fs.readFileSync(path.join(dir, f), "utf8"))) if (d) docs.push({ file: f, ...d });
}
const kinds = docs.map((d) => d.kind);
const byName = (kind, name) => docs.find((d) => d.kind === kind && d.metadata?.name === name);

const memra = byName("Deployment", "memra");
if (!memra) throw new Error("no Deployment memra");
const pod = memra.spec.template.spec;
const c = pod.containers.find((x) => x.name === "memra");
const portByName = Object.fromEntries((c.ports ?? []).map((p) => [p.name, p.containerPort]));
const probe = (p) => p && { path: p.httpGet.path, port: portByName[p.httpGet.port] ?? p.httpGet.port,
                            period: p.periodSeconds ?? 10, failures: p.failureThreshold ?? 3 };
const flag = (args, name) => {
  for (const a of args ?? []) if (a.startsWith(`--${name}=`)) return a.slice(name.length + 3);
  const i = (args ?? []).indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : null;
};
const drain = flag(c.args, "drain-timeout-ms");
const port = flag(c.args, "port");

const pool = docs.find((d) => d.kind === "InferencePool");
const epp = pool && byName("Deployment", pool.spec.endpointPickerRef.name);
const eppArgs = epp?.spec.template.spec.containers[0].args ?? [];
const metrics = {};
for (const f of ["total-queued-requests-metric", "total-running-requests-metric", "kv-cache-usage-percentage-metric",
                 "cache-info-metric", "lora-info-metric"]) metrics[f] = flag(eppArgs, f);

console.log(JSON.stringify({
  kinds,
  grace_seconds: pod.terminationGracePeriodSeconds ?? 30,
  pre_stop_seconds: c.lifecycle?.preStop?.sleep?.seconds ?? 0,
  drain_timeout_ms: drain === null ? null : Number(drain),
  listen_port: port === null ? null : Number(port),
  container_port: portByName.http ?? null,
  readiness: probe(c.readinessProbe),
  liveness: probe(c.livenessProbe),
  startup: probe(c.startupProbe),
  service_selects: byName("Service", "memra")?.spec.selector ?? null,
  pod_labels: memra.spec.template.metadata.labels,
  pool_selects: pool?.spec.selector.matchLabels ?? null,
  pool_ports: pool?.spec.targetPorts?.map((p) => p.number) ?? null,
  epp_service: pool ? !!byName("Service", pool.spec.endpointPickerRef.name) : false,
  epp_metrics: metrics,
}));
