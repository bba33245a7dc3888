// Drives the real posthog-node SDK against a running hedgerow and reports what it sent.
//
//   node tests/node/sdk_test.mjs <host> <project api key> <bulk count> [out.json]
//
// Sends a few hand-written events (rich properties, explicit timestamps and uuids),
// identify / alias / groupIdentify, then <bulk count> captures, and awaits shutdown().
// Compression is left at the SDK default (gzip). Writes one JSON object to out.json (or
// stdout): { lib, sent: [wire messages], flushed: [uuids], errors: [strings] }. The Python
// side (tests/py/test_sdk_node.py) checks every sent event against the table.
// Exit code 0 unless the script itself broke; SDK errors are reported in `errors`.

import { writeFileSync, readFileSync } from 'node:fs'
import { PostHog } from 'posthog-node'

const [host, token, countArg, outPath] = process.argv.slice(2)
if (!host || !token) {
  console.error('usage: sdk_test.mjs <host> <token> <count> [out.json]')
  process.exit(2)
}
const bulkCount = Number.parseInt(countArg ?? '3000', 10)

// Seeded PRNG (mulberry32) so that the events are the same on every run.
function rng(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
const rand = rng(20240611)
const randInt = (n) => Math.floor(rand() * n)
const uuidFromRng = () => {
  const h = Array.from({ length: 32 }, () => randInt(16).toString(16))
  h[12] = '4'
  h[16] = '89ab'[randInt(4)]
  const s = h.join('')
  return `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20)}`
}

const client = new PostHog(token, {
  host,
  flushAt: 100,
  flushInterval: 200,
  maxBatchSize: 100,
  maxQueueSize: 100000,
  requestTimeout: 30000,
  fetchRetryCount: 2,
})

const sent = []
const flushed = new Set()
const errors = []
// The SDK emits each message as it is queued (same object that goes on the wire).
for (const type of ['capture', 'identify', 'alias']) {
  client.on(type, (message) => {
    if (typeof message === 'string') errors.push(`${type}: ${message}`)
    else sent.push(JSON.parse(JSON.stringify(message)))
  })
}
client.on('flush', (messages) => {
  for (const m of messages) flushed.add(m.uuid)
})
client.on('error', (err) => errors.push(String(err?.stack ?? err)))

const now = Date.now() - (Date.now() % 1000)
const at = (msAgo) => new Date(now - msAgo)

client.capture({
  distinctId: 'node-user-1',
  event: 'node signed up',
  uuid: uuidFromRng(),
  timestamp: at(600_000),
  properties: {
    plan: 'team', seats: 12, price: 49.99, active: true, cancelled: false, coupon: null,
    list: [1, 'two', { three: 3 }], nested: { deep: { deeper: 'yes' } }, unicode: 'éß漢字🦔',
  },
})
client.capture({
  distinctId: 'node-user-1',
  event: '$pageview',
  timestamp: at(500_123),
  properties: {
    $current_url: 'https://app.example.org/dashboard?tab=2', $pathname: '/dashboard',
    $browser: 'Edge', $os: 'Windows', $device_type: 'Desktop',
    $session_id: 'node-session-1', $window_id: 'node-window-1',
  },
})
client.capture({
  distinctId: 'node-user-2',
  event: 'exact time',
  timestamp: at(400_456),
  properties: { $ignore_sent_at: true, note: 'no skew correction for this one' },
})
client.capture({
  distinctId: 'node-user-2',
  event: 'grouped',
  groups: { company: 'node-co' },
  properties: { $browser: 'Chrome' },
})
client.capture({ distinctId: 'node-user-3', event: 'no properties and no timestamp' })
client.identify({
  distinctId: 'node-user-4',
  properties: { $set: { email: 'four@example.org', plan: 'free' }, $set_once: { first: 'node' } },
})
client.alias({ distinctId: 'node-user-5', alias: 'node-anon-5' })
client.groupIdentify({
  groupType: 'company', groupKey: 'node-co', distinctId: 'node-user-2',
  properties: { name: 'Node Co', size: 7 },
})

for (let i = 0; i < bulkCount; i++) {
  const properties = { i, odd: i % 2 === 1, bucket: `b${i % 11}`, ratio: i / 4 }
  if (i % 500 === 0) properties.$ignore_sent_at = true
  if (i % 25 === 0) properties.$current_url = `https://app.example.org/items/${i}`
  client.capture({
    distinctId: `node-bulk-${i % 31}`,
    event: i % 3 === 0 ? 'node_bulk_a' : 'node_bulk_b',
    timestamp: at(3_600_000 - i * 53 - randInt(50)),
    properties,
  })
}

await client.shutdown(120_000)

const pkg = JSON.parse(
  readFileSync(new URL('./node_modules/posthog-node/package.json', import.meta.url), 'utf8'),
)
const result = JSON.stringify({
  lib: { name: 'posthog-node', version: pkg.version },
  sent,
  flushed: [...flushed],
  errors,
})
if (outPath) writeFileSync(outPath, result)
else process.stdout.write(result + '\n')
