// A producer in Node (the npm `redis` client, v4): publishes N jobs of a Django task
// through the wire protocol (docs/protocol.md) and prints each job's id, one a line.
//
//   node publish.mjs REDIS_URL PREFIX QUEUE TASK N
//
// Job i (from 1) calls TASK(i, 100 * i). The npm module is looked up from the folder
// named by ZQ_NODE_PREFIX (where `npm install --prefix <it> redis@4` put it), else from
// here upward.
import { createRequire } from 'node:module';
import { join } from 'node:path';

const base = process.env.ZQ_NODE_PREFIX ?? process.cwd();
const require = createRequire(join(base, 'package.json'));
const { createClient } = require('redis');

const [url, prefix, queue, task, count] = process.argv.slice(2);
if (!count) {
  console.error('usage: node publish.mjs REDIS_URL PREFIX QUEUE TASK N');
  process.exit(2);
}
const tag = `{${prefix}:${queue}}`;
const names = ['ready', 'delayed', 'body', 'meta', 'ctr', 'notify', 'stats', 'dead', 'leased',
  'wait', 'expiry', 'expired', 'gjobs', 'proto'];
const keys = names.map((name) => `${tag}:${name}`);

const client = createClient({ url });
client.on('error', (err) => {
  console.error(err);
  process.exit(1);
});
await client.connect();
try {
  for (let i = 1; i <= Number(count); i++) {
    const body = JSON.stringify({ task, args: [i, 100 * i], kwargs: {} });
    const options = JSON.stringify({ priority: i % 3 });
    const reply = await client.sendCommand(
      ['FCALL', 'zq1_publish', String(keys.length), ...keys, '1', body, options]);
    if (reply[0] !== 'ok') {
      throw new Error(`job ${i}: ${JSON.stringify(reply)}`);
    }
    console.log(reply[1]);
  }
} finally {
  await client.quit();
}
