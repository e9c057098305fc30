// Validate rendered custom resources against the schemas of KEDA and the Prometheus
// Operator (compiled from their CRDs by the kubernetes-models packages; pinned in
// package-lock.json, installed by `npm ci` in .ci/run / make test). Reads a JSON list of
// objects, prints one line per object, exits 1 if any fails.
import { readFileSync } from "node:fs";
import { ScaledObject, TriggerAuthentication } from "@kubernetes-models/keda/keda.sh/v1alpha1";
import { PrometheusRule, ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";

const kinds = { ScaledObject, TriggerAuthentication, ServiceMonitor, PrometheusRule };
const docs = JSON.parse(readFileSync(process.argv[2], "utf8"));
let failed = 0;
for (const doc of docs) {
  const Model = kinds[doc.kind];
  if (!Model) {
    console.log(`FAIL ${doc.kind}: no schema here`);
    failed++;
    continue;
  }
  try {
    new Model(doc).validate();
    console.log(`ok ${doc.kind}/${doc.metadata.name}`);
  } catch (e) {
    console.log(`FAIL ${doc.kind}/${doc.metadata.name}: ${e.message}`);
    failed++;
  }
}
process.exit(failed ? 1 : 0);
