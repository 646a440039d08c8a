// Reference: Cumulus v21 generateUniqueGranuleId (deterministic form) in
// Node.js. Reads "hex(id)\thex(collectionId)\thashLength" lines, writes
// hex(UTF-8 of the unique ID) lines.
const crypto = require('crypto');
const readline = require('readline');

function uniqueId(id, collectionId, hashLength) {
  const hash = crypto.createHash('md5').update(collectionId).digest('base64url')
    .replace(/_/g, '').slice(0, hashLength);
  return `${id}_${hash}`;
}

const rl = readline.createInterface({ input: process.stdin });
const out = [];
rl.on('line', (line) => {
  const [id, coll, len] = line.split('\t');
  const s = uniqueId(Buffer.from(id, 'hex').toString('utf8'), Buffer.from(coll, 'hex').toString('utf8'), Number(len));
  out.push(Buffer.from(s, 'utf8').toString('hex'));
});
rl.on('close', () => process.stdout.write(out.join('\n') + '\n'));
