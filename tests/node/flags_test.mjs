// Drives posthog-node's feature flags against a running hedgerow and reports the answers;
// tests/py/test_sdk_flags.py compares them with its reference computation of PostHog's hash.
//
//   node tests/node/flags_test.mjs <host> <project api key> <personal api key> <ids> <out.json>
//
// Remote: getAllFlags for each id (POST /flags/?v=2), a person flag decided by the stored
// person, a group flag per group key, a payload. Local: the definitions polled from
// /flags/definitions, every id evaluated with onlyEvaluateLocally.

import { writeFileSync } from 'node:fs'
import { PostHog } from 'posthog-node'

const [host, token, personalKey, countArg, outPath] = process.argv.slice(2)
if (!host || !token || !personalKey || !outPath) {
  console.error('usage: flags_test.mjs <host> <token> <personal key> <ids> <out.json>')
  process.exit(2)
}
const n = Number.parseInt(countArg ?? '1000', 10)
const keys = ['rollout-30', 'three-way']
const result = { remote: {}, local: {}, group: {}, errors: [] }

const remote = new PostHog(token, { host, flushAt: 1, featureFlagsRequestTimeoutMs: 15000 })
remote.on('error', (e) => result.errors.push(String(e)))
for (let i = 0; i < n; i++) {
  const id = `node-${i}`
  const all = await remote.getAllFlags(id)
  result.remote[id] = Object.fromEntries(keys.map((k) => [k, all[k]]))
}
result.pro_remote = await remote.getFeatureFlag('pro-plan', 'pro-user')
for (const g of ['acme', 'globex', 'initech', 'umbrella']) {
  result.group[g] = await remote.getFeatureFlag('org-half', 'someone', { groups: { company: g } })
}
const withTest = Object.keys(result.remote).find((id) => result.remote[id]['three-way'] === 'test')
result.payload = await remote.getFeatureFlagPayload('three-way', withTest)
await remote.shutdown()

const local = new PostHog(token, {
  host,
  personalApiKey: personalKey,
  featureFlagsPollingInterval: 300000,
  featureFlagsRequestTimeoutMs: 15000,
})
local.on('error', (e) => result.errors.push(String(e)))
if (!(await local.waitForLocalEvaluationReady(15000))) {
  console.error('local evaluation never became ready', result.errors)
  process.exit(1)
}
for (let i = 0; i < n; i++) {
  const id = `node-${i}`
  const answers = {}
  for (const k of keys) {
    answers[k] = await local.getFeatureFlag(k, id, {
      onlyEvaluateLocally: true,
      sendFeatureFlagEvents: false,
    })
  }
  result.local[id] = answers
}
result.pro_local = await local.getFeatureFlag('pro-plan', 'x', {
  personProperties: { plan: 'pro' },
  onlyEvaluateLocally: true,
  sendFeatureFlagEvents: false,
})
await local.shutdown()

writeFileSync(outPath, JSON.stringify(result))
